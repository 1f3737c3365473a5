#include <cmath>
#include <cstdio>

#include "meganeura/ops/helpers.hpp"

namespace meganeura {

namespace ops {

void OpTable::add(OpDef d) {
  if (d.op == Op::Count_ || size_t(d.op) >= size_t(Op::Count_) || !d.shape)
    throw GraphError("[OpTable::add] expected a row with op and shape rule, got an incomplete row");
  d.name = op_name(d.op);
  OpDef& slot = rows_[size_t(d.op)];
  if (slot.name)
    throw GraphError("[OpTable::add] expected one row per op, got a second row for " + std::string(d.name));
  slot = d;
}

const OpDef* OpTable::find(Op op) const {
  if (size_t(op) >= size_t(Op::Count_)) return nullptr;
  const OpDef& d = rows_[size_t(op)];
  return d.name ? &d : nullptr;
}

const OpTable& table() {
  static const OpTable t = [] {
    OpTable t;
    register_leaf(t);
    register_elementwise(t);
    register_matmul(t);
    register_reduce(t);
    register_loss(t);
    register_movement_basic(t);
    register_norm(t);
    register_movement(t);
    register_vision(t);
    register_attention(t);
    register_state(t);
    register_sample(t);
    return t;
  }();
  return t;
}

bool registered(Op op) { return table().find(op) != nullptr; }

const OpDef& def(Op op) {
  const OpDef* d = table().find(op);
  if (!d)
    throw GraphError("[Graph::make] expected an op with a table row, got '" + std::string(op_name(op)) +
                     "' which is not implemented yet (no row registered in ops/)");
  return *d;
}

}  // namespace ops

int op_arity(Op op) { return ops::def(op).arity; }
TypeInfo infer_type(const ShapeCtx& ctx) { return ops::def(ctx.op).shape(ctx); }

namespace ops {

const char* pointwise_glsl_prelude() {
  static const std::string prelude = std::string(pointwise_glsl_functions()) + round_to_format_glsl();
  return prelude.c_str();
}

const char* pointwise_glsl_functions() {
  // NaN and Inf follow the float64 reference and PyTorch. GLSL leaves max, min, clamp and sign of a NaN, and
  // log, sqrt and inversesqrt outside their domain, undefined (drivers differ): those cases are spelled out.
  // erf: Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7, below f32 resolution near 1).
  // tanh: the builtin may overflow exp for large |x| on some drivers; clamp first (NaN passed through).
  return R"(#define MN_INF uintBitsToFloat(0x7F800000u)
#define MN_NAN uintBitsToFloat(0x7FC00000u)
float mn_max(float a, float b) { return isnan(a) || isnan(b) ? a + b : max(a, b); }
float mn_min(float a, float b) { return isnan(a) || isnan(b) ? a + b : min(a, b); }
float mn_relu(float x) { return x > 0.0 || isnan(x) ? x : 0.0; }
float mn_clamp(float x, float lo, float hi) { return isnan(x) ? x : clamp(x, lo, hi); }
float mn_sign(float x) { return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : 0.0); }  // NaN -> 0, as torch.sign
float mn_log(float x) { return x > 0.0 ? log(x) : (x == 0.0 ? -MN_INF : (isnan(x) ? x : MN_NAN)); }
float mn_sqrt(float x) { return x >= 0.0 ? sqrt(x) : (isnan(x) ? x : MN_NAN); }
float mn_rsqrt(float x) { return x > 0.0 ? inversesqrt(x) : (x == 0.0 ? 1.0 / x : (isnan(x) ? x : MN_NAN)); }
float mn_erf(float x) {
  if (isnan(x)) return x;
  float s = sign(x);
  float a = abs(x);
  float t = 1.0 / (1.0 + 0.3275911 * a);
  float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-a * a);
  return s * y;
}
float mn_tanh(float x) { return isnan(x) ? x : tanh(clamp(x, -15.0, 15.0)); }
float mn_sigmoid(float x) { return x >= 0.0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }
// GLSL pow is undefined for a negative base or a zero base with b <= 0; C pow semantics instead (as the
// reference's std::pow and torch.pow).
float mn_pow(float a, float b) {
  if (b == 0.0 || a == 1.0) return 1.0;
  if (isnan(a) || isnan(b)) return a + b;
  if (isinf(b)) return abs(a) == 1.0 ? 1.0 : ((abs(a) > 1.0) == (b > 0.0) ? MN_INF : 0.0);
  bool odd = fract(b) == 0.0 && mod(b, 2.0) == 1.0;
  if (a > 0.0) return pow(a, b);
  if (a == 0.0) {
    float r = b > 0.0 ? 0.0 : MN_INF;
    return odd && (floatBitsToUint(a) >> 31) != 0u ? -r : r;
  }
  if (fract(b) != 0.0) return isinf(a) ? (b > 0.0 ? MN_INF : 0.0) : MN_NAN;
  float r = isinf(a) ? (b > 0.0 ? MN_INF : 0.0) : pow(-a, b);
  return odd ? -r : r;
}
float mn_softplus(float x) { return mn_max(x, 0.0) + log(1.0 + exp(-abs(x))); }
float mn_gelu(float x, float tanh_form) {
  if (tanh_form != 0.0) {
    return 0.5 * x * (1.0 + mn_tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1.0 + mn_erf(x * 0.7071067811865476));
}
float mn_gelu_grad(float x, float g, float tanh_form) {
  if (tanh_form != 0.0) {
    float u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
    float t = mn_tanh(u);
    return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 0.134145 * x * x));
  }
  return g * (0.5 * (1.0 + mn_erf(x * 0.7071067811865476)) + x * 0.3989422804014327 * exp(-0.5 * x * x));
}
)";
}

