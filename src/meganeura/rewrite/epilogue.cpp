// Reads a matmul epilogue chain (see rewrite.hpp) for the scheduler.
#include "meganeura/rewrite/graph_util.hpp"
#include "meganeura/rewrite/rewrite.hpp"

namespace meganeura::rewrite {

namespace {

bool is_activation(Op op) {
  return op == Op::Relu || op == Op::Gelu || op == Op::Silu || op == Op::Sigmoid || op == Op::Tanh ||
         op == Op::LeakyRelu;
}

}  // namespace

std::optional<MatMulEpilogue> find_matmul_epilogue(const Graph& g, NodeId mm) {
  if (g.node(mm).op != Op::MatMul) return std::nullopt;
  std::vector<bool> live = rewrite::live_nodes(g);
  std::vector<int> uses(g.size(), 0);
  std::vector<NodeId> user(g.size());
  for (uint32_t i = 0; i < g.size(); ++i) {
    if (!live[i]) continue;
    for (NodeId k : g.node(NodeId{i}).inputs) {
      ++uses[k.v];
      user[k.v] = NodeId{i};
    }
  }
  std::vector<bool> is_root(g.size(), false);
  for (NodeId o : g.outputs()) is_root[o.v] = true;
  for (const auto& [wrt, grad] : g.gradients()) is_root[grad.v] = true;
  // the chain grows only through values nobody else reads, so fusing them never recomputes or hides one
  auto sole_user = [&](NodeId x) -> std::optional<NodeId> {
    if (uses[x.v] != 1 || is_root[x.v]) return std::nullopt;
    return user[x.v];
  };

  MatMulEpilogue e;
  e.matmul = mm;
  NodeId cur = mm;
  const Shape& out = g.node(mm).shape;
  int64_t cols = out.empty() ? 1 : out.back();
  if (auto u = sole_user(cur)) {
    const Node& n = g.node(*u);
    if (n.op == Op::Add && n.inputs[0] == cur && n.inputs[1] != cur && n.shape == out) {
      const Node& b = g.node(n.inputs[1]);
      if (numel(b.shape) == cols && !b.shape.empty() && b.shape.back() == cols) {
        e.bias_add = *u;
        e.bias = n.inputs[1];
        cur = *u;
      }
    }
  }
  if (auto u = sole_user(cur)) {
    const Node& n = g.node(*u);
    if (is_activation(n.op) && n.inputs[0] == cur) {
      e.activation = *u;
      cur = *u;
    }
  }
  if (auto u = sole_user(cur)) {
    const Node& n = g.node(*u);
    if (n.op == Op::Add && n.inputs[0] == cur && n.inputs[1] != cur && n.shape == out &&
        g.node(n.inputs[1]).shape == out) {
      e.residual_add = *u;
      e.residual = n.inputs[1];
      cur = *u;
    }
  }
  e.last = cur;
  return e;
}

}  // namespace meganeura::rewrite
