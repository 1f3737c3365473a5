#include "meganeura/reference/interpreter.hpp"

#include "meganeura/ir/storage.hpp"
#include "meganeura/ops/ops.hpp"

namespace meganeura::reference {

namespace {

HostTensor leaf_value(const Graph& g, NodeId id, const Feeds& feeds) {
  const Node& n = g.node(id);
  if (n.op == Op::Constant) {
    const auto& d = g.constant_data(id);
    return HostTensor(n.shape, std::vector<double>(d.begin(), d.end()));
  }
  auto it = feeds.find(n.prov.name);
  std::string what =
      std::string(op_name(n.op)) + " '" + n.prov.name + "' " + dtype_name(n.dtype) + shape_str(n.shape);
  if (it == feeds.end())
    throw GraphError("[reference::evaluate] expected a value for " + what + ", got none");
  const HostTensor& t = it->second;
  if (t.shape != n.shape || t.data.size() != size_t(numel(n.shape)))
    throw ShapeError("[reference::evaluate] expected a value of shape " + shape_str(n.shape) + " for " +
                     what + ", got shape " + shape_str(t.shape) + " with " + std::to_string(t.data.size()) +
                     " values");
  return t;
}

// A value of a 16-bit float dtype holds numbers of that dtype, whatever its op computed in f64 (the GPU
// rounds the same values, stored or fused).
void round_to_storage(const Node& n, HostTensor& t) {
  if (n.dtype != DType::F16 && n.dtype != DType::BF16) return;
  for (double& v : t.data) v = dtype_round(v, n.dtype);
}

}  // namespace

std::vector<HostTensor> evaluate(const Graph& g, const Feeds& feeds, const std::vector<NodeId>& nodes) {
  for (NodeId id : nodes) g.node(id);
  // Mark what the requested nodes need; inputs always have smaller ids than their users.
  std::vector<char> needed(g.size(), 0);
  uint32_t top = 0;
  for (NodeId id : nodes) {
    needed[id.v] = 1;
    top = std::max(top, id.v + 1);
  }
  for (uint32_t i = top; i-- > 0;)
    if (needed[i])
      for (NodeId in : g.node(NodeId{i}).inputs) needed[in.v] = 1;

  std::vector<HostTensor> values(top);
  for (uint32_t i = 0; i < top; ++i) {
    if (!needed[i]) continue;
    NodeId id{i};
    const Node& n = g.node(id);
    const ops::OpDef& d = ops::def(n.op);
    if (!d.reference) {
      values[i] = leaf_value(g, id, feeds);
      round_to_storage(n, values[i]);
      continue;
    }
    std::vector<const HostTensor*> in;
    for (NodeId x : n.inputs) in.push_back(&values[x.v]);
    values[i] = d.reference(n, in);
    round_to_storage(n, values[i]);
    if (values[i].shape != n.shape || values[i].data.size() != size_t(numel(n.shape)))
      throw GraphError("[reference::evaluate] expected " + std::string(d.name) + " %" + std::to_string(i) +
                       " to produce " + shape_str(n.shape) + ", got " + shape_str(values[i].shape) +
                       " (a bug in its reference function)");
  }
  std::vector<HostTensor> out;
  for (NodeId id : nodes) out.push_back(values[id.v]);
  return out;
}

HostTensor evaluate(const Graph& g, const Feeds& feeds, NodeId node) {
  return evaluate(g, feeds, std::vector<NodeId>{node})[0];
}

std::vector<HostTensor> evaluate_outputs(const Graph& g, const Feeds& feeds) {
  if (g.outputs().empty())
    throw GraphError("[reference::evaluate_outputs] expected a graph with outputs, got none");
  return evaluate(g, feeds, g.outputs());
}

}  // namespace meganeura::reference
