#pragma once
// Op cases shared by the CPU gradchecks (tests/cpu/test_ops_elementwise.cpp) and the GPU op checks
// (tests/gpu/test_ops_gpu.cpp), so both tiers test the same ops over the same ranges.
#include <functional>
#include <vector>

#include "meganeura/ir/graph.hpp"

namespace meganeura::test {

struct UnaryCase {
  const char* name;
  std::function<NodeId(Graph&, NodeId)> f;
  double lo, hi;  // input range: clear of kinks and domain edges by more than a finite-difference step
};

// Every differentiable unary op (sign and stop_gradient, which pass no gradient, are not listed).
inline std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", [](Graph& g, NodeId x) { return g.neg(x); }, -2, 2},
      {"abs", [](Graph& g, NodeId x) { return g.abs(x); }, -2, 2},
      {"exp", [](Graph& g, NodeId x) { return g.exp(x); }, -2, 2},
      {"log", [](Graph& g, NodeId x) { return g.log(x); }, 0.5, 3},
      {"sqrt", [](Graph& g, NodeId x) { return g.sqrt(x); }, 0.5, 3},
      {"rsqrt", [](Graph& g, NodeId x) { return g.rsqrt(x); }, 0.5, 3},
      {"reciprocal", [](Graph& g, NodeId x) { return g.reciprocal(x); }, 0.5, 3},
      {"square", [](Graph& g, NodeId x) { return g.square(x); }, -2, 2},
      {"relu", [](Graph& g, NodeId x) { return g.relu(x); }, -2, 2},
      {"leaky_relu", [](Graph& g, NodeId x) { return g.leaky_relu(x, 0.1); }, -2, 2},
      {"leaky_relu_negative_slope", [](Graph& g, NodeId x) { return g.leaky_relu(x, -0.3); }, -2, 2},
      {"elu", [](Graph& g, NodeId x) { return g.elu(x, 0.7); }, -2, 2},
      {"sigmoid", [](Graph& g, NodeId x) { return g.sigmoid(x); }, -4, 4},
      {"tanh", [](Graph& g, NodeId x) { return g.tanh(x); }, -3, 3},
      {"silu", [](Graph& g, NodeId x) { return g.silu(x); }, -4, 4},
      {"gelu_erf", [](Graph& g, NodeId x) { return g.gelu(x, false); }, -3, 3},
      {"gelu_tanh", [](Graph& g, NodeId x) { return g.gelu(x, true); }, -3, 3},
      {"softplus", [](Graph& g, NodeId x) { return g.softplus(x); }, -4, 4},
      {"sin", [](Graph& g, NodeId x) { return g.sin(x); }, -3, 3},
      {"cos", [](Graph& g, NodeId x) { return g.cos(x); }, -3, 3},
      {"erf", [](Graph& g, NodeId x) { return g.erf(x); }, -2, 2},
      {"clamp", [](Graph& g, NodeId x) { return g.clamp(x, -0.5, 0.7); }, -2, 2},
      {"cast_f32", [](Graph& g, NodeId x) { return g.cast(x, DType::F32); }, -2, 2},
  };
}

}  // namespace meganeura::test
