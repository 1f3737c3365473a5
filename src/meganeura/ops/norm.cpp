// Normalisation: layer_norm and rms_norm over the last axis; batch_norm and group_norm over NCHW-style
// inputs (channels on axis 1, any number of trailing spatial axes).
//
// Attrs: reals {eps}; BatchNorm flag_a = training (batch statistics) else evaluation (running statistics,
// inputs 3 and 4); GroupNorm ints {groups}.
//
// Variances are population variances (divide by N), as torch normalises. The gradients are built from
// primitive ops (mean, mul, rsqrt, ...) that the scheduler fuses into row reductions, so there are no
// separate *Grad ops to keep consistent with the forward.
#include <cmath>

#include "meganeura/ops/ops.hpp"

namespace meganeura::ops {

namespace {

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

void check_float(const ShapeCtx& c) {
  for (size_t i = 0; i < c.arity(); ++i)
    if (!is_float(c.dtype(i)))
      c.fail("floating-point inputs", "input " + std::to_string(i) + " of dtype " + dtype_name(c.dtype(i)));
}

double eps_of(const Node& n) { return n.attrs.reals.at(0); }

void check_eps(const ShapeCtx& c) {
  if (c.attrs.reals.size() != 1 || !(c.attrs.reals[0] >= 0.0))
    c.fail("reals {eps >= 0}", std::to_string(c.attrs.reals.size()) + " reals");
}

// Parameters of the affine part: every listed input must be [D].
void check_vectors(const ShapeCtx& c, size_t first, size_t last, int64_t d, const char* what) {
  for (size_t i = first; i <= last; ++i)
    if (c.shape(i) != Shape{d})
      c.fail(
          std::string("input ") + std::to_string(i) + " of shape [" + std::to_string(d) + "] (" + what + ")",
          shape_str(c.shape(i)) + " for x " + shape_str(c.shape(0)));
}

// ------------------------------------------------------------------------------------------ rows
// Shared by every norm: normalise each group of `count` elements of x (a group = the elements that share a
// statistic), then apply per-channel weight/bias.
struct Groups {
  // element k belongs to statistic group stat(k) and affine channel chan(k)
  int64_t n_groups;
  std::vector<int64_t> stat, chan;
};

// Last-axis norms: group = row, channel = position in the row.
Groups row_groups(const Shape& x) {
  const int64_t d = x.back(), total = numel(x);
  Groups g{total / d, std::vector<int64_t>(size_t(total)), std::vector<int64_t>(size_t(total))};
  for (int64_t k = 0; k < total; ++k) {
    g.stat[size_t(k)] = k / d;
    g.chan[size_t(k)] = k % d;
  }
  return g;
}

// Channel-axis norms: channel = index on axis 1; group = channel (batch norm) or (sample, channel group).
Groups channel_groups(const Shape& x, int64_t groups_per_sample, bool per_sample) {
  const int64_t n = x[0], c = x[1], spatial = numel(x) / (n * c), total = numel(x);
  Groups g{per_sample ? n * groups_per_sample : c, std::vector<int64_t>(size_t(total)),
           std::vector<int64_t>(size_t(total))};
  for (int64_t k = 0; k < total; ++k) {
    const int64_t ch = (k / spatial) % c, sample = k / (spatial * c);
    g.chan[size_t(k)] = ch;
    g.stat[size_t(k)] = per_sample ? sample * groups_per_sample + ch / (c / groups_per_sample) : ch;
  }
  return g;
}

// mean and (population) variance per group
void moments(const Groups& g, const HostTensor& x, std::vector<double>& mean, std::vector<double>& var) {
  std::vector<double> cnt(size_t(g.n_groups), 0.0);
  mean.assign(size_t(g.n_groups), 0.0);
  var.assign(size_t(g.n_groups), 0.0);
  for (size_t k = 0; k < x.data.size(); ++k) {
    mean[size_t(g.stat[k])] += x.data[k];
    cnt[size_t(g.stat[k])] += 1.0;
  }
  for (size_t i = 0; i < mean.size(); ++i) mean[i] /= cnt[i];
  for (size_t k = 0; k < x.data.size(); ++k) {
    const double d = x.data[k] - mean[size_t(g.stat[k])];
    var[size_t(g.stat[k])] += d * d;
  }
  for (size_t i = 0; i < var.size(); ++i) var[i] /= cnt[i];
}

HostTensor normalise(const Node& node, const Groups& g, const HostTensor& x, const std::vector<double>& mean,
                     const std::vector<double>& var, const HostTensor* w, const HostTensor* b,
                     bool stat_by_chan) {
  HostTensor y(node.shape);
  const double eps = eps_of(node);
  for (size_t k = 0; k < x.data.size(); ++k) {
    const size_t s = size_t(stat_by_chan ? g.chan[k] : g.stat[k]), ch = size_t(g.chan[k]);
    double v = (x.data[k] - mean[s]) / std::sqrt(var[s] + eps);
    if (w) v *= w->data[ch];
    if (b) v += b->data[ch];
    y.data[k] = v;
  }
  return y;
}

// ------------------------------------------------------------------------------------------ shared VJP
// Backward of y = xhat * w + b with xhat = (x - mean) * rstd over the reduction axes `axes` of a view `xv`
// of x (x itself, or x reshaped for group norm): the classic compact form
//   dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)),   gw = dy * w
// (rms_norm has its own, rms_norm_vjp.)
struct NormBackward {
  NodeId xhat_v;  // xhat in the view
  NodeId rstd;    // keepdim, in the view
};

NormBackward norm_stats(Graph& g, NodeId xv, const std::vector<int64_t>& axes, double eps) {
  const NodeId xc = g.sub(xv, g.mean(xv, axes, true));
  NodeId var = g.mean(g.square(xc), axes, true);
  NodeId rstd = g.rsqrt(g.add(var, g.scalar(eps)));
  return {g.mul(xc, rstd), rstd};
}

NodeId norm_dx(Graph& g, const NormBackward& nb, NodeId gw_v, const std::vector<int64_t>& axes) {
  NodeId inner = g.sub(gw_v, g.mul(nb.xhat_v, g.mean(g.mul(gw_v, nb.xhat_v), axes, true)));
  inner = g.sub(inner, g.mean(gw_v, axes, true));
  return g.mul(nb.rstd, inner);
}

// Sums over every axis except `keep` (the affine parameter's axis) down to shape [D].
NodeId sum_except(Graph& g, NodeId t, size_t rank, size_t keep) {
  std::vector<int64_t> axes;
  for (size_t i = 0; i < rank; ++i)
    if (i != keep) axes.push_back(int64_t(i));
  if (axes.empty()) return t;  // an empty axis list would mean "all axes"
  return g.sum(t, axes, false);
}

// [C] -> [C, 1, ..., 1] so that it broadcasts against channel axis 1 of a rank-`rank` tensor.
NodeId per_channel(Graph& g, NodeId v, int64_t c, size_t rank) {
  Shape s(rank - 1, 1);
  s[0] = c;
  return rank == 2 ? v : g.reshape(v, s);
}

std::vector<int64_t> all_but_channel(size_t rank) {
  std::vector<int64_t> axes{0};
  for (size_t i = 2; i < rank; ++i) axes.push_back(int64_t(i));
  return axes;
}

// ------------------------------------------------------------------------------------------ layer_norm
TypeInfo layer_norm_shape(const ShapeCtx& c) {
  check_float(c);
  check_eps(c);
  const Shape& x = c.shape(0);
  if (x.empty()) c.fail("x of rank >= 1", "x " + shape_str(x));
  check_vectors(c, 1, c.op == Op::LayerNorm ? 2 : 1, x.back(), "the size of x's last axis");
  return {x, c.dtype(0)};
}

HostTensor layer_norm_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  Groups g = row_groups(in[0]->shape);
  std::vector<double> mean, var;
  moments(g, *in[0], mean, var);
  return normalise(node, g, *in[0], mean, var, in[1], in[2], false);
}

std::vector<NodeId> layer_norm_vjp(VjpCtx& c) {
  Graph& g = c.g;
  const Shape x = c.in_shape(0);
  const size_t r = x.size();
  NormBackward nb = norm_stats(g, c.in(0), {-1}, eps_of(c.fwd));
  NodeId dx, dw, db;
  if (c.needs(0)) dx = norm_dx(g, nb, g.mul(c.grad, c.in(1)), {-1});
  if (c.needs(1)) dw = sum_except(g, g.mul(c.grad, nb.xhat_v), r, r - 1);
  if (c.needs(2)) db = sum_except(g, c.grad, r, r - 1);
  return {dx, dw, db};
}

// ------------------------------------------------------------------------------------------ rms_norm
HostTensor rms_norm_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  const HostTensor &x = *in[0], &w = *in[1];
  const int64_t d = x.shape.back();
  HostTensor y(node.shape);
  for (size_t row = 0; row < x.data.size() / size_t(d); ++row) {
    double ss = 0.0;
    for (int64_t i = 0; i < d; ++i)
      ss += x.data[row * size_t(d) + size_t(i)] * x.data[row * size_t(d) + size_t(i)];
    const double rstd = 1.0 / std::sqrt(ss / double(d) + eps_of(node));
    for (int64_t i = 0; i < d; ++i) {
      const size_t k = row * size_t(d) + size_t(i);
      y.data[k] = x.data[k] * rstd * w.data[size_t(i)];
    }
  }
  return y;
}

