// Elementwise ONNX ops: activations, arithmetic, comparisons and logic (booleans are 0/1 floats), Cast,
// Where, Clip. Integer results are exact floats; integer division and casts truncate as ONNX says.
#include <cmath>

#include "meganeura/onnx/lower.hpp"
#include "meganeura/onnx/tensor.hpp"

namespace meganeura::onnx {
namespace {

constexpr int32_t kBool = int32_t(ElemType::Bool);

NodeId trunc_node(Graph& g, NodeId x) { return g.cast(g.cast(x, DType::I32), DType::F32); }
NodeId floor_node(Graph& g, NodeId x) {
  NodeId t = trunc_node(g, x);
  return g.sub(t, g.gt(t, x));
}

Converter unary(NodeId (*f)(Lowering&, NodeId)) {
  return [f](Lowering& L) { L.out(0, f(L, L.in(0))); };
}

Converter binary(NodeId (*f)(Lowering&, NodeId, NodeId), bool boolean_result = false) {
  return [f, boolean_result](Lowering& L) {
    if (L.arity() != 2) L.unsupported("", "expected 2 inputs, got " + std::to_string(L.arity()));
    if (L.opset < 7 && L.has("broadcast")) L.attr_i("axis", 0);
    L.out(0, f(L, L.in(0), L.in(1)), boolean_result ? kBool : L.type(0));
  };
}

Converter variadic(NodeId (*f)(Graph&, NodeId, NodeId), bool mean = false) {
  return [f, mean](Lowering& L) {
    NodeId acc = L.in(0);
    for (size_t i = 1; i < L.arity(); ++i) acc = f(L.g, acc, L.in(i));
    if (mean) acc = L.g.div(acc, L.g.scalar(double(L.arity())));
    if (L.arity() == 1) acc = L.g.add(acc, L.g.scalar(0));  // a node of its own for the output's name
    L.out(0, acc);
  };
}

void cast(Lowering& L, int32_t to) {
  const bool saturate = L.attr_i("saturate", 1) != 0;
  const std::string mode = L.attr_s("round_mode", "up");  // float8e8m0 only
  if (mode != "up" && mode != "down" && mode != "nearest")
    L.unsupported("round_mode", "expected up, down or nearest, got " + mode);
  const FormatRounding rounding = mode == "up"     ? FormatRounding::Up
                                  : mode == "down" ? FormatRounding::Down
                                                   : FormatRounding::NearestEven;
  if (!is_numeric_type(to))
    L.unsupported("to", std::string("expected a numeric type, got ") + elem_type_name(to));
  if (!is_numeric_type(L.type(0)))
    L.unsupported("", std::string("expected a numeric input, got ") + elem_type_name(L.type(0)));
  NodeId x = L.in(0);
  NodeId r = L.to_type(x, L.type(0), to, saturate, rounding);
  if (r == x) r = L.g.add(x, L.g.scalar(0));  // keep the output a node of its own
  L.out(0, r, to);
}

}  // namespace

void add_elementwise_ops(ConverterTable& t) {
  t["Identity"] = [](Lowering& L) {
    const Value& v = L.value(0);
    if (v.known && !v.node.valid()) return L.out_known(0, *v.known, v.type);
    L.out(0, L.in(0));
  };
  t["Abs"] = unary([](Lowering& L, NodeId x) { return L.g.abs(x); });
  t["Neg"] = unary([](Lowering& L, NodeId x) { return L.g.neg(x); });
  t["Exp"] = unary([](Lowering& L, NodeId x) { return L.g.exp(x); });
  t["Log"] = unary([](Lowering& L, NodeId x) { return L.g.log(x); });
  t["Sqrt"] = unary([](Lowering& L, NodeId x) { return L.g.sqrt(x); });
  t["Reciprocal"] = unary([](Lowering& L, NodeId x) { return L.g.reciprocal(x); });
  t["Relu"] = unary([](Lowering& L, NodeId x) { return L.g.relu(x); });
  t["Sigmoid"] = unary([](Lowering& L, NodeId x) { return L.g.sigmoid(x); });
  t["Tanh"] = unary([](Lowering& L, NodeId x) { return L.g.tanh(x); });
  t["Erf"] = unary([](Lowering& L, NodeId x) { return L.g.erf(x); });
  t["Sin"] = unary([](Lowering& L, NodeId x) { return L.g.sin(x); });
  t["Cos"] = unary([](Lowering& L, NodeId x) { return L.g.cos(x); });
  t["Tan"] = unary([](Lowering& L, NodeId x) { return L.g.div(L.g.sin(x), L.g.cos(x)); });
  t["Sign"] = unary([](Lowering& L, NodeId x) { return L.g.sign(x); });
  t["Softplus"] = unary([](Lowering& L, NodeId x) { return L.g.softplus(x); });
  t["Softsign"] = unary([](Lowering& L, NodeId x) { return L.g.div(x, L.g.add(L.g.scalar(1), L.g.abs(x))); });
  t["Sinh"] = unary([](Lowering& L, NodeId x) {
    return L.g.mul(L.g.sub(L.g.exp(x), L.g.exp(L.g.neg(x))), L.g.scalar(0.5));
  });
  t["Cosh"] = unary([](Lowering& L, NodeId x) {
    return L.g.mul(L.g.add(L.g.exp(x), L.g.exp(L.g.neg(x))), L.g.scalar(0.5));
  });
  t["Floor"] = unary([](Lowering& L, NodeId x) { return floor_node(L.g, x); });
  t["Ceil"] = unary([](Lowering& L, NodeId x) { return L.g.neg(floor_node(L.g, L.g.neg(x))); });
  t["Not"] = [](Lowering& L) { L.out(0, L.g.sub(L.g.scalar(1), L.in(0)), kBool); };
  t["Mish"] = unary([](Lowering& L, NodeId x) { return L.g.mul(x, L.g.tanh(L.g.softplus(x))); });
  t["Relu"] = unary([](Lowering& L, NodeId x) { return L.g.relu(x); });
  t["LeakyRelu"] = [](Lowering& L) { L.out(0, L.g.leaky_relu(L.in(0), L.attr_f("alpha", 0.01))); };
  t["Elu"] = [](Lowering& L) { L.out(0, L.g.elu(L.in(0), L.attr_f("alpha", 1.0))); };
  t["Selu"] = [](Lowering& L) {
    const double alpha = L.attr_f("alpha", 1.67326319217681884765625),
                 gamma = L.attr_f("gamma", 1.05070102214813232421875);
    L.out(0, L.g.mul(L.g.elu(L.in(0), alpha), L.g.scalar(gamma)));
  };
  t["Celu"] = [](Lowering& L) {
    const double alpha = L.attr_f("alpha", 1.0);
    L.out(0, L.g.mul(L.g.elu(L.g.div(L.in(0), L.g.scalar(alpha)), 1.0), L.g.scalar(alpha)));
  };
  t["ThresholdedRelu"] = [](Lowering& L) {
    NodeId x = L.in(0);
    L.out(0, L.g.where(L.g.gt(x, L.g.scalar(L.attr_f("alpha", 1.0))), x, L.g.scalar(0)));
  };
  t["HardSigmoid"] = [](Lowering& L) {
    NodeId x = L.in(0);
    const double a = L.attr_f("alpha", 0.2), b = L.attr_f("beta", 0.5);
    L.out(0, L.g.clamp(L.g.add(L.g.mul(x, L.g.scalar(a)), L.g.scalar(b)), 0.0, 1.0));
  };
  t["HardSwish"] = unary([](Lowering& L, NodeId x) {
    return L.g.mul(x, L.g.clamp(L.g.add(L.g.mul(x, L.g.scalar(1.0 / 6.0)), L.g.scalar(0.5)), 0.0, 1.0));
  });
  t["Gelu"] = [](Lowering& L) {
    const std::string approx = L.attr_s("approximate", "none");
    if (approx != "none" && approx != "tanh")
      L.unsupported("approximate", "expected none or tanh, got " + approx);
    L.out(0, L.g.gelu(L.in(0), approx == "tanh"));
  };
  t["Swish"] = [](Lowering& L) {
    NodeId x = L.in(0);
    L.out(0, L.g.mul(x, L.g.sigmoid(L.g.mul(x, L.g.scalar(L.attr_f("alpha", 1.0))))));
  };
  t["PRelu"] = [](Lowering& L) {
    NodeId x = L.in(0), slope = L.in(1);
    L.out(0, L.g.where(L.g.lt(x, L.g.scalar(0)), L.g.mul(x, slope), x));
  };
  t["Shrink"] = [](Lowering& L) {
    NodeId x = L.in(0);
    const double bias = L.attr_f("bias", 0.0), lambd = L.attr_f("lambd", 0.5);
    NodeId lo = L.g.add(x, L.g.scalar(bias)), hi = L.g.sub(x, L.g.scalar(bias));
    L.out(0, L.g.where(L.g.lt(x, L.g.scalar(-lambd)), lo,
                       L.g.where(L.g.gt(x, L.g.scalar(lambd)), hi, L.g.scalar(0))));
  };

  t["Add"] = binary([](Lowering& L, NodeId a, NodeId b) { return L.g.add(a, b); });
  t["Sub"] = binary([](Lowering& L, NodeId a, NodeId b) { return L.g.sub(a, b); });
  t["Mul"] = binary([](Lowering& L, NodeId a, NodeId b) { return L.g.mul(a, b); });
  t["Div"] = binary([](Lowering& L, NodeId a, NodeId b) {
    NodeId q = L.g.div(a, b);
    return is_float_type(L.type(0)) ? q : trunc_node(L.g, q);
  });
  t["Pow"] = binary([](Lowering& L, NodeId a, NodeId b) {
    NodeId p = L.g.pow(a, b);
    return is_float_type(L.type(0)) ? p : trunc_node(L.g, L.g.add(p, L.g.mul(L.g.sign(p), L.g.scalar(0.5))));
  });
  t["Mod"] = [](Lowering& L) {
    NodeId a = L.in(0), b = L.in(1);
    const bool fmod = L.attr_i("fmod", 0) != 0;
    NodeId q = L.g.div(a, b);
    NodeId k = fmod ? trunc_node(L.g, q) : floor_node(L.g, q);
    L.out(0, L.g.sub(a, L.g.mul(k, b)));
  };
  t["Equal"] = binary([](Lowering& L, NodeId a, NodeId b) { return L.g.eq(a, b); }, true);
  t["Less"] = binary([](Lowering& L, NodeId a, NodeId b) { return L.g.lt(a, b); }, true);
  t["LessOrEqual"] = binary([](Lowering& L, NodeId a, NodeId b) { return L.g.le(a, b); }, true);
  t["Greater"] = binary([](Lowering& L, NodeId a, NodeId b) { return L.g.gt(a, b); }, true);
  t["GreaterOrEqual"] = binary([](Lowering& L, NodeId a, NodeId b) { return L.g.ge(a, b); }, true);
  t["And"] = binary([](Lowering& L, NodeId a, NodeId b) { return L.g.mul(a, b); }, true);
  t["Or"] = binary([](Lowering& L, NodeId a, NodeId b) { return L.g.maximum(a, b); }, true);
  t["Xor"] = binary([](Lowering& L, NodeId a, NodeId b) { return L.g.ne(a, b); }, true);
  t["Max"] = variadic([](Graph& g, NodeId a, NodeId b) { return g.maximum(a, b); });
  t["Min"] = variadic([](Graph& g, NodeId a, NodeId b) { return g.minimum(a, b); });
  t["Sum"] = variadic([](Graph& g, NodeId a, NodeId b) { return g.add(a, b); });
  t["Mean"] = variadic([](Graph& g, NodeId a, NodeId b) { return g.add(a, b); }, true);
  t["Where"] = [](Lowering& L) { L.out(0, L.g.where(L.in(0), L.in(1), L.in(2)), L.type(1)); };
  t["Cast"] = [](Lowering& L) { cast(L, int32_t(L.attr_i("to", 0))); };
  t["CastLike"] = [](Lowering& L) { cast(L, L.type(1)); };
  t["Clip"] = [](Lowering& L) {
    NodeId x = L.in(0);
    if (L.opset < 11) {
      const double lo = L.attr_f("min", -3.4028234663852886e38), hi = L.attr_f("max", 3.4028234663852886e38);
      return L.out(0, L.g.clamp(x, lo, hi));
    }
    if (L.has_input(1)) x = L.g.maximum(x, L.in(1));
    if (L.has_input(2)) x = L.g.minimum(x, L.in(2));
    if (!L.has_input(1) && !L.has_input(2)) x = L.g.add(x, L.g.scalar(0));
    L.out(0, x);
  };
}

}  // namespace meganeura::onnx
