#include "meganeura/rewrite/egraph.hpp"

#include <algorithm>
#include <cstring>

#include "meganeura/rewrite/graph_util.hpp"

namespace meganeura::rewrite {

namespace {

template <class T>
void put(std::string& s, const T& v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  s.append(b, sizeof(T));
}

// An exact, order-preserving serialisation: two Attrs intern together iff they compare equal (reals by
// bit pattern, so -0.0 and 0.0 stay distinct).
std::string serialise(const Attrs& a) {
  std::string s;
  put(s, a.axes.size());
  for (auto x : a.axes) put(s, x);
  put(s, a.ints.size());
  for (auto x : a.ints) put(s, x);
  put(s, a.reals.size());
  for (auto x : a.reals) put(s, x);
  put(s, a.keepdim);
  put(s, a.flag_a);
  put(s, a.flag_b);
  put(s, a.reduction);
  put(s, a.dtype);
  put(s, a.seed);
  return s;
}

}  // namespace

EGraph::EGraph(const Graph& g, size_t max_enodes) : scratch_(g), max_enodes_(max_enodes) {
  input_class_.assign(g.size(), UINT32_MAX);
  std::vector<bool> live = live_nodes(g);
  for (uint32_t i = 0; i < g.size(); ++i) {
    if (!live[i]) continue;
    const Node& n = g.node(NodeId{i});
    std::vector<Handle> kids;
    for (NodeId k : n.inputs) kids.push_back(input_class_[k.v]);
    bool keyed_by_id = n.op == Op::Input || n.op == Op::Parameter || n.op == Op::Constant;
    ctx_rule = -1;
    ctx_origin = NodeId{i};
    input_class_[i] = add(NodeId{i}, std::move(kids), keyed_by_id ? i : kNoLeaf);
  }
}

Handle EGraph::find(Handle c) const {
  Handle r = c;
  while (parent_[r] != r) r = parent_[r];
  while (parent_[c] != r) {
    Handle next = parent_[c];
    parent_[c] = r;
    c = next;
  }
  return r;
}

bool EGraph::merge(Handle a, Handle b) {
  a = find(a);
  b = find(b);
  if (a == b) return false;
  if (b < a) std::swap(a, b);
  parent_[b] = a;
  auto& dst = classes_[a].nodes;
  auto& src = classes_[b].nodes;
  dst.insert(dst.end(), src.begin(), src.end());
  src.clear();
  return true;
}

EGraph::Key EGraph::key_of(const ENode& n) const {
  Key k{static_cast<uint16_t>(n.op), n.attrs, n.leaf, static_cast<uint8_t>(n.dtype), n.shape, n.kids};
  for (auto& c : k.kids) c = find(c);
  return k;
}

uint32_t EGraph::intern_attrs(const Attrs& a) {
  auto [it, inserted] = attrs_index_.emplace(serialise(a), static_cast<uint32_t>(attrs_.size()));
  if (inserted) attrs_.push_back(a);
  return it->second;
}

Handle EGraph::add(NodeId proto, std::vector<Handle> kids, uint32_t leaf) {
  const Node& p = scratch_.node(proto);
  ENode e{p.op, intern_attrs(p.attrs), std::move(kids), leaf, p.dtype, p.shape, proto, ctx_rule, ctx_origin};
  for (auto& c : e.kids) c = find(c);
  Key k = key_of(e);
  if (auto it = memo_.find(k); it != memo_.end()) return find(enode_class_[it->second]);
  auto idx = static_cast<uint32_t>(enodes_.size());
  auto c = static_cast<Handle>(classes_.size());
  enodes_.push_back(std::move(e));
  classes_.push_back(EClass{{idx}});
  parent_.push_back(c);
  enode_class_.push_back(c);
  memo_.emplace(std::move(k), idx);
  return c;
}

void EGraph::rebuild() {
  std::vector<bool> dup(enodes_.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    memo_.clear();
    for (uint32_t e = 0; e < enodes_.size(); ++e) {
      for (auto& c : enodes_[e].kids) c = find(c);
      auto [it, inserted] = memo_.emplace(key_of(enodes_[e]), e);
      dup[e] = !inserted;
      // congruence: equal e-nodes compute equal values, so their classes are one
      if (!inserted && merge(enode_class_[it->second], enode_class_[e])) changed = true;
    }
  }
  for (auto& c : classes_) c.nodes.clear();
  for (uint32_t e = 0; e < enodes_.size(); ++e)
    if (!dup[e]) classes_[find(enode_class_[e])].nodes.push_back(e);
}

std::vector<Handle> EGraph::canonical_classes() const {
  std::vector<Handle> r;
  for (Handle c = 0; c < classes_.size(); ++c)
    if (find(c) == c) r.push_back(c);
  return r;
}

bool EGraph::for_each_node(Handle h, const std::function<bool(const TermNode&)>& fn) const {
  for (uint32_t e : classes_[find(h)].nodes) {
    const ENode& n = enodes_[e];
    if (fn(TermNode{n.op, &attrs_[n.attrs], &n.kids})) return true;
  }
  return false;
}

Shape EGraph::shape(Handle h) const { return enodes_[classes_[find(h)].nodes[0]].shape; }

DType EGraph::dtype(Handle h) const { return enodes_[classes_[find(h)].nodes[0]].dtype; }

std::optional<double> EGraph::uniform_value(Handle h) const {
  for (uint32_t e : classes_[find(h)].nodes) {
    const ENode& n = enodes_[e];
    if (n.op == Op::Fill) return fill_value(scratch_.node(n.proto));
    if (n.op == Op::Constant) {
      const auto& d = scratch_.constant_data(n.proto);
      if (!d.empty() && std::all_of(d.begin(), d.end(), [&](float x) { return x == d[0]; })) return d[0];
    }
  }
  return std::nullopt;
}

const std::vector<float>* EGraph::constant_data(Handle h) const {
  for (uint32_t e : classes_[find(h)].nodes)
    if (enodes_[e].op == Op::Constant) return &scratch_.constant_data(enodes_[e].proto);
  return nullptr;
}

std::optional<Handle> EGraph::make(Op op, std::vector<Handle> kids, Attrs attrs) {
  if (full()) return std::nullopt;
  std::vector<NodeId> protos;
  for (Handle k : kids) protos.push_back(enodes_[classes_[find(k)].nodes[0]].proto);
  NodeId p;
  try {
    p = scratch_.make(op, std::move(protos), std::move(attrs), ctx_prov);
  } catch (const Error&) {
    return std::nullopt;  // the op's shape rule rejected this form
  }
  return add(p, std::move(kids), kNoLeaf);
}

Handle EGraph::fill(double value, const Shape& shape, DType dtype) {
  return add(make_fill(scratch_, value, shape, dtype, ctx_prov), {}, kNoLeaf);
}

Handle EGraph::constant(std::vector<float> data, const Shape& shape) {
  std::vector<uint32_t> bits(data.size());
  std::memcpy(bits.data(), data.data(), data.size() * sizeof(float));
  bits.push_back(static_cast<uint32_t>(shape.size()));
  for (int64_t d : shape) bits.push_back(static_cast<uint32_t>(d));
  auto [it, inserted] =
      rule_constants_.emplace(std::move(bits), static_cast<uint32_t>(rule_constants_.size()));
  NodeId p = scratch_.constant(std::move(data), shape, ctx_prov.loc);
  return add(p, {}, 0x80000000u | it->second);
}

}  // namespace meganeura::rewrite
