// Movement ops that select or combine data: slice (with step), concat, pad, gather and scatter_add.
// (reshape, permute and broadcast_to are in ops/movement_basic.cpp; split, squeeze and unsqueeze are
// built from slice and reshape in Graph.)
//
// Attrs:
//   Slice       axes {axis}, ints {start, stop, step} as the user gave them (python rules: negative
//   start/stop
//               count from the end and are clamped; step >= 1); normalised by the same function everywhere
//   Concat      axes {axis}
//   Pad         ints before ++ after (one pair per axis, >= 0), reals {value}
//   Gather      inputs {table [V, D], indices (i32) [...]}        -> [..., D]
//   ScatterAdd  inputs {indices (i32) [...], values [..., D]}, ints {rows}   -> [rows, D]
#include <algorithm>

#include "meganeura/ir/storage.hpp"
#include "meganeura/ops/ops.hpp"

namespace meganeura::ops {

namespace {

bool is_integer(DType t) { return t == DType::I32 || t == DType::U32; }

// ------------------------------------------------------------------------------------------ slice
struct SliceSpec {
  size_t axis;
  int64_t start, step, len;
};

SliceSpec slice_spec(const Shape& x, const Attrs& a) {
  const int64_t r = int64_t(x.size());
  int64_t axis = a.axes[0] < 0 ? a.axes[0] + r : a.axes[0];
  const int64_t dim = x[size_t(axis)];
  auto norm = [dim](int64_t v) { return std::clamp(v < 0 ? v + dim : v, int64_t(0), dim); };
  const int64_t start = norm(a.ints[0]), stop = norm(a.ints[1]), step = a.ints[2];
  const int64_t len = stop > start ? (stop - start + step - 1) / step : 0;
  return {size_t(axis), start, step, len};
}

TypeInfo slice_shape(const ShapeCtx& c) {
  const Shape& x = c.shape(0);
  if (c.attrs.axes.size() != 1 || c.attrs.ints.size() != 3)
    c.fail("axes {axis} and ints {start, stop, step}",
           "axes " + shape_str(c.attrs.axes) + ", ints " + shape_str(c.attrs.ints));
  c.axis(c.attrs.axes[0], x.size());
  if (c.attrs.ints[2] < 1) c.fail("step >= 1", "step " + std::to_string(c.attrs.ints[2]));
  SliceSpec s = slice_spec(x, c.attrs);
  if (s.len < 1)
    c.fail("a non-empty slice", "start " + std::to_string(c.attrs.ints[0]) + ", stop " +
                                    std::to_string(c.attrs.ints[1]) + " on axis of size " +
                                    std::to_string(x[s.axis]));
  Shape y = x;
  y[s.axis] = s.len;
  return {y, c.dtype(0)};
}

// outer x dim x inner view of a shape around one axis
struct AxisView {
  int64_t outer = 1, dim, inner = 1;
  AxisView(const Shape& s, size_t axis) : dim(s[axis]) {
    for (size_t i = 0; i < axis; ++i) outer *= s[i];
    for (size_t i = axis + 1; i < s.size(); ++i) inner *= s[i];
  }
};

HostTensor slice_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  const HostTensor& x = *in[0];
  SliceSpec s = slice_spec(x.shape, node.attrs);
  AxisView v(x.shape, s.axis);
  HostTensor y(node.shape);
  size_t k = 0;
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i = 0; i < s.len; ++i) {
      const int64_t src = (o * v.dim + s.start + i * s.step) * v.inner;
      for (int64_t r = 0; r < v.inner; ++r) y.data[k++] = x.data[size_t(src + r)];
    }
  return y;
}

std::vector<int64_t> zeros(size_t n) { return std::vector<int64_t>(n, 0); }

// The gradient scatters into a zero tensor of the input's shape. A step s is made by interleaving s-1
// zero rows after every gradient row (unsqueeze, pad, reshape), so only pad and slice with step 1 are needed.
std::vector<NodeId> slice_vjp(VjpCtx& c) {
  if (!c.needs(0)) return {NodeId{}};
  const Shape x = c.in_shape(0);
  SliceSpec s = slice_spec(x, c.fwd.attrs);
  Graph& g = c.g;
  NodeId d = c.grad;
  int64_t covered = s.len;
  if (s.step > 1) {
    Shape gs = g.node(d).shape;
    Shape u = gs;
    u.insert(u.begin() + long(s.axis) + 1, 1);
    auto after = zeros(u.size());
    after[s.axis + 1] = s.step - 1;
    d = g.pad(g.reshape(d, u), zeros(u.size()), after);
    gs[s.axis] = s.len * s.step;
    d = g.reshape(d, gs);
    covered = std::min(s.len * s.step, x[s.axis] - s.start);
    if (covered < s.len * s.step) d = g.slice(d, int64_t(s.axis), 0, covered);
  }
  auto before = zeros(x.size()), after = zeros(x.size());
  before[s.axis] = s.start;
  after[s.axis] = x[s.axis] - s.start - covered;
  if (before[s.axis] == 0 && after[s.axis] == 0) return {d};
  return {g.pad(d, before, after)};
}

