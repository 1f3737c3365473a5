// Reductions over any axes (sum, mean, max, min, variance, argmax) and softmax / log_softmax over one axis.
// Attrs: axes (empty = all, negatives from the end), keepdim; Variance: ints = {correction} (default 0, the
// population variance normalisation layers use).
#include <algorithm>
#include <cmath>
#include <limits>

#include "meganeura/ops/helpers.hpp"

namespace meganeura::ops {

namespace {

int64_t correction(const Attrs& a) { return a.ints.empty() ? 0 : a.ints[0]; }

int64_t reduced_count(const Shape& in, const std::vector<int64_t>& axes) {
  int64_t n = 1;
  for (int64_t a : axes) n *= in[size_t(a)];
  return n;
}

TypeInfo reduce_rule(const ShapeCtx& c) {
  if (c.op == Op::Mean || c.op == Op::Variance) require_float(c, 0);
  auto axes = reduce_axes(c, c.attrs.axes, c.shape(0).size());
  if (c.op == Op::Variance && correction(c.attrs) < 0)
    c.fail("a non-negative correction", std::to_string(correction(c.attrs)));
  return {reduced_shape(c.shape(0), axes, c.attrs.keepdim), c.dtype(0)};
}

TypeInfo argmax_rule(const ShapeCtx& c) {
  if (c.attrs.axes.size() != 1) c.fail("one axis", "axes " + shape_str(c.attrs.axes));
  int64_t ax = c.axis(c.attrs.axes[0], c.shape(0).size());
  return {reduced_shape(c.shape(0), {ax}, c.attrs.keepdim), DType::I32};
}

TypeInfo softmax_rule(const ShapeCtx& c) {
  require_float(c, 0);
  if (c.attrs.axes.size() != 1) c.fail("one axis", "axes " + shape_str(c.attrs.axes));
  c.axis(c.attrs.axes[0], c.shape(0).size());
  return same_as(c);
}

// ---- references ----

HostTensor ref_reduce(const Node& n, const std::vector<const HostTensor*>& in) {
  const HostTensor& x = *in[0];
  auto axes = reduce_axes(n.attrs.axes, x.shape.size());
  auto map = reduction_map(x.shape, axes);
  double init = n.op == Op::Max   ? -std::numeric_limits<double>::infinity()
                : n.op == Op::Min ? std::numeric_limits<double>::infinity()
                                  : 0.0;
  HostTensor r(n.shape, init);
  for (size_t i = 0; i < x.size(); ++i) {
    double& o = r[size_t(map[i])];
    // A NaN anywhere in the group makes the result NaN (torch.max/min), whichever side std::max sees it on.
    if ((n.op == Op::Max || n.op == Op::Min) && (std::isnan(o) || std::isnan(x[i])))
      o = o + x[i];
    else if (n.op == Op::Max)
      o = std::max(o, x[i]);
    else if (n.op == Op::Min)
      o = std::min(o, x[i]);
    else
      o += x[i];
  }
  double count = double(reduced_count(x.shape, axes));
  if (n.op == Op::Mean)
    for (double& v : r.data) v /= count;
  if (n.op == Op::Variance) {
    std::vector<double> mean = r.data;
    for (double& v : mean) v /= count;
    std::fill(r.data.begin(), r.data.end(), 0.0);
    for (size_t i = 0; i < x.size(); ++i) {
      double d = x[i] - mean[size_t(map[i])];
      r[size_t(map[i])] += d * d;
    }
    for (double& v : r.data) v /= count - double(correction(n.attrs));
  }
  return r;
}

HostTensor ref_argmax(const Node& n, const std::vector<const HostTensor*>& in) {
  const HostTensor& x = *in[0];
  int64_t ax = reduce_axes(n.attrs.axes, x.shape.size())[0];
  HostTensor r(n.shape);
  size_t out = 0;  // lines come in the row-major order of the reduced output
  for_each_line(x.shape, ax, [&](int64_t base, int64_t stride, int64_t len) {
    int64_t best = 0;  // the first maximum wins, and a NaN beats every number, as in torch
    for (int64_t j = 1; j < len; ++j) {
      const double v = x[size_t(base + j * stride)], b = x[size_t(base + best * stride)];
      if (v > b || (std::isnan(v) && !std::isnan(b))) best = j;
    }
    r[out++] = double(best);
  });
  return r;
}

HostTensor ref_softmax(const Node& n, const std::vector<const HostTensor*>& in) {
  const HostTensor& x = *in[0];
  int64_t ax = reduce_axes(n.attrs.axes, x.shape.size())[0];
  HostTensor r(n.shape);
  bool log_form = n.op == Op::LogSoftmax;
  for_each_line(x.shape, ax, [&](int64_t base, int64_t stride, int64_t len) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < len; ++j) m = std::max(m, x[size_t(base + j * stride)]);
    double s = 0;
    for (int64_t j = 0; j < len; ++j) s += std::exp(x[size_t(base + j * stride)] - m);
    for (int64_t j = 0; j < len; ++j) {
      double z = x[size_t(base + j * stride)] - m;
      r[size_t(base + j * stride)] = log_form ? z - std::log(s) : std::exp(z) / s;
    }
  });
  return r;
}