std::string float_lit(double v) {
  if (std::isnan(v)) return "uintBitsToFloat(0x7FC00000u)";
  if (std::isinf(v)) return v > 0 ? "uintBitsToFloat(0x7F800000u)" : "uintBitsToFloat(0xFF800000u)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return v < 0 ? "(" + s + ")" : s;
}

std::string expand_glsl(const OpDef& d, const Node& node, const std::vector<std::string>& operands) {
  if (!d.glsl) throw GraphError("[expand_glsl] expected a pointwise op, got " + std::string(d.name));
  std::string out;
  for (const char* p = d.glsl; *p; ++p) {
    if (*p != '$') {
      out += *p;
      continue;
    }
    char c = p[1];
    if (c >= '0' && c <= '9') {
      size_t i = size_t(c - '0');
      if (i >= operands.size())
        throw GraphError("[expand_glsl] template of " + std::string(d.name) + " uses a missing operand");
      out += "(" + operands[i] + ")";
      ++p;
    } else if (c == 'r' && p[2] >= '0' && p[2] <= '9') {
      size_t i = size_t(p[2] - '0');
      if (i >= node.attrs.reals.size())
        throw GraphError("[expand_glsl] template of " + std::string(d.name) + " uses a missing real");
      out += float_lit(node.attrs.reals[i]);
      p += 2;
    } else if (c == 'i' && p[2] >= '0' && p[2] <= '9') {
      size_t i = size_t(p[2] - '0');
      if (i >= node.attrs.ints.size())
        throw GraphError("[expand_glsl] template of " + std::string(d.name) + " uses a missing int");
      out += std::to_string(node.attrs.ints[i]);
      p += 2;
    } else if (c == 'f' && p[2] == 'a') {
      out += node.attrs.flag_a ? "1.0" : "0.0";
      p += 2;
    } else {
      throw GraphError("[expand_glsl] bad template escape in " + std::string(d.name));
    }
  }
  return out;
}

}  // namespace ops
}  // namespace meganeura