// ------------------------------------------------------------------------------------------ concat
TypeInfo concat_shape(const ShapeCtx& c) {
  if (c.arity() < 1) c.fail("at least one input", "none");
  if (c.attrs.axes.size() != 1) c.fail("axes {axis}", "axes " + shape_str(c.attrs.axes));
  const Shape& first = c.shape(0);
  const size_t axis = size_t(c.axis(c.attrs.axes[0], first.size()));
  Shape y = first;
  y[axis] = 0;
  for (size_t i = 0; i < c.arity(); ++i) {
    const Shape& s = c.shape(i);
    bool ok = s.size() == first.size() && c.dtype(i) == c.dtype(0);
    for (size_t d = 0; ok && d < s.size(); ++d) ok = d == axis || s[d] == first[d];
    if (!ok)
      c.fail("inputs of one dtype whose shapes agree except on axis " + std::to_string(axis),
             "input 0 " + shape_str(first) + " and input " + std::to_string(i) + " " + shape_str(s));
    y[axis] += s[axis];
  }
  return {y, c.dtype(0)};
}

HostTensor concat_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  const size_t r = node.shape.size();
  const size_t axis = size_t(node.attrs.axes[0] < 0 ? node.attrs.axes[0] + int64_t(r) : node.attrs.axes[0]);
  AxisView out(node.shape, axis);
  HostTensor y(node.shape);
  int64_t offset = 0;
  for (const HostTensor* t : in) {
    AxisView v(t->shape, axis);
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t i = 0; i < v.dim * v.inner; ++i)
        y.data[size_t((o * out.dim + offset) * out.inner + i)] = t->data[size_t(o * v.dim * v.inner + i)];
    offset += v.dim;
  }
  return y;
}

std::vector<NodeId> concat_vjp(VjpCtx& c) {
  const size_t r = c.fwd.shape.size();
  const int64_t axis = c.fwd.attrs.axes[0] < 0 ? c.fwd.attrs.axes[0] + int64_t(r) : c.fwd.attrs.axes[0];
  std::vector<NodeId> out;
  int64_t offset = 0;
  for (size_t i = 0; i < c.fwd.inputs.size(); ++i) {
    const int64_t len = c.in_shape(i)[size_t(axis)];
    out.push_back(c.needs(i) ? c.g.slice(c.grad, axis, offset, offset + len) : NodeId{});
    offset += len;
  }
  return out;
}

// ------------------------------------------------------------------------------------------ pad
TypeInfo pad_shape(const ShapeCtx& c) {
  const Shape& x = c.shape(0);
  const auto& a = c.attrs.ints;
  if (a.size() != 2 * x.size() || c.attrs.reals.size() != 1)
    c.fail("before and after widths for each of the " + std::to_string(x.size()) + " axes and one value",
           std::to_string(a.size()) + " widths " + shape_str(a) + " for input " + shape_str(x));
  Shape y = x;
  for (size_t i = 0; i < x.size(); ++i) {
    if (a[i] < 0 || a[x.size() + i] < 0) c.fail("widths >= 0", "widths " + shape_str(a));
    y[i] += a[i] + a[x.size() + i];
  }
  return {y, c.dtype(0)};
}

HostTensor pad_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  const HostTensor& x = *in[0];
  const size_t r = x.shape.size();
  const auto& a = node.attrs.ints;
  HostTensor y(node.shape, node.attrs.reals[0]);
  const auto ys = strides_of(node.shape);
  // walk the input and place each element at its shifted position
  std::vector<int64_t> idx(r, 0);
  for (size_t k = 0; k < x.data.size(); ++k) {
    int64_t dst = 0;
    for (size_t d = 0; d < r; ++d) dst += (idx[d] + a[d]) * ys[d];
    y.data[size_t(dst)] = x.data[k];
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < x.shape[d]) break;
      idx[d] = 0;
    }
  }
  return y;
}

