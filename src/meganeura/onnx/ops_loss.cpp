// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss through a one-hot of the labels (the class axis is 1:
// input [N, C, d1, ...], labels [N, d1, ...]); ignore_index and class weights as the spec defines them.
#include "meganeura/onnx/lower.hpp"

namespace meganeura::onnx {
namespace {

// loss of log-probabilities `logp` [N, C, ...] against labels (F32 class indices) [N, ...]
NodeId nll(Lowering& L, NodeId logp, NodeId labels, std::optional<NodeId> weight,
           const std::string& reduction) {
  Graph& g = L.g;
  const Shape s = g.node(logp).shape;
  if (s.size() < 2) L.unsupported("", "expected input [N, C, ...], got " + shape_str(s));
  const int64_t C = s[1];
  Shape ls = g.node(labels).shape;
  Shape us = ls;
  us.insert(us.begin() + 1, 1);
  HostTensor classes(Shape{C});
  for (int64_t c = 0; c < C; ++c) classes.data[size_t(c)] = double(c);
  Shape cs(s.size(), 1);
  cs[1] = C;
  classes.shape = cs;
  NodeId onehot = g.eq(g.reshape(labels, us), L.constant(classes));  // [N, C, ...]
  NodeId picked = g.sum(g.mul(logp, onehot), {1});                   // [N, ...]
  NodeId wt = weight ? g.sum(g.mul(onehot, g.reshape(*weight, cs)), {1}) : g.fill(1.0, ls);
  if (L.has("ignore_index")) {
    const double ignore = double(L.attr_i("ignore_index", 0));
    wt = g.mul(wt, g.ne(labels, g.scalar(ignore)));
  }
  NodeId loss = g.neg(g.mul(picked, wt));
  if (reduction == "none") return loss;
  if (reduction == "sum") return g.sum(loss);
  if (reduction == "mean") return g.div(g.sum(loss), g.sum(wt));
  L.unsupported("reduction", "expected none, sum or mean, got " + reduction);
}

}  // namespace

void add_loss_ops(ConverterTable& t) {
  t["NegativeLogLikelihoodLoss"] = [](Lowering& L) {
    const std::string reduction = L.attr_s("reduction", "mean");
    std::optional<NodeId> w;
    if (L.has_input(2)) w = L.in(2);
    L.out(0, nll(L, L.in(0), L.in(1), w, reduction));
  };
  t["SoftmaxCrossEntropyLoss"] = [](Lowering& L) {
    const std::string reduction = L.attr_s("reduction", "mean");
    std::optional<NodeId> w;
    if (L.has_input(2)) w = L.in(2);
    NodeId logp = L.g.log_softmax(L.in(0), 1);
    L.out(0, nll(L, logp, L.in(1), w, reduction), L.type(0));
    if (L.has_output(1)) L.out(1, logp, L.type(0));
  };
}

}  // namespace meganeura::onnx