// With r = rstd of each row and D its length:
//   dx = r · dy·w - x · r³ · mean(dy·w·x),   dw = Σ_rows dy·x·r
// Each product is its own node, written in its own order, so that every pointwise producer has one
// consumer and joins its kernel (schedule.cpp computes nothing twice): r (one row reduction with its
// squares and rsqrt), the row dot with r³/D as its epilogue, dx (with the residual's sum), dw (with the
// update). The compact form through xhat = x·r stored xhat and dy·w: 6 dispatches a norm in SmolLM2's step,
// these 4.
std::vector<NodeId> rms_norm_vjp(VjpCtx& c) {
  Graph& g = c.g;
  const Shape x = c.in_shape(0);
  const NodeId r = g.rsqrt(g.add(g.mean(g.square(c.in(0)), {-1}, true), g.scalar(eps_of(c.fwd))));
  NodeId dx, dw;
  if (c.needs(0)) {
    const NodeId dot = g.mean(g.mul(g.mul(c.in(0), c.in(1)), c.grad), {-1}, true);
    const NodeId k = g.mul(g.mul(g.mul(r, r), r), dot);
    dx = g.sub(g.mul(g.mul(c.grad, c.in(1)), r), g.mul(c.in(0), k));
  }
  if (c.needs(1)) dw = sum_except(g, g.mul(g.mul(c.grad, r), c.in(0)), x.size(), x.size() - 1);
  return {dx, dw};
}

