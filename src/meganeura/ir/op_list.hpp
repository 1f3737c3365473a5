#pragma once
// Every op of the IR, one line each: X(Enum, name, scheduling class, flops per element). The enum `Op`,
// `op_name`, `op_class` and `op_flops_per_element` are generated from this list; what an op computes (shape
// rule, VJP, CPU reference, GLSL) is its OpDef row in ops/. Adding an op: a line here and a row there
// (Ops.EveryOpHasACompleteRow checks both).
//   class   how the scheduler treats the op (OpClass in ir/graph.hpp)
//   flops   arithmetic per output element for the rewrite's cost model: 1, 8 for transcendental functions,
//           12 for row-wise softmax-like ops (by class, leaves and fills cost nothing, a reshape 1 and a
//           matmul 2·M·N·K)
// The order is the enum's order. A new op goes at the end of its group.
#define MEGANEURA_OPS(X)                                                                                    \
  /* leaves (Fill: a scalar broadcast to a shape, never materialised) */                                    \
  X(Input, "input", Leaf, 0)                                                                                \
  X(Parameter, "parameter", Leaf, 0)                                                                        \
  X(Constant, "constant", Leaf, 0)                                                                          \
  X(Fill, "fill", Fill, 0)                                                                                  \
  /* unary */                                                                                               \
  X(Neg, "neg", Pointwise, 1)                                                                               \
  X(Abs, "abs", Pointwise, 1)                                                                               \
  X(Sign, "sign", Pointwise, 1)                                                                             \
  X(Exp, "exp", Pointwise, 8)                                                                               \
  X(Log, "log", Pointwise, 8)                                                                               \
  X(Sqrt, "sqrt", Pointwise, 8)                                                                             \
  X(Rsqrt, "rsqrt", Pointwise, 8)                                                                           \
  X(Reciprocal, "reciprocal", Pointwise, 1)                                                                 \
  X(Square, "square", Pointwise, 1)                                                                         \
  X(Relu, "relu", Pointwise, 1)                                                                             \
  X(LeakyRelu, "leaky_relu", Pointwise, 1)                                                                  \
  X(Elu, "elu", Pointwise, 8)                                                                               \
  X(Sigmoid, "sigmoid", Pointwise, 8)                                                                       \
  X(Tanh, "tanh", Pointwise, 8)                                                                             \
  X(Silu, "silu", Pointwise, 8)                                                                             \
  X(Gelu, "gelu", Pointwise, 8)                                                                             \
  X(GeluGrad, "gelu_grad", Pointwise, 8)                                                                    \
  X(Softplus, "softplus", Pointwise, 8)                                                                     \
  X(Sin, "sin", Pointwise, 8)                                                                               \
  X(Cos, "cos", Pointwise, 8)                                                                               \
  X(Clamp, "clamp", Pointwise, 1)                                                                           \
  X(Cast, "cast", Pointwise, 1)                                                                             \
  X(Erf, "erf", Pointwise, 8)                                                                               \
  X(StopGradient, "stop_gradient", Pointwise, 1)                                                            \
  /* attrs.ints {format, saturate, rounding}: ir/number_format.hpp */                                       \
  X(RoundToFormat, "round_to_format", Pointwise, 1)                                                         \
  /* binary (numpy broadcasting) */                                                                         \
  X(Add, "add", Pointwise, 1)                                                                               \
  X(Sub, "sub", Pointwise, 1)                                                                               \
  X(Mul, "mul", Pointwise, 1)                                                                               \
  X(Div, "div", Pointwise, 1)                                                                               \
  X(Pow, "pow", Pointwise, 8)                                                                               \
  X(Maximum, "maximum", Pointwise, 1)                                                                       \
  X(Minimum, "minimum", Pointwise, 1)                                                                       \
  X(Eq, "eq", Pointwise, 1)                                                                                 \
  X(Ne, "ne", Pointwise, 1)                                                                                 \
  X(Lt, "lt", Pointwise, 1)                                                                                 \
  X(Le, "le", Pointwise, 1)                                                                                 \
  X(Gt, "gt", Pointwise, 1)                                                                                 \
  X(Ge, "ge", Pointwise, 1)                                                                                 \
  /* ternary */                                                                                             \
  X(Where, "where", Pointwise, 1)                                                                           \
  /* matmul: attrs.flag_a = transpose A, attrs.flag_b = transpose B */                                      \
  X(MatMul, "matmul", MatMul, 1)                                                                            \
  /* reductions over attrs.axes with attrs.keepdim */                                                       \
  X(Sum, "sum", Reduce, 1)                                                                                  \
  X(Mean, "mean", Reduce, 1)                                                                                \
  X(Max, "max", Reduce, 1)                                                                                  \
  X(Min, "min", Reduce, 1)                                                                                  \
  X(Variance, "variance", Reduce, 1)                                                                        \
  X(ArgMax, "argmax", Reduce, 1)                                                                            \
  X(Softmax, "softmax", Reduce, 12)                                                                         \
  X(LogSoftmax, "log_softmax", Reduce, 12)                                                                  \
  /* losses; attrs.reduction */                                                                             \
  X(CrossEntropy, "cross_entropy_loss", Reduce, 12)                                                         \
  X(CrossEntropyIndex, "cross_entropy_loss_index", Reduce, 12)                                              \
  X(MseLoss, "mse_loss", Reduce, 1)                                                                         \
  X(L1Loss, "l1_loss", Reduce, 1)                                                                           \
  X(BceWithLogits, "bce_with_logits", Reduce, 12)                                                           \
  /* normalisation */                                                                                       \
  X(LayerNorm, "layer_norm", Reduce, 12)                                                                    \
  X(RmsNorm, "rms_norm", Reduce, 12)                                                                        \
  X(BatchNorm, "batch_norm", Reduce, 1)                                                                     \
  X(GroupNorm, "group_norm", Reduce, 1)                                                                     \
  /* movement */                                                                                            \
  X(Reshape, "reshape", Alias, 0)                                                                           \
  X(Permute, "permute", Copy, 1)                                                                            \
  X(Slice, "slice", Copy, 1)                                                                                \
  X(Concat, "concat", Copy, 1)                                                                              \
  X(BroadcastTo, "broadcast_to", Copy, 1)                                                                   \
  X(Pad, "pad", Copy, 1)                                                                                    \
  X(Gather, "gather", Gather, 1)                                                                            \
  X(ScatterAdd, "scatter_add", Scatter, 1)                                                                  \
  /* vision */                                                                                              \
  X(Conv2d, "conv2d", Conv, 1)                                                                              \
  X(Conv2dGradInput, "conv2d_grad_input", Conv, 1)                                                          \
  X(Conv2dGradWeight, "conv2d_grad_weight", Conv, 1)                                                        \
  X(MaxPool2d, "max_pool2d", Copy, 1)                                                                       \
  X(MaxPool2dGrad, "max_pool2d_grad", Copy, 1)                                                              \
  X(AvgPool2d, "avg_pool2d", Copy, 1)                                                                       \
  X(AvgPool2dGrad, "avg_pool2d_grad", Copy, 1)                                                              \
  X(UpsampleNearest, "upsample_nearest", Copy, 1)                                                           \
  /* attention */                                                                                           \
  X(Attention, "attention", Attention, 1)                                                                   \
  X(AttentionLse, "attention_lse", Attention, 1)                                                            \
  X(AttentionGradQ, "attention_grad_q", Attention, 1)                                                       \
  X(AttentionGradK, "attention_grad_k", Attention, 1)                                                       \
  X(AttentionGradV, "attention_grad_v", Attention, 1)                                                       \
  X(Rope, "rope", Copy, 1)                                                                                  \
  X(Dropout, "dropout", Copy, 1)                                                                            \
  /* fused forms made by rewrites */                                                                        \
  X(SwiGlu, "swiglu", Pointwise, 8)                                                                         \
  /* state: {state, value, start}, value written into the state's storage along attrs.axes[0] from start */ \
  X(WriteSlice, "write_slice", Copy, 1)                                                                     \
  /* sampling: {logits, seen, params, rng} -> one token id per row (ops/sample.cpp) */                      \
  X(Sample, "sample", Reduce, 12)
