// The movement ops the gradients of every family need: reshape (ints = target shape), broadcast_to
// (ints = target shape) and permute (axes = order). The rest of movement lives in ops/movement.cpp.
#include <algorithm>

#include "meganeura/ops/helpers.hpp"

namespace meganeura::ops {

namespace {

TypeInfo reshape_rule(const ShapeCtx& c) {
  const Shape& to = c.attrs.ints;
  for (int64_t d : to)
    if (d < 0) c.fail("a target shape of non-negative dimensions", shape_str(to));
  if (numel(to) != numel(c.shape(0)))
    c.fail("a target shape of " + std::to_string(numel(c.shape(0))) + " elements",
           shape_str(to) + " (" + std::to_string(numel(to)) + " elements) from " + shape_str(c.shape(0)));
  return {to, c.dtype(0)};
}

TypeInfo broadcast_rule(const ShapeCtx& c) {
  const Shape& to = c.attrs.ints;
  auto b = broadcast_shapes(c.shape(0), to);
  if (!b || *b != to || c.shape(0).size() > to.size())
    c.fail("a shape that " + shape_str(c.shape(0)) + " broadcasts to", shape_str(to));
  return {to, c.dtype(0)};
}

TypeInfo permute_rule(const ShapeCtx& c) {
  const Shape& in = c.shape(0);
  std::vector<int64_t> p = c.attrs.axes;
  if (p.size() != in.size()) c.fail("a permutation of " + std::to_string(in.size()) + " axes", shape_str(p));
  for (int64_t& a : p) a = c.axis(a, in.size());
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != int64_t(i))
      c.fail("a permutation of " + std::to_string(in.size()) + " axes", shape_str(c.attrs.axes));
  Shape out;
  for (int64_t a : p) out.push_back(in[size_t(a)]);
  return {out, c.dtype(0)};
}

std::vector<int64_t> normalized_perm(const std::vector<int64_t>& p) {
  std::vector<int64_t> r = p;
  for (int64_t& a : r)
    if (a < 0) a += int64_t(p.size());
  return r;
}

HostTensor ref_reshape(const Node& n, const std::vector<const HostTensor*>& in) {
  return HostTensor(n.shape, in[0]->data);
}

HostTensor ref_broadcast(const Node& n, const std::vector<const HostTensor*>& in) {
  return HostTensor(n.shape, broadcast_data(*in[0], n.shape));
}

HostTensor ref_permute(const Node& n, const std::vector<const HostTensor*>& in) {
  const HostTensor& x = *in[0];
  auto p = normalized_perm(n.attrs.axes);
  auto st = strides_of(x.shape);
  HostTensor r(n.shape);
  size_t rank = n.shape.size();
  std::vector<int64_t> idx(rank, 0);  // multi-index of the output, advanced like an odometer
  for (size_t i = 0; i < r.size(); ++i) {
    int64_t src = 0;
    for (size_t a = 0; a < rank; ++a) src += idx[a] * st[size_t(p[a])];
    r[i] = x[size_t(src)];
    for (size_t a = rank; a-- > 0;) {
      if (++idx[a] < n.shape[a]) break;
      idx[a] = 0;
    }
  }
  return r;
}

std::vector<NodeId> vjp_reshape(VjpCtx& c) { return {c.g.reshape(c.grad, c.in_shape(0))}; }
std::vector<NodeId> vjp_broadcast(VjpCtx& c) { return {sum_to_shape(c.g, c.grad, c.in_shape(0))}; }
std::vector<NodeId> vjp_permute(VjpCtx& c) {
  auto p = normalized_perm(c.fwd.attrs.axes);
  std::vector<int64_t> inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[size_t(p[i])] = int64_t(i);
  return {c.g.permute(c.grad, inv)};
}

}  // namespace

void register_movement_basic(OpTable& t) {
  t.add({Op::Reshape, 1, reshape_rule, vjp_reshape, ref_reshape, nullptr});
  t.add({Op::BroadcastTo, 1, broadcast_rule, vjp_broadcast, ref_broadcast, nullptr});
  t.add({Op::Permute, 1, permute_rule, vjp_permute, ref_permute, nullptr});
}

}  // namespace meganeura::ops
