// Unary and binary pointwise ops, where, cast, round_to_format and stop_gradient: shape rules, VJPs, float64
// references and GLSL expression templates.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <string>

#include "meganeura/ir/storage.hpp"
#include "meganeura/ops/helpers.hpp"

namespace meganeura::ops {

namespace {

constexpr double kSqrt2Pi = 0.7978845608028654;     // sqrt(2/pi)
constexpr double kInvSqrt2 = 0.7071067811865476;    // 1/sqrt(2)
constexpr double kInvSqrt2Pi = 0.3989422804014327;  // 1/sqrt(2 pi)

double sigmoid(double x) { return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x)); }

// GELU and its derivative share one definition per form, so forward and backward never disagree.
double gelu(double x, bool tanh_form) {
  if (tanh_form) return 0.5 * x * (1.0 + std::tanh(kSqrt2Pi * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1.0 + std::erf(x * kInvSqrt2));
}
double gelu_grad(double x, bool tanh_form) {
  if (tanh_form) {
    double t = std::tanh(kSqrt2Pi * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kSqrt2Pi * (1.0 + 3.0 * 0.044715 * x * x);
  }
  return 0.5 * (1.0 + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
}

// ---- shape rules ----

TypeInfo unary_float(const ShapeCtx& c) {
  require_float(c, 0);
  return same_as(c);
}
TypeInfo unary_any(const ShapeCtx& c) { return same_as(c); }
// leaky_relu's slope and elu's alpha: the reference, VJP and GLSL read attrs.reals[0] (a Graph::make call
// without it read past the vector: found by fuzz/fuzz_graph.cpp).
TypeInfo unary_float_one_real(const ShapeCtx& c) {
  if (c.attrs.reals.size() != 1)
    c.fail("one real attribute (slope or alpha)", std::to_string(c.attrs.reals.size()) + " reals");
  return unary_float(c);
}
TypeInfo clamp_rule(const ShapeCtx& c) {
  if (c.attrs.reals.size() != 2 || !(c.attrs.reals[0] <= c.attrs.reals[1]))
    c.fail("clamp bounds lo <= hi", c.attrs.reals.size() == 2 ? std::to_string(c.attrs.reals[0]) + " > " +
                                                                    std::to_string(c.attrs.reals[1])
                                                              : "a malformed attribute list");
  return same_as(c);
}
TypeInfo cast_rule(const ShapeCtx& c) { return {c.shape(0), c.attrs.dtype}; }
TypeInfo round_to_format_rule(const ShapeCtx& c) {
  const std::vector<int64_t>& v = c.attrs.ints;
  if (v.size() != 3 || v[0] < 0 || v[0] >= int64_t(NumberFormat::Count_) || (v[1] != 0 && v[1] != 1) ||
      v[2] < 0 || v[2] >= int64_t(FormatRounding::Count_)) {
    std::string got;
    for (int64_t i : v) got += (got.empty() ? "" : ", ") + std::to_string(i);
    c.fail("ints {format 0.." + std::to_string(int(NumberFormat::Count_) - 1) +
               ", saturate 0 or 1, rounding 0..2}",
           "{" + got + "}");
  }
  if (c.dtype(0) != DType::F32) c.fail("an f32 operand", dtype_name(c.dtype(0)));
  // Directed rounding only where ONNX asks for it (and the oracle test covers it): E8M0's round_mode.
  if (v[2] != int64_t(FormatRounding::NearestEven) && v[0] != int64_t(NumberFormat::F8E8M0))
    c.fail("nearest-even rounding for " + std::string(format_info(NumberFormat(v[0])).name) +
               " (up and down: float8_e8m0fnu only)",
           v[2] == int64_t(FormatRounding::Up) ? "up" : "down");
  return same_as(c);
}
TypeInfo gelu_grad_rule(const ShapeCtx& c) {
  require_float(c, 0);
  if (c.shape(0) != c.shape(1))
    c.fail("x and grad of one shape", shape_str(c.shape(0)) + " and " + shape_str(c.shape(1)));
  return same_as(c);
}
TypeInfo binary_rule(const ShapeCtx& c) {
  Shape s = broadcast_all(c);
  return {s, common_dtype(c, 0, 2)};
}
TypeInfo binary_float_rule(const ShapeCtx& c) {
  TypeInfo t = binary_rule(c);
  if (!is_float(t.dtype)) c.fail("floating-point operands", dtype_name(t.dtype));
  return t;
}
TypeInfo where_rule(const ShapeCtx& c) {
  Shape s = broadcast_all(c);
  return {s, common_dtype(c, 1, 3)};
}

// ---- VJP helpers ----

std::vector<NodeId> one(NodeId g) { return {g}; }
NodeId s(Graph& g, double v) { return g.scalar(v); }

// ---- unary VJPs ----

std::vector<NodeId> vjp_neg(VjpCtx& c) { return one(c.g.neg(c.grad)); }
std::vector<NodeId> vjp_abs(VjpCtx& c) { return one(c.g.mul(c.grad, c.g.sign(c.in(0)))); }
std::vector<NodeId> vjp_exp(VjpCtx& c) { return one(c.g.mul(c.grad, c.id)); }
std::vector<NodeId> vjp_log(VjpCtx& c) { return one(c.g.div(c.grad, c.in(0))); }
std::vector<NodeId> vjp_sqrt(VjpCtx& c) { return one(c.g.div(c.g.mul(c.grad, s(c.g, 0.5)), c.id)); }
std::vector<NodeId> vjp_rsqrt(VjpCtx& c) {
  // d x^{-1/2} = -1/2 x^{-3/2} = -1/2 y^3
  Graph& g = c.g;
  return one(g.mul(g.mul(c.grad, s(g, -0.5)), g.mul(c.id, g.square(c.id))));
}
std::vector<NodeId> vjp_reciprocal(VjpCtx& c) { return one(c.g.neg(c.g.mul(c.grad, c.g.square(c.id)))); }
std::vector<NodeId> vjp_square(VjpCtx& c) { return one(c.g.mul(c.grad, c.g.mul(c.in(0), s(c.g, 2.0)))); }
// Activation gradients read the output, not the input, wherever the output decides the slope: then the
// pre-activation has no reader but the activation, and the scheduler fuses the activation into the epilogue
// of the matmul or conv producing it. y > 0 <=> x > 0 for relu (x = 0, -0 and NaN all give a zero slope both
// ways), and for leaky relu / elu with a slope / alpha >= 0 (their negative branch is <= 0 or NaN there).
NodeId positive(VjpCtx& c) {
  bool by_output = c.fwd.op == Op::Relu || c.fwd.attrs.reals[0] >= 0.0;
  return c.g.gt(by_output ? c.id : c.in(0), s(c.g, 0.0));
}
std::vector<NodeId> vjp_relu(VjpCtx& c) { return one(c.g.mul(c.grad, positive(c))); }
std::vector<NodeId> vjp_leaky_relu(VjpCtx& c) {
  Graph& g = c.g;
  NodeId slope = g.where(positive(c), s(g, 1.0), s(g, c.fwd.attrs.reals[0]));
  return one(g.mul(c.grad, slope));
}
std::vector<NodeId> vjp_elu(VjpCtx& c) {
  Graph& g = c.g;  // for x <= 0: d alpha (e^x - 1) = alpha e^x = y + alpha
  NodeId neg_slope = g.add(c.id, s(g, c.fwd.attrs.reals[0]));
  return one(g.mul(c.grad, g.where(positive(c), s(g, 1.0), neg_slope)));
}
std::vector<NodeId> vjp_sigmoid(VjpCtx& c) {
  Graph& g = c.g;
  return one(g.mul(c.grad, g.mul(c.id, g.sub(s(g, 1.0), c.id))));
}
std::vector<NodeId> vjp_tanh(VjpCtx& c) {
  Graph& g = c.g;
  return one(g.mul(c.grad, g.sub(s(g, 1.0), g.square(c.id))));
}
std::vector<NodeId> vjp_silu(VjpCtx& c) {
  Graph& g = c.g;  // d x s(x) = s (1 + x (1 - s))
  NodeId sg = g.sigmoid(c.in(0));
  NodeId d = g.mul(sg, g.add(s(g, 1.0), g.mul(c.in(0), g.sub(s(g, 1.0), sg))));
  return one(g.mul(c.grad, d));
}
std::vector<NodeId> vjp_gelu(VjpCtx& c) {
  Attrs a;
  a.flag_a = c.fwd.attrs.flag_a;
  return one(c.g.make(Op::GeluGrad, {c.in(0), c.grad}, a, {}));
}
std::vector<NodeId> vjp_softplus(VjpCtx& c) { return one(c.g.mul(c.grad, c.g.sigmoid(c.in(0)))); }
std::vector<NodeId> vjp_sin(VjpCtx& c) { return one(c.g.mul(c.grad, c.g.cos(c.in(0)))); }
std::vector<NodeId> vjp_cos(VjpCtx& c) { return one(c.g.neg(c.g.mul(c.grad, c.g.sin(c.in(0))))); }
std::vector<NodeId> vjp_erf(VjpCtx& c) {
  Graph& g = c.g;  // 2/sqrt(pi) e^{-x^2}
  return one(g.mul(c.grad, g.mul(s(g, 1.1283791670955126), g.exp(g.neg(g.square(c.in(0)))))));
}
std::vector<NodeId> vjp_clamp(VjpCtx& c) {
  Graph& g = c.g;
  NodeId inside = g.mul(g.ge(c.in(0), s(g, c.fwd.attrs.reals[0])), g.le(c.in(0), s(g, c.fwd.attrs.reals[1])));
  return one(g.mul(c.grad, inside));
}
// Straight-through inside ±max_finite, zero outside. Rounding is a step function, whose derivative is zero
// almost everywhere: that would stop every gradient through a quantised value. Quantisation-aware training
// passes the gradient through unchanged instead (the straight-through estimator), except where the value was
// clamped to ±max_finite or overflowed, where nothing the input does changes the result (torch's
// fake_quantize masks its gradient the same way). NaN inputs get zero.
std::vector<NodeId> vjp_round_to_format(VjpCtx& c) {
  Graph& g = c.g;
  const double max = format_info(NumberFormat(c.fwd.attrs.ints[0])).max_finite;
  return one(g.mul(c.grad, g.le(g.abs(c.in(0)), s(g, max))));
}
std::vector<NodeId> vjp_cast(VjpCtx& c) {
  DType from = c.g.node(c.in(0)).dtype;
  if (!is_float(from) || !is_float(c.fwd.dtype)) return {NodeId{}};
  return one(from == c.fwd.dtype ? c.grad : c.g.cast(c.grad, from));
}

// ---- binary VJPs (gradients summed back over broadcast axes) ----

std::vector<NodeId> binary_out(VjpCtx& c, NodeId ga, NodeId gb) {
  return {c.needs(0) && ga.valid() ? sum_to_shape(c.g, ga, c.in_shape(0)) : NodeId{},
          c.needs(1) && gb.valid() ? sum_to_shape(c.g, gb, c.in_shape(1)) : NodeId{}};
}
std::vector<NodeId> vjp_add(VjpCtx& c) { return binary_out(c, c.grad, c.grad); }
std::vector<NodeId> vjp_sub(VjpCtx& c) {
  return binary_out(c, c.grad, c.needs(1) ? c.g.neg(c.grad) : NodeId{});
}
std::vector<NodeId> vjp_mul(VjpCtx& c) {
  Graph& g = c.g;
  return binary_out(c, c.needs(0) ? g.mul(c.grad, c.in(1)) : NodeId{},
                    c.needs(1) ? g.mul(c.grad, c.in(0)) : NodeId{});
}
std::vector<NodeId> vjp_div(VjpCtx& c) {
  Graph& g = c.g;  // d a/b: 1/b, -a/b^2 = -y/b
  return binary_out(c, c.needs(0) ? g.div(c.grad, c.in(1)) : NodeId{},
                    c.needs(1) ? g.neg(g.div(g.mul(c.grad, c.id), c.in(1))) : NodeId{});
}
std::vector<NodeId> vjp_pow(VjpCtx& c) {
  Graph& g = c.g;  // d a^b: b a^(b-1), a^b ln a
  NodeId ga, gb;
  if (c.needs(0)) ga = g.mul(c.grad, g.mul(c.in(1), g.pow(c.in(0), g.sub(c.in(1), s(g, 1.0)))));
  if (c.needs(1)) gb = g.mul(c.grad, g.mul(c.id, g.log(c.in(0))));
  return binary_out(c, ga, gb);
}
// Ties split the gradient evenly, as torch does.
std::vector<NodeId> vjp_extremum(VjpCtx& c, bool is_max) {
  Graph& g = c.g;
  NodeId a = c.in(0), b = c.in(1);
  NodeId win_a = is_max ? g.gt(a, b) : g.lt(a, b);
  NodeId tie = g.mul(g.eq(a, b), s(g, 0.5));
  NodeId wa = g.add(win_a, tie);
  NodeId ga, gb;
  if (c.needs(0)) ga = g.mul(c.grad, wa);
  if (c.needs(1)) gb = g.mul(c.grad, g.sub(s(g, 1.0), wa));
  return binary_out(c, ga, gb);
}
std::vector<NodeId> vjp_maximum(VjpCtx& c) { return vjp_extremum(c, true); }
std::vector<NodeId> vjp_minimum(VjpCtx& c) { return vjp_extremum(c, false); }
std::vector<NodeId> vjp_where(VjpCtx& c) {
  Graph& g = c.g;
  NodeId zero = s(g, 0.0);
  NodeId ga = c.needs(1) ? sum_to_shape(g, g.where(c.in(0), c.grad, zero), c.in_shape(1)) : NodeId{};
  NodeId gb = c.needs(2) ? sum_to_shape(g, g.where(c.in(0), zero, c.grad), c.in_shape(2)) : NodeId{};
  return {NodeId{}, ga, gb};
}

// ---- references ----

// Scalar functions of the rows, by op; the rows' reference functions look them up.
using Scalar1 = double (*)(double x, const Attrs& a);
using Scalar2 = double (*)(double a, double b);
Scalar1 unary_fn[size_t(Op::Count_)];
Scalar2 binary_fn[size_t(Op::Count_)];

HostTensor ref_unary(const Node& n, const std::vector<const HostTensor*>& in) {
  Scalar1 f = unary_fn[size_t(n.op)];
  return map_unary(n, *in[0], [&](double x) { return f(x, n.attrs); });
}

HostTensor ref_binary(const Node& n, const std::vector<const HostTensor*>& in) {
  return map_binary(n, *in[0], *in[1], binary_fn[size_t(n.op)]);
}

HostTensor ref_gelu_grad(const Node& n, const std::vector<const HostTensor*>& in) {
  return map_binary(n, *in[0], *in[1], [&](double x, double g) { return g * gelu_grad(x, n.attrs.flag_a); });
}

HostTensor ref_where(const Node& n, const std::vector<const HostTensor*>& in) {
  HostTensor r(n.shape);
  BroadcastIndex ic(in[0]->shape, n.shape), ia(in[1]->shape, n.shape), ib(in[2]->shape, n.shape);
  for (size_t i = 0; i < r.size(); ++i) {
    int64_t k = int64_t(i);
    r[i] = (*in[0])[size_t(ic(k))] != 0.0 ? (*in[1])[size_t(ia(k))] : (*in[2])[size_t(ib(k))];
  }
  return r;
}

struct UnaryRow {
  Op op;
  ShapeRule rule;
  Vjp vjp;
  Scalar1 fn;
  const char* glsl;
};

}  // namespace

// mn_round_to_format(x, format, saturate, rounding): the GLSL twin of ir/number_format's round_to_format,
// step for step in f32 (exact: scaling by powers of two built from their bits, rounding to an integer, and a
// product of at most 5 significant bits). Each format's facts come from format_info as literals, so the
// format's case folds away when the call's format is a literal. One difference is the device's: a device that
// flushes f32 subnormals to zero (Vulkan allows it) reads a subnormal x as ±0, which changes only E8M0's
// rounding up of such an x without saturation (NaN instead of 2^-127). E8M0's results are powers of two built
// from their bits, as 2^-127 is itself an f32 subnormal.
std::string round_to_format_glsl() {
  auto bits_lit = [](double v) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "uintBitsToFloat(0x%08Xu)", std::bit_cast<uint32_t>(float(v)));
    return std::string(buf);
  };
  std::string cases;
  for (int f = 0; f < int(NumberFormat::Count_); ++f) {
    const FormatInfo& i = format_info(NumberFormat(f));
    cases += "    case " + std::to_string(f) + ": mbits = " + std::to_string(i.mantissa_bits) +
             "; emin = " + std::to_string(i.min_exponent) + "; maxv = " + bits_lit(i.max_finite) +
             "; minv = " + bits_lit(format_min_positive(NumberFormat(f))) +
             "; sgn = " + (i.is_signed ? "true" : "false") + "; inf = " + (i.has_inf ? "true" : "false") +
             "; nan = " + std::to_string(int(i.nan)) + "; negzero = " + (i.negative_zero ? "true" : "false") +
             "; zero = " + (i.has_zero ? "true" : "false") + "; break;  // " + i.name + "\n";
  }
  return R"(float mn_pow2(int k) {  // 2^k, k in [-149, 128] (128: +Inf)
  return k >= -126 ? uintBitsToFloat(uint(k + 127) << 23) : uintBitsToFloat(1u << uint(k + 149));
}
float mn_round_to_format(float x, int fmt, int saturate, int rounding) {
  int mbits = 0, emin = 0, nan = 0;
  float maxv = 0.0, minv = 0.0;
  bool sgn = true, inf = false, negzero = true, zero = true;
  switch (fmt) {
)" + cases +
         R"(  }
  uint b = floatBitsToUint(x);
  // The sign as x's bit, or'ed in as bits, never chosen between +0.0 and -0.0 literals: with such a choice the
  // H100 returned -0 for positive x that round to zero (RoundToFormatGpu, 2026-12-06).
  uint sign = sgn ? (b & 0x80000000u) : 0u;
  bool signed_nan = nan == )" +
         std::to_string(int(NanCode::AllOnes)) + " || nan == " + std::to_string(int(NanCode::Ieee)) + R"(;
  float nanv = uintBitsToFloat(0x7FC00000u | (signed_nan ? (b & 0x80000000u) : 0u));
  if (isnan(x)) return nan == 0 ? 0.0 : nanv;
  float r = uintBitsToFloat(0x7F800000u);
  float n = 1.0;
  if (!isinf(x)) {
    uint ab = b & 0x7FFFFFFFu;
    int e = max(int(ab >> 23) - 127, emin);
    // Two normal factors: 2^(mbits - e) alone is the subnormal 2^-127 for E8M0 at e = 127, which a device
    // that flushes subnormals (NVIDIA) reads as 0.
    int k = mbits - e, k1 = k / 2;
    float s = uintBitsToFloat(ab) * mn_pow2(k1) * mn_pow2(k - k1);
    n = rounding == 0 ? roundEven(s) : (rounding == 1 ? ceil(s) : floor(s));
    r = mbits == 0 ? (n == 0.0 ? 0.0 : mn_pow2(e + int(n) - 1)) : n * mn_pow2(e - mbits);
  }
  if (r > maxv) {
    if (saturate != 0 || (!inf && nan == 0)) r = maxv;
    else if (inf) r = uintBitsToFloat(0x7F800000u);
    else return nanv;
  }
  if (n == 0.0) {
    if (!zero) return saturate != 0 ? minv : uintBitsToFloat(0x7FC00000u);
    return uintBitsToFloat(negzero ? sign : 0u);
  }
  return uintBitsToFloat(floatBitsToUint(r) | sign);
}
)";
}

