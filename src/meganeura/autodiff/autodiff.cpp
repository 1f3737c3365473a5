#include "meganeura/autodiff/autodiff.hpp"

#include <algorithm>

#include "meganeura/ops/helpers.hpp"

namespace meganeura {

namespace {

bool has_vjp(const Node& n) { return ops::registered(n.op) && ops::def(n.op).vjp != nullptr; }

std::string grad_name(const Graph& g, NodeId p) {
  const std::string& name = g.node(p).prov.name;
  std::string r = "grad/";
  if (name.empty()) {
    r += '%';
    r += std::to_string(p.v);
  } else {
    r += name;
  }
  return r;
}

}  // namespace

Graph differentiate(const Graph& g, NodeId loss, const std::vector<NodeId>& wrt) {
  const Node& ln = g.node(loss);
  if (numel(ln.shape) != 1 || !ops::is_float(ln.dtype))
    throw ShapeError("[differentiate] expected a loss with one floating-point value (shape []), got " +
                     std::string(op_name(ln.op)) + " '" + ln.prov.name + "' " + dtype_name(ln.dtype) +
                     shape_str(ln.shape) + " at " + where(ln.prov.loc));
  std::vector<NodeId> targets = wrt.empty() ? g.parameters() : wrt;
  for (NodeId t : targets)
    if (is_quantized(g.node(t).dtype))
      throw GraphError("[differentiate] expected parameters of float dtype to differentiate, got '" +
                       g.node(t).prov.name + "' of block-quantized dtype " + dtype_name(g.node(t).dtype) +
                       " (freeze it: leave it out of wrt / the trained parameters)");

  // Only nodes on a differentiable path from a target to the loss get gradients.
  size_t n = size_t(loss.v) + 1;
  std::vector<char> is_target(g.size(), 0), from_target(n, 0), to_loss(n, 0);
  for (NodeId t : targets) is_target[t.v] = 1;
  for (size_t i = 0; i < n; ++i) {
    const Node& nd = g.node(NodeId{uint32_t(i)});
    from_target[i] = is_target[i];
    if (!from_target[i] && has_vjp(nd))
      for (NodeId in : nd.inputs) from_target[i] |= from_target[in.v];
  }
  to_loss[loss.v] = 1;
  for (size_t i = n; i-- > 0;) {
    const Node& nd = g.node(NodeId{uint32_t(i)});
    if (to_loss[i] && has_vjp(nd))
      for (NodeId in : nd.inputs) to_loss[in.v] = 1;
  }
  auto active = [&](NodeId id) { return id.v < n && from_target[id.v] && to_loss[id.v]; };

  Graph out = g;
  std::vector<std::vector<NodeId>> contrib(n);
  std::vector<NodeId> total(n);
  if (active(loss)) {
    DerivationScope scope(out, "autodiff", loss);
    contrib[loss.v].push_back(out.fill(1.0, ln.shape, ln.dtype));
  }
  for (size_t i = n; i-- > 0;) {
    NodeId id{uint32_t(i)};
    if (!active(id) || contrib[i].empty()) continue;
    DerivationScope scope(out, "autodiff", id);
    NodeId sum = contrib[i][0];
    for (size_t k = 1; k < contrib[i].size(); ++k) sum = out.add(sum, contrib[i][k]);
    total[i] = sum;
    Node fwd = g.node(id);
    // The cotangent of a named value is findable as grad/<name> (debug sessions read it by that name).
    if (!fwd.prov.name.empty() && fwd.op != Op::Parameter && fwd.op != Op::Input &&
        !out.find(grad_name(g, id)) && out.node(sum).op != Op::Fill)
      out.alias(sum, grad_name(g, id));
    if (!has_vjp(fwd)) continue;
    std::vector<bool> need(fwd.inputs.size());
    bool any = false;
    for (size_t k = 0; k < need.size(); ++k) any |= need[k] = active(fwd.inputs[k]);
    if (!any) continue;
    ops::VjpCtx ctx{out, id, fwd, sum, need};
    std::vector<NodeId> grads = ops::def(fwd.op).vjp(ctx);
    if (grads.size() != fwd.inputs.size())
      throw GraphError("[differentiate] expected " + std::to_string(fwd.inputs.size()) +
                       " gradients from the VJP of " + op_name(fwd.op) + ", got " +
                       std::to_string(grads.size()));
    for (size_t k = 0; k < grads.size(); ++k) {
      if (!need[k] || !grads[k].valid()) continue;
      const Node& in = g.node(fwd.inputs[k]);
      if (out.node(grads[k]).shape != in.shape)
        throw GraphError("[differentiate] expected the VJP of " + std::string(op_name(fwd.op)) + " (node %" +
                         std::to_string(i) + " at " + where(fwd.prov.loc) + ") to give input " +
                         std::to_string(k) + " a gradient of shape " + shape_str(in.shape) + ", got " +
                         shape_str(out.node(grads[k]).shape));
      contrib[fwd.inputs[k].v].push_back(grads[k]);
    }
  }

  for (NodeId t : targets) {
    NodeId gt = t.v < n ? total[t.v] : NodeId{};
    if (!gt.valid()) {
      DerivationScope scope(out, "autodiff", t);
      gt = out.fill(0.0, g.node(t).shape, g.node(t).dtype);
    }
    if (out.node(gt).prov.name.empty())
      out.named(gt, grad_name(g, t));
    else
      out.alias(gt, grad_name(g, t));
    out.set_gradient(t, gt);
  }
  if (out.outputs().empty()) out.set_outputs({loss});
  return out;
}

}  // namespace meganeura
