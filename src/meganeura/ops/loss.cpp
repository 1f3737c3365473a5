// Losses. The class axis is the last. Reduction Mean/Sum gives a true scalar (shape {}); None keeps one value
// per row (cross-entropy) or per element (mse, l1, bce). Mean of cross_entropy_loss_index divides by the
// number of labels that are not ignore_index (attrs.ints[0]), as torch does.
#include <algorithm>
#include <cmath>
#include <limits>

#include "meganeura/ops/helpers.hpp"

namespace meganeura::ops {

namespace {

Shape rows_of(const Shape& logits) { return Shape(logits.begin(), logits.end() - 1); }

Shape out_shape(Reduction r, const Shape& per_item) { return r == Reduction::None ? per_item : Shape{}; }

TypeInfo ce_rule(const ShapeCtx& c) {
  require_float(c, 0);
  if (c.shape(0).empty()) c.fail("logits [.., C]", shape_str(c.shape(0)));
  if (c.op == Op::CrossEntropy) {
    require_float(c, 1);
    if (c.shape(1) != c.shape(0))
      c.fail("targets with the logits' shape " + shape_str(c.shape(0)), "targets " + shape_str(c.shape(1)));
  } else {
    if (c.dtype(1) != DType::I32) c.fail("i32 labels", std::string(dtype_name(c.dtype(1))) + " labels");
    if (c.shape(1) != rows_of(c.shape(0)))
      c.fail("labels of shape " + shape_str(rows_of(c.shape(0))) + " for logits " + shape_str(c.shape(0)),
             "labels " + shape_str(c.shape(1)));
    if (c.attrs.ints.size() != 1) c.fail("an ignore_index attribute", "none");
  }
  return {out_shape(c.attrs.reduction, rows_of(c.shape(0))), c.dtype(0)};
}

TypeInfo pointwise_loss_rule(const ShapeCtx& c) {
  require_float(c, 0);
  require_float(c, 1);
  if (c.shape(0) != c.shape(1))
    c.fail("prediction and target of one shape", shape_str(c.shape(0)) + " and " + shape_str(c.shape(1)));
  return {out_shape(c.attrs.reduction, c.shape(0)), common_dtype(c, 0, 2)};
}

// Applies the reduction to per-item losses; `count` is the Mean divisor.
HostTensor reduce_loss(const Node& n, HostTensor per_item, double count) {
  if (n.attrs.reduction == Reduction::None) return per_item;
  double s = 0;
  for (double v : per_item.data) s += v;
  return HostTensor::scalar(n.attrs.reduction == Reduction::Mean ? s / count : s);
}

// log-sum-exp of every row of the last axis.
std::vector<double> row_lse(const HostTensor& z) {
  int64_t C = z.shape.back();
  size_t rows = C ? z.size() / size_t(C) : 0;
  std::vector<double> lse(rows);
  for (size_t r = 0; r < rows; ++r) {
    const double* p = z.data.data() + r * size_t(C);
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < C; ++j) m = std::max(m, p[j]);
    double s = 0;
    for (int64_t j = 0; j < C; ++j) s += std::exp(p[j] - m);
    lse[r] = m + std::log(s);
  }
  return lse;
}

HostTensor ref_ce(const Node& n, const std::vector<const HostTensor*>& in) {
  const HostTensor &z = *in[0], &t = *in[1];
  size_t C = size_t(z.shape.back());
  auto lse = row_lse(z);
  HostTensor per(rows_of(z.shape));
  for (size_t r = 0; r < lse.size(); ++r)
    for (size_t j = 0; j < C; ++j) per[r] += t[r * C + j] * (lse[r] - z[r * C + j]);
  return reduce_loss(n, std::move(per), double(lse.size()));
}

HostTensor ref_ce_index(const Node& n, const std::vector<const HostTensor*>& in) {
  const HostTensor &z = *in[0], &lab = *in[1];
  int64_t C = z.shape.back(), ignore = n.attrs.ints[0];
  auto lse = row_lse(z);
  HostTensor per(rows_of(z.shape));
  double valid = 0;
  for (size_t r = 0; r < lse.size(); ++r) {
    int64_t l = int64_t(lab[r]);
    if (l == ignore) continue;
    if (l < 0 || l >= C)
      throw DataError("[cross_entropy_loss_index] expected labels in [0, " + std::to_string(C) + ") or " +
                      std::to_string(ignore) + ", got " + std::to_string(l) + " at row " + std::to_string(r) +
                      " (node at " + where(n.prov.loc) + ")");
    per[r] = lse[r] - z[r * size_t(C) + size_t(l)];
    valid += 1;
  }
  return reduce_loss(n, std::move(per), valid);
}

HostTensor ref_pointwise_loss(const Node& n, const std::vector<const HostTensor*>& in) {
  const HostTensor &p = *in[0], &t = *in[1];
  HostTensor per(p.shape);
  for (size_t i = 0; i < p.size(); ++i) {
    double d = p[i] - t[i];
    switch (n.op) {
      case Op::MseLoss: per[i] = d * d; break;
      case Op::L1Loss: per[i] = std::fabs(d); break;
      default:  // BceWithLogits, in the overflow-free form
        per[i] = std::max(p[i], 0.0) - p[i] * t[i] + std::log1p(std::exp(-std::fabs(p[i])));
    }
  }
  return reduce_loss(n, std::move(per), double(p.size()));
}

// ---- VJPs ----

// The incoming gradient scaled by the reduction, shaped to broadcast against the per-item tensor
// (`item_keep` is the per-item shape with the class axis kept as 1 for cross-entropy).
NodeId scale_for(VjpCtx& c, const Shape& item_keep, double count) {
  Graph& g = c.g;
  switch (c.fwd.attrs.reduction) {
    case Reduction::None: return g.node(c.grad).shape == item_keep ? c.grad : g.reshape(c.grad, item_keep);
    case Reduction::Sum: return c.grad;
    case Reduction::Mean: break;
  }
  return g.mul(c.grad, g.scalar(1.0 / count));
}

Shape ce_keep(const Shape& logits) {
  Shape s = rows_of(logits);
  s.push_back(1);
  return s;
}

// Targets are probabilities (rows sum to 1), so d/dlogits = softmax - targets: no one-hot, no ones matrix.
std::vector<NodeId> vjp_ce(VjpCtx& c) {
  Graph& g = c.g;
  const Shape zs = c.in_shape(0);
  NodeId scale = scale_for(c, ce_keep(zs), double(numel(rows_of(zs))));
  NodeId gz, gt;
  if (c.needs(0)) gz = g.mul(g.sub(g.softmax(c.in(0), -1), c.in(1)), scale);
  if (c.needs(1)) gt = g.mul(g.neg(g.log_softmax(c.in(0), -1)), scale);
  return {gz, gt};
}

// softmax - onehot(labels), with the one-hot made by comparing labels to a [C] class-index constant
// (fused as a pointwise expression) and ignored rows masked out.
std::vector<NodeId> vjp_ce_index(VjpCtx& c) {
  if (!c.needs(0)) return {NodeId{}, NodeId{}};
  Graph& g = c.g;
  const Shape zs = c.in_shape(0);
  int64_t C = zs.back();
  std::vector<float> idx(static_cast<size_t>(C));
  for (int64_t j = 0; j < C; ++j) idx[size_t(j)] = float(j);
  NodeId classes = g.constant(std::move(idx), {C});
  NodeId lab = g.cast(g.reshape(c.in(1), ce_keep(zs)), c.fwd.dtype);
  NodeId valid = g.ne(lab, g.scalar(double(c.fwd.attrs.ints[0])));
  NodeId onehot = g.eq(lab, classes);
  NodeId scale;
  if (c.fwd.attrs.reduction == Reduction::Mean)
    scale = g.div(c.grad, g.sum(valid));
  else
    scale = scale_for(c, ce_keep(zs), 1.0);
  NodeId gz = g.mul(g.mul(g.sub(g.softmax(c.in(0), -1), onehot), valid), scale);
  return {gz, NodeId{}};
}

std::vector<NodeId> vjp_pointwise_loss(VjpCtx& c) {
  Graph& g = c.g;
  NodeId p = c.in(0), t = c.in(1);
  NodeId scale = scale_for(c, c.in_shape(0), double(numel(c.in_shape(0))));
  NodeId dp, dt;  // d loss / d p and d loss / d t per element
  switch (c.fwd.op) {
    case Op::MseLoss:
      dp = g.mul(g.sub(p, t), g.scalar(2.0));
      dt = g.neg(dp);
      break;
    case Op::L1Loss:
      dp = g.sign(g.sub(p, t));
      dt = g.neg(dp);
      break;
    default:
      dp = g.sub(g.sigmoid(p), t);
      dt = g.neg(p);
      break;
  }
  return {c.needs(0) ? g.mul(dp, scale) : NodeId{}, c.needs(1) ? g.mul(dt, scale) : NodeId{}};
}

}  // namespace

void register_loss(OpTable& t) {
  t.add({Op::CrossEntropy, 2, ce_rule, vjp_ce, ref_ce, nullptr});
  t.add({Op::CrossEntropyIndex, 2, ce_rule, vjp_ce_index, ref_ce_index, nullptr});
  t.add({Op::MseLoss, 2, pointwise_loss_rule, vjp_pointwise_loss, ref_pointwise_loss, nullptr});
  t.add({Op::L1Loss, 2, pointwise_loss_rule, vjp_pointwise_loss, ref_pointwise_loss, nullptr});
  t.add({Op::BceWithLogits, 2, pointwise_loss_rule, vjp_pointwise_loss, ref_pointwise_loss, nullptr});
}

}  // namespace meganeura::ops
