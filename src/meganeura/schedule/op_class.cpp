// Which archetype can run each op. Kept next to the scheduler because fusion legality is decided here;
// the GLSL for each op lives in codegen/.
#include "meganeura/schedule/schedule.hpp"

#include "meganeura/ops/ops.hpp"

namespace meganeura {

const char* archetype_name(Archetype a) {
  switch (a) {
    case Archetype::Pointwise: return "pointwise";
    case Archetype::RowReduce: return "row-reduce";
    case Archetype::MatMul: return "matmul";
    case Archetype::Conv: return "conv";
    case Archetype::Gather: return "gather";
    case Archetype::Scatter: return "scatter";
    case Archetype::Copy: return "copy";
    case Archetype::Attention: return "attention";
    case Archetype::Optimizer: return "optimizer";
    case Archetype::Counter: return "counter";
    case Archetype::Accumulate: return "accumulate";
    case Archetype::GradNorm: return "grad-norm";
    case Archetype::ClipScale: return "clip-scale";
  }
  return "?";
}

OpClass op_class(Op op) {
  switch (op) {
    case Op::Input: case Op::Parameter: case Op::Constant:
      return OpClass::Leaf;
    case Op::Fill:
      return OpClass::Fill;
    case Op::Neg: case Op::Abs: case Op::Sign: case Op::Exp: case Op::Log: case Op::Sqrt: case Op::Rsqrt:
    case Op::Reciprocal: case Op::Square: case Op::Relu: case Op::LeakyRelu: case Op::Elu: case Op::Sigmoid:
    case Op::Tanh: case Op::Silu: case Op::Gelu: case Op::GeluGrad: case Op::Softplus: case Op::Sin:
    case Op::Cos: case Op::Clamp: case Op::Cast: case Op::Erf: case Op::StopGradient:
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Pow: case Op::Maximum: case Op::Minimum:
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: case Op::Where:
      return OpClass::Pointwise;
    case Op::MatMul:
      return OpClass::MatMul;
    case Op::Conv2d: case Op::Conv2dGradInput: case Op::Conv2dGradWeight:
      return OpClass::Conv;
    case Op::Sum: case Op::Mean: case Op::Max: case Op::Min: case Op::Variance: case Op::ArgMax:
    case Op::Softmax: case Op::LogSoftmax:
    case Op::CrossEntropy: case Op::CrossEntropyIndex: case Op::MseLoss: case Op::L1Loss: case Op::BceWithLogits:
    case Op::LayerNorm: case Op::RmsNorm: case Op::BatchNorm: case Op::GroupNorm:
      return OpClass::Reduce;
    case Op::Reshape:
      return OpClass::Alias;
    case Op::Permute: case Op::Slice: case Op::Concat: case Op::BroadcastTo: case Op::Pad:
    case Op::MaxPool2d: case Op::MaxPool2dGrad: case Op::AvgPool2d: case Op::AvgPool2dGrad: case Op::UpsampleNearest:
    case Op::Rope: case Op::Dropout:  // they need the element's index, which pointwise expressions lack
      return OpClass::Copy;
    case Op::Gather:
      return OpClass::Gather;
    case Op::ScatterAdd:
      return OpClass::Scatter;
    case Op::Attention: case Op::AttentionLse: case Op::AttentionGradQ: case Op::AttentionGradK:
    case Op::AttentionGradV:
      return OpClass::Attention;
    default:
      // Fused forms made by rewrites (SwiGlu, ...) are pointwise when the op table gives them an expression.
      if (ops::registered(op) && ops::def(op).glsl) return OpClass::Pointwise;
      return OpClass::Unsupported;
  }
}

}  // namespace meganeura