// ------------------------------------------------------------------------------------------ batch_norm
TypeInfo batch_norm_shape(const ShapeCtx& c) {
  check_float(c);
  check_eps(c);
  const Shape& x = c.shape(0);
  if (x.size() < 2) c.fail("x of rank >= 2 [N, C, ...]", "x " + shape_str(x));
  check_vectors(c, 1, 4, x[1], "the channel count x[1]");
  return {x, c.dtype(0)};
}

HostTensor batch_norm_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  const HostTensor& x = *in[0];
  Groups g = channel_groups(x.shape, 1, false);
  std::vector<double> mean, var;
  if (node.attrs.flag_a) {
    moments(g, x, mean, var);
  } else {
    mean = in[3]->data;
    var = in[4]->data;
  }
  return normalise(node, g, x, mean, var, in[1], in[2], true);
}

std::vector<NodeId> batch_norm_vjp(VjpCtx& c) {
  Graph& g = c.g;
  const Shape x = c.in_shape(0);
  const size_t r = x.size();
  const int64_t ch = x[1];
  const auto axes = all_but_channel(r);
  const double eps = eps_of(c.fwd);
  NodeId w = per_channel(g, c.in(1), ch, r);
  NodeId dx, dw, db, dm, dv;
  if (c.fwd.attrs.flag_a) {
    NormBackward nb = norm_stats(g, c.in(0), axes, eps);
    if (c.needs(0)) dx = norm_dx(g, nb, g.mul(c.grad, w), axes);
    if (c.needs(1)) dw = sum_except(g, g.mul(c.grad, nb.xhat_v), r, 1);
  } else {
    // evaluation: an affine map per channel with constant statistics
    NodeId rstd = per_channel(g, g.rsqrt(g.add(c.in(4), g.scalar(eps))), ch, r);
    NodeId xhat = g.mul(g.sub(c.in(0), per_channel(g, c.in(3), ch, r)), rstd);
    if (c.needs(0)) dx = g.mul(c.grad, g.mul(w, rstd));
    if (c.needs(1)) dw = sum_except(g, g.mul(c.grad, xhat), r, 1);
    // the running statistics are usually state fed as inputs, but they are differentiable inputs here
    NodeId gwr = g.mul(c.grad, g.mul(w, rstd));
    if (c.needs(3)) dm = g.neg(sum_except(g, gwr, r, 1));
    if (c.needs(4)) dv = sum_except(g, g.mul(g.mul(gwr, xhat), g.mul(rstd, g.scalar(-0.5))), r, 1);
  }
  if (c.needs(2)) db = sum_except(g, c.grad, r, 1);
  // in training mode the output does not depend on the running statistics: no gradient
  return {dx, dw, db, dm, dv};
}

