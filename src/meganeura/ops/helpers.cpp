#include "meganeura/ops/helpers.hpp"

#include <algorithm>

namespace meganeura::ops {

void require_float(const ShapeCtx& c, size_t i) {
  if (!is_float(c.dtype(i)))
    c.fail("a floating-point input " + std::to_string(i),
           std::string(dtype_name(c.dtype(i))) + shape_str(c.shape(i)));
}

TypeInfo same_as(const ShapeCtx& c, size_t i) { return {c.shape(i), c.dtype(i)}; }

Shape broadcast_all(const ShapeCtx& c) {
  Shape s = c.shape(0);
  for (size_t i = 1; i < c.arity(); ++i) {
    auto b = broadcast_shapes(s, c.shape(i));
    if (!b) {
      std::string got;
      for (size_t j = 0; j < c.arity(); ++j) got += (j ? " and " : "") + shape_str(c.shape(j));
      c.fail("shapes that broadcast", got);
    }
    s = *b;
  }
  return s;
}

DType common_dtype(const ShapeCtx& c, size_t first, size_t last) {
  std::optional<DType> strict;
  for (size_t i = first; i < last; ++i) {
    if (c.in(i).op == Op::Fill) continue;
    const DType t = c.dtype(i);
    // Floats of different widths meet in f32 (an f16 weight times an f32 activation is f32), as in torch;
    // integers never mix with anything else.
    if (strict && *strict != t && is_float(*strict) && is_float(t)) {
      strict = DType::F32;
      continue;
    }
    if (strict && *strict != t)
      c.fail("operands of one dtype", std::string(dtype_name(*strict)) + " and " + dtype_name(t));
    strict = t;
  }
  return strict ? *strict : c.dtype(first);
}

std::vector<int64_t> reduce_axes(const ShapeCtx& c, const std::vector<int64_t>& axes, size_t rank) {
  std::vector<int64_t> r;
  if (axes.empty()) {
    for (size_t i = 0; i < rank; ++i) r.push_back(int64_t(i));
    return r;
  }
  for (int64_t a : axes) r.push_back(c.axis(a, rank));
  std::sort(r.begin(), r.end());
  if (std::adjacent_find(r.begin(), r.end()) != r.end()) c.fail("distinct axes", "axes " + shape_str(axes));
  return r;
}

std::vector<int64_t> reduce_axes(const std::vector<int64_t>& axes, size_t rank) {
  std::vector<int64_t> r;
  if (axes.empty())
    for (size_t i = 0; i < rank; ++i) r.push_back(int64_t(i));
  for (int64_t a : axes) r.push_back(a < 0 ? a + int64_t(rank) : a);
  std::sort(r.begin(), r.end());
  return r;
}

Shape reduced_shape(const Shape& in, const std::vector<int64_t>& axes, bool keepdim) {
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    bool red = std::find(axes.begin(), axes.end(), int64_t(i)) != axes.end();
    if (!red)
      out.push_back(in[i]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

NodeId sum_to_shape(Graph& g, NodeId grad, const Shape& target) {
  Shape gs = g.node(grad).shape;
  if (gs == target) return grad;
  size_t lead = gs.size() - target.size();
  std::vector<int64_t> axes;
  for (size_t i = 0; i < gs.size(); ++i)
    if (i < lead || (target[i - lead] == 1 && gs[i] != 1)) axes.push_back(int64_t(i));
  NodeId s = axes.empty() ? grad : g.sum(grad, axes, true);
  return g.node(s).shape == target ? s : g.reshape(s, target);
}

NodeId expand_reduced(Graph& g, NodeId grad, const Shape& in, const std::vector<int64_t>& axes,
                      bool keepdim) {
  NodeId k = grad;
  Shape ks = reduced_shape(in, axes, true);
  if (!keepdim && g.node(grad).shape != ks) k = g.reshape(grad, ks);
  return ks == in ? k : g.broadcast_to(k, in);
}

std::vector<int64_t> reduction_map(const Shape& in, const std::vector<int64_t>& axes) {
  Shape out = reduced_shape(in, axes, true);
  std::vector<int64_t> m(size_t(numel(in)));
  BroadcastIndex bi(out, in);  // out has 1s on reduced axes: broadcasting it to `in` is exactly the map
  for (size_t i = 0; i < m.size(); ++i) m[i] = bi(int64_t(i));
  return m;
}

}  // namespace meganeura::ops