// ---- VJPs ----

std::vector<int64_t> axes_of(VjpCtx& c) { return reduce_axes(c.fwd.attrs.axes, c.in_shape(0).size()); }

// The incoming gradient with the reduced axes kept as size 1, so it broadcasts against the input.
NodeId keep(VjpCtx& c, NodeId x, const std::vector<int64_t>& axes) {
  Shape ks = reduced_shape(c.in_shape(0), axes, true);
  return c.g.node(x).shape == ks ? x : c.g.reshape(x, ks);
}

std::vector<NodeId> vjp_sum(VjpCtx& c) {
  auto axes = axes_of(c);
  return {expand_reduced(c.g, c.grad, c.in_shape(0), axes, c.fwd.attrs.keepdim)};
}

std::vector<NodeId> vjp_mean(VjpCtx& c) {
  auto axes = axes_of(c);
  double count = double(reduced_count(c.in_shape(0), axes));
  NodeId scaled = c.g.mul(c.grad, c.g.scalar(1.0 / count));
  return {expand_reduced(c.g, scaled, c.in_shape(0), axes, c.fwd.attrs.keepdim)};
}

// Ties share the gradient equally.
std::vector<NodeId> vjp_extremum(VjpCtx& c) {
  Graph& g = c.g;
  auto axes = axes_of(c);
  NodeId mask = g.eq(c.in(0), keep(c, c.id, axes));
  NodeId count = g.sum(mask, axes, true);
  return {g.mul(mask, g.div(keep(c, c.grad, axes), count))};
}

std::vector<NodeId> vjp_variance(VjpCtx& c) {
  Graph& g = c.g;
  auto axes = axes_of(c);
  double denom = double(reduced_count(c.in_shape(0), axes) - correction(c.fwd.attrs));
  NodeId centered = g.sub(c.in(0), g.mean(c.in(0), axes, true));
  return {g.mul(centered, g.mul(keep(c, c.grad, axes), g.scalar(2.0 / denom)))};
}

std::vector<NodeId> vjp_softmax(VjpCtx& c) {
  Graph& g = c.g;  // y (g - sum(g y))
  int64_t ax = c.fwd.attrs.axes[0];
  NodeId dot = g.sum(g.mul(c.grad, c.id), {ax}, true);
  return {g.mul(c.id, g.sub(c.grad, dot))};
}

std::vector<NodeId> vjp_log_softmax(VjpCtx& c) {
  Graph& g = c.g;  // g - softmax(x) sum(g)
  int64_t ax = c.fwd.attrs.axes[0];
  return {g.sub(c.grad, g.mul(g.exp(c.id), g.sum(c.grad, {ax}, true)))};
}

}  // namespace

void register_reduce(OpTable& t) {
  t.add({Op::Sum, 1, reduce_rule, vjp_sum, ref_reduce, nullptr});
  t.add({Op::Mean, 1, reduce_rule, vjp_mean, ref_reduce, nullptr});
  t.add({Op::Max, 1, reduce_rule, vjp_extremum, ref_reduce, nullptr});
  t.add({Op::Min, 1, reduce_rule, vjp_extremum, ref_reduce, nullptr});
  t.add({Op::Variance, 1, reduce_rule, vjp_variance, ref_reduce, nullptr});
  t.add({Op::ArgMax, 1, argmax_rule, nullptr, ref_argmax, nullptr});
  t.add({Op::Softmax, 1, softmax_rule, vjp_softmax, ref_softmax, nullptr});
  t.add({Op::LogSoftmax, 1, softmax_rule, vjp_log_softmax, ref_softmax, nullptr});
}

}  // namespace meganeura::ops