// ------------------------------------------------------------------------------------------ group_norm
TypeInfo group_norm_shape(const ShapeCtx& c) {
  check_float(c);
  check_eps(c);
  const Shape& x = c.shape(0);
  if (x.size() < 2) c.fail("x of rank >= 2 [N, C, ...]", "x " + shape_str(x));
  if (c.attrs.ints.size() != 1 || c.attrs.ints[0] < 1 || x[1] % c.attrs.ints[0])
    c.fail("groups >= 1 dividing the channel count " + std::to_string(x[1]),
           "groups " + shape_str(c.attrs.ints));
  check_vectors(c, 1, 2, x[1], "the channel count x[1]");
  return {x, c.dtype(0)};
}

HostTensor group_norm_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  const HostTensor& x = *in[0];
  Groups g = channel_groups(x.shape, node.attrs.ints[0], true);
  std::vector<double> mean, var;
  moments(g, x, mean, var);
  return normalise(node, g, x, mean, var, in[1], in[2], false);
}

std::vector<NodeId> group_norm_vjp(VjpCtx& c) {
  Graph& g = c.g;
  const Shape x = c.in_shape(0);
  const size_t r = x.size();
  const int64_t groups = c.fwd.attrs.ints[0];
  const Shape view{x[0], groups, numel(x) / (x[0] * groups)};
  NormBackward nb = norm_stats(g, g.reshape(c.in(0), view), {-1}, eps_of(c.fwd));
  NodeId w = per_channel(g, c.in(1), x[1], r);
  NodeId dx, dw, db;
  if (c.needs(0)) dx = g.reshape(norm_dx(g, nb, g.reshape(g.mul(c.grad, w), view), {-1}), x);
  if (c.needs(1)) dw = sum_except(g, g.mul(c.grad, g.reshape(nb.xhat_v, x)), r, 1);
  if (c.needs(2)) db = sum_except(g, c.grad, r, 1);
  return {dx, dw, db};
}

}  // namespace

void register_norm(OpTable& t) {
  t.add({Op::LayerNorm, 3, layer_norm_shape, layer_norm_vjp, layer_norm_ref, nullptr});
  t.add({Op::RmsNorm, 2, layer_norm_shape, rms_norm_vjp, rms_norm_ref, nullptr});
  t.add({Op::BatchNorm, 5, batch_norm_shape, batch_norm_vjp, batch_norm_ref, nullptr});
  t.add({Op::GroupNorm, 3, group_norm_shape, group_norm_vjp, group_norm_ref, nullptr});
}

}  // namespace meganeura::ops