// The gradient of a pad is the slice that drops the padding, one axis at a time.
std::vector<NodeId> pad_vjp(VjpCtx& c) {
  if (!c.needs(0)) return {NodeId{}};
  const Shape x = c.in_shape(0);
  const auto a = c.fwd.attrs.ints;
  NodeId d = c.grad;
  for (size_t i = 0; i < x.size(); ++i)
    if (a[i] != 0 || a[x.size() + i] != 0) d = c.g.slice(d, int64_t(i), a[i], a[i] + x[i]);
  return {d};
}

// ------------------------------------------------------------------------------------------ gather / scatter
TypeInfo gather_shape(const ShapeCtx& c) {
  const Shape& t = c.shape(0);
  const Shape& idx = c.shape(1);
  if (t.size() != 2) c.fail("table of rank 2 [V, D]", "table " + shape_str(t));
  if (!is_integer(c.dtype(1)))
    c.fail("integer (i32/u32) indices", std::string("indices of dtype ") + dtype_name(c.dtype(1)));
  Shape y = idx;
  y.push_back(t[1]);
  return {y, c.dtype(0)};
}

// Indices are data, so a bad one is found only when values flow; it is a DataError naming the node.
int64_t checked_index(const Node& node, double v, int64_t rows, const char* op) {
  const std::optional<int64_t> e = exact_int64(v);
  const int64_t i = e.value_or(-1);
  if (i < 0 || i >= rows)
    throw DataError(std::string("[") + op + "] expected indices in [0, " + std::to_string(rows) + "), got " +
                    std::to_string(v) + " at node '" + node.prov.name + "' (" + where(node.prov.loc) + ")");
  return i;
}

HostTensor gather_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  const HostTensor &t = *in[0], &idx = *in[1];
  const int64_t rows = t.shape[0], dim = t.shape[1];
  HostTensor y(node.shape);
  for (size_t k = 0; k < idx.data.size(); ++k) {
    const int64_t row = checked_index(node, idx.data[k], rows, "gather");
    for (int64_t d = 0; d < dim; ++d) y.data[size_t(int64_t(k) * dim + d)] = t.data[size_t(row * dim + d)];
  }
  return y;
}

std::vector<NodeId> gather_vjp(VjpCtx& c) {
  if (!c.needs(0)) return {NodeId{}, NodeId{}};
  return {c.g.scatter_add(c.in(1), c.grad, c.in_shape(0)[0]), NodeId{}};
}

TypeInfo scatter_add_shape(const ShapeCtx& c) {
  const Shape& idx = c.shape(0);
  const Shape& v = c.shape(1);
  if (!is_integer(c.dtype(0)))
    c.fail("integer (i32/u32) indices", std::string("indices of dtype ") + dtype_name(c.dtype(0)));
  if (c.attrs.ints.size() != 1 || c.attrs.ints[0] < 1) c.fail("ints {rows >= 1}", shape_str(c.attrs.ints));
  Shape want = idx;
  want.push_back(v.empty() ? 0 : v.back());
  if (v != want)
    c.fail("values of shape indices ++ [D]", "indices " + shape_str(idx) + ", values " + shape_str(v));
  return {{c.attrs.ints[0], v.back()}, c.dtype(1)};
}

HostTensor scatter_add_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  const HostTensor &idx = *in[0], &v = *in[1];
  const int64_t rows = node.shape[0], dim = node.shape[1];
  HostTensor y(node.shape);
  for (size_t k = 0; k < idx.data.size(); ++k) {
    const int64_t row = checked_index(node, idx.data[k], rows, "scatter_add");
    for (int64_t d = 0; d < dim; ++d) y.data[size_t(row * dim + d)] += v.data[size_t(int64_t(k) * dim + d)];
  }
  return y;
}

std::vector<NodeId> scatter_add_vjp(VjpCtx& c) {
  if (!c.needs(1)) return {NodeId{}, NodeId{}};
  return {NodeId{}, c.g.gather(c.grad, c.in(0))};
}

}  // namespace

void register_movement(OpTable& t) {
  t.add({Op::Slice, 1, slice_shape, slice_vjp, slice_ref, nullptr});
  t.add({Op::Concat, -1, concat_shape, concat_vjp, concat_ref, nullptr});
  t.add({Op::Pad, 1, pad_shape, pad_vjp, pad_ref, nullptr});
  t.add({Op::Gather, 2, gather_shape, gather_vjp, gather_ref, nullptr});
  t.add({Op::ScatterAdd, 2, scatter_add_shape, scatter_add_vjp, scatter_add_ref, nullptr});
}

}  // namespace meganeura::ops