// Reference functions from one scalar expression in x (and the node's attrs a) or in a, b.
#define MN_UNARY_REF(expr) +[](double x, [[maybe_unused]] const Attrs& a) -> double { return expr; }
#define MN_BINARY_REF(expr) +[](double a, double b) -> double { return expr; }

void register_elementwise(OpTable& t) {
  const UnaryRow unary[] = {
      {Op::Neg, unary_any, vjp_neg, MN_UNARY_REF(-x), "-$0"},
      {Op::Abs, unary_any, vjp_abs, MN_UNARY_REF(std::fabs(x)), "abs($0)"},
      {Op::Sign, unary_any, nullptr, MN_UNARY_REF(double((x > 0) - (x < 0))), "mn_sign($0)"},
      {Op::Exp, unary_float, vjp_exp, MN_UNARY_REF(std::exp(x)), "exp($0)"},
      {Op::Log, unary_float, vjp_log, MN_UNARY_REF(std::log(x)), "mn_log($0)"},
      {Op::Sqrt, unary_float, vjp_sqrt, MN_UNARY_REF(std::sqrt(x)), "mn_sqrt($0)"},
      {Op::Rsqrt, unary_float, vjp_rsqrt, MN_UNARY_REF(1.0 / std::sqrt(x)), "mn_rsqrt($0)"},
      {Op::Reciprocal, unary_float, vjp_reciprocal, MN_UNARY_REF(1.0 / x), "1.0 / $0"},
      {Op::Square, unary_any, vjp_square, MN_UNARY_REF(x * x), "$0 * $0"},
      {Op::Relu, unary_any, vjp_relu, MN_UNARY_REF(x > 0 || std::isnan(x) ? x : 0.0), "mn_relu($0)"},
      {Op::LeakyRelu, unary_float_one_real, vjp_leaky_relu, MN_UNARY_REF(x > 0 ? x : a.reals[0] * x),
       "($0 > 0.0 ? $0 : $r0 * $0)"},
      {Op::Elu, unary_float_one_real, vjp_elu, MN_UNARY_REF(x > 0 ? x : a.reals[0] * std::expm1(x)),
       "($0 > 0.0 ? $0 : $r0 * (exp($0) - 1.0))"},
      {Op::Sigmoid, unary_float, vjp_sigmoid, MN_UNARY_REF(sigmoid(x)), "mn_sigmoid($0)"},
      {Op::Tanh, unary_float, vjp_tanh, MN_UNARY_REF(std::tanh(x)), "mn_tanh($0)"},
      {Op::Silu, unary_float, vjp_silu, MN_UNARY_REF(x * sigmoid(x)), "$0 * mn_sigmoid($0)"},
      {Op::Gelu, unary_float, vjp_gelu, MN_UNARY_REF(gelu(x, a.flag_a)), "mn_gelu($0, $fa)"},
      {Op::Softplus, unary_float, vjp_softplus,
       MN_UNARY_REF(std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x)))), "mn_softplus($0)"},
      {Op::Sin, unary_float, vjp_sin, MN_UNARY_REF(std::sin(x)), "sin($0)"},
      {Op::Cos, unary_float, vjp_cos, MN_UNARY_REF(std::cos(x)), "cos($0)"},
      {Op::Erf, unary_float, vjp_erf, MN_UNARY_REF(std::erf(x)), "mn_erf($0)"},
      {Op::Clamp, clamp_rule, vjp_clamp, MN_UNARY_REF(std::min(std::max(x, a.reals[0]), a.reals[1])),
       "mn_clamp($0, $r0, $r1)"},
      // The stored dtype does the conversion; the expression is the value.
      {Op::Cast, cast_rule, vjp_cast, MN_UNARY_REF(dtype_round(x, a.dtype)), "$0"},
      {Op::StopGradient, unary_any, nullptr, MN_UNARY_REF(x), "$0"},
      // The reference reads x as the f32 the device holds (the op's input is f32).
      {Op::RoundToFormat, round_to_format_rule, vjp_round_to_format,
       MN_UNARY_REF(
           round_to_format(float(x), NumberFormat(a.ints[0]), a.ints[1] != 0, FormatRounding(a.ints[2]))),
       "mn_round_to_format($0, $i0, $i1, $i2)"},
  };
  for (const UnaryRow& r : unary) {
    unary_fn[size_t(r.op)] = r.fn;
    t.add({r.op, 1, r.rule, r.vjp, ref_unary, r.glsl});
  }

  t.add({Op::GeluGrad, 2, gelu_grad_rule, nullptr, ref_gelu_grad, "mn_gelu_grad($0, $1, $fa)"});

  struct BinaryRow {
    Op op;
    ShapeRule rule;
    Vjp vjp;
    Scalar2 fn;
    const char* glsl;
  };
  const BinaryRow binary[] = {
      {Op::Add, binary_rule, vjp_add, MN_BINARY_REF(a + b), "$0 + $1"},
      {Op::Sub, binary_rule, vjp_sub, MN_BINARY_REF(a - b), "$0 - $1"},
      {Op::Mul, binary_rule, vjp_mul, MN_BINARY_REF(a * b), "$0 * $1"},
      {Op::Div, binary_float_rule, vjp_div, MN_BINARY_REF(a / b), "$0 / $1"},
      {Op::Pow, binary_float_rule, vjp_pow, MN_BINARY_REF(std::pow(a, b)), "mn_pow($0, $1)"},
      {Op::Maximum, binary_rule, vjp_maximum,
       MN_BINARY_REF(std::isnan(a) || std::isnan(b) ? a + b : std::max(a, b)), "mn_max($0, $1)"},
      {Op::Minimum, binary_rule, vjp_minimum,
       MN_BINARY_REF(std::isnan(a) || std::isnan(b) ? a + b : std::min(a, b)), "mn_min($0, $1)"},
      // Comparisons yield 1 or 0 in the operands' dtype, so masks multiply directly.
      {Op::Eq, binary_rule, nullptr, MN_BINARY_REF(double(a == b)), "float($0 == $1)"},
      {Op::Ne, binary_rule, nullptr, MN_BINARY_REF(double(a != b)), "float($0 != $1)"},
      {Op::Lt, binary_rule, nullptr, MN_BINARY_REF(double(a < b)), "float($0 < $1)"},
      {Op::Le, binary_rule, nullptr, MN_BINARY_REF(double(a <= b)), "float($0 <= $1)"},
      {Op::Gt, binary_rule, nullptr, MN_BINARY_REF(double(a > b)), "float($0 > $1)"},
      {Op::Ge, binary_rule, nullptr, MN_BINARY_REF(double(a >= b)), "float($0 >= $1)"},
  };
  for (const BinaryRow& r : binary) {
    binary_fn[size_t(r.op)] = r.fn;
    t.add({r.op, 2, r.rule, r.vjp, ref_binary, r.glsl});
  }

  t.add({Op::Where, 3, where_rule, vjp_where, ref_where, "($0 != 0.0 ? $1 : $2)"});
}

}  // namespace meganeura::ops
