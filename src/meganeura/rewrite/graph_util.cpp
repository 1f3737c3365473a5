#include "meganeura/rewrite/graph_util.hpp"

#include <algorithm>

namespace meganeura::rewrite {

bool is_leaf(Op op) { return op == Op::Input || op == Op::Parameter || op == Op::Constant || op == Op::Fill; }

std::vector<NodeId> roots(const Graph& g) {
  std::vector<NodeId> r(g.outputs().begin(), g.outputs().end());
  for (const auto& [wrt, grad] : g.gradients()) {
    r.push_back(wrt);
    r.push_back(grad);
  }
  r.insert(r.end(), g.parameters().begin(), g.parameters().end());
  r.insert(r.end(), g.inputs().begin(), g.inputs().end());
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

std::vector<bool> live_nodes(const Graph& g) {
  std::vector<bool> live(g.size(), false);
  for (NodeId r : roots(g)) live[r.v] = true;
  // ids are topological (a node's inputs are older), so one backward sweep suffices
  for (size_t i = g.size(); i-- > 0;) {
    if (!live[i]) continue;
    for (NodeId k : g.node(NodeId{static_cast<uint32_t>(i)}).inputs) live[k.v] = true;
  }
  return live;
}

std::optional<double> fill_value(const Node& n) {
  if (n.op != Op::Fill || n.attrs.reals.empty()) return std::nullopt;
  return n.attrs.reals[0];
}

NodeId make_fill(Graph& g, double value, const Shape& shape, DType dtype, const Provenance& prov) {
  // the same attributes Graph::fill gives, so rule-made and user-made fills intern together
  Attrs a;
  a.ints = shape;
  a.reals = {value};
  a.dtype = dtype;
  return g.make(Op::Fill, {}, std::move(a), prov);
}

NodeId copy_node(Graph& to, const Graph& from, NodeId id, const std::vector<NodeId>& kids,
                 const Provenance& prov) {
  const Node& n = from.node(id);
  if (n.op == Op::Constant) {
    NodeId c = to.constant(from.constant_data(id), n.shape, n.prov.loc);
    if (!n.prov.name.empty()) to.alias(c, n.prov.name);
    return c;
  }
  NodeId r = to.make(n.op, kids, n.attrs, prov);
  // an interned hit keeps the older node's provenance; the name must still find this value
  if (!prov.name.empty() && to.node(r).prov.name != prov.name) to.alias(r, prov.name);
  return r;
}

void carry_names(const Graph& from, const std::vector<NodeId>& map, Graph& to) {
  for (const auto& [name, id] : from.names()) {
    NodeId target = map[id.v];
    if (target.valid() && to.find(name) != target) to.alias(target, name);
  }
}

}  // namespace meganeura::rewrite
