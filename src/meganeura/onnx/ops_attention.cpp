// ONNX Attention (opset 23+) as a composition: heads split for 3-D inputs, past K/V concatenated (the present
// outputs), grouped K/V heads repeated, scaled Q·Kᵀ, optional softcap, additive/boolean/causal/padding masks,
// softmax (a fully masked row gives 0, as the spec says) and ·V. Masked scores use -1e30 in place of -inf.
#include "meganeura/onnx/lower.hpp"
#include "meganeura/onnx/tensor.hpp"

#include <cmath>

namespace meganeura::onnx {
namespace {

constexpr double kMasked = -1e30;

NodeId split_heads(Lowering& L, NodeId x, int64_t heads) {
  const Shape s = L.g.node(x).shape;  // [B, S, H·D]
  if (heads <= 0 || s[2] % heads)
    L.unsupported("q_num_heads", "expected head counts that divide the hidden size");
  return L.g.permute(L.g.reshape(x, {s[0], s[1], heads, s[2] / heads}), {0, 2, 1, 3});
}

void attention(Lowering& L) {
  const size_t rank = L.shape(0).size();
  if (rank != 3 && rank != 4) L.unsupported("", "expected 3-D or 4-D Q, K, V, got " + shape_str(L.shape(0)));
  const bool causal = L.attr_i("is_causal", 0) != 0;
  const int64_t qh = L.attr_i("q_num_heads", 0), kvh = L.attr_i("kv_num_heads", 0);
  const int64_t mode = L.attr_i("qk_matmul_output_mode", 0);
  const double softcap = L.attr_f("softcap", 0.0);
  L.attr_i("softmax_precision", 0);  // every softmax here runs in f32
  const AttributeProto* scale_attr = L.attr("scale");
  const int64_t left = L.attr_i("left_window_size", -1), right = L.attr_i("right_window_size", -1);
  Graph& g = L.g;
  NodeId q = L.in(0), k = L.in(1), v = L.in(2);
  if (rank == 3) {
    q = split_heads(L, q, qh);
    k = split_heads(L, k, kvh);
    v = split_heads(L, v, kvh);
  }
  const bool past = L.has_input(4) && L.has_input(5);
  int64_t past_len = 0;
  if (past) {
    past_len = L.shape(4)[2];
    if (past_len > 0) {
      k = g.concat({L.in(4), k}, 2);
      v = g.concat({L.in(5), v}, 2);
    }
  }
  if (L.has_output(1)) L.out(1, past && past_len == 0 ? g.reshape(k, g.node(k).shape) : k);
  if (L.has_output(2)) L.out(2, past && past_len == 0 ? g.reshape(v, g.node(v).shape) : v);
  const Shape qs = g.node(q).shape, ks = g.node(k).shape;
  const int64_t B = qs[0], Hq = qs[1], S = qs[2], D = qs[3], Hk = ks[1], T = ks[2];
  if (Hq != Hk) {  // grouped-query attention: each K/V head serves Hq/Hk query heads
    if (Hq % Hk) L.unsupported("", "expected query heads a multiple of key heads");
    auto repeat = [&](NodeId x) {
      const Shape s = g.node(x).shape;
      NodeId e = g.broadcast_to(g.reshape(x, {s[0], s[1], 1, s[2], s[3]}), {s[0], s[1], Hq / Hk, s[2], s[3]});
      return g.reshape(e, {s[0], Hq, s[2], s[3]});
    };
    k = repeat(k);
    v = repeat(v);
  }
  const double scale = scale_attr ? scale_attr->f : 1.0 / std::sqrt(double(D));
  NodeId scores = g.mul(g.matmul(q, k, false, true), g.scalar(scale));
  if (softcap > 0) scores = g.mul(g.tanh(g.div(scores, g.scalar(softcap))), g.scalar(softcap));
  NodeId raw = scores;
  // the additive bias [.., S, T]
  std::optional<NodeId> bias;
  auto add_bias = [&](NodeId b) { bias = bias ? g.add(*bias, b) : b; };
  if (L.has_input(3)) {
    NodeId m = L.in(3);
    const Shape ms = g.node(m).shape;
    const bool boolean = L.type(3) == int32_t(ElemType::Bool);
    if (boolean) m = g.where(m, g.scalar(0), g.scalar(kMasked));
    if (ms.back() < T) {  // a shorter mask: the missing keys are masked
      std::vector<int64_t> before(ms.size(), 0), after(ms.size(), 0);
      after.back() = T - ms.back();
      m = g.pad(m, before, after, kMasked);
    }
    add_bias(m);
  }
  const bool nonpad = L.has_input(6);
  if (causal) {
    if (nonpad && !past) {
      // per batch: key j visible to query i iff j <= i + len[b] - S
      const HostTensor& len = L.known(6);
      HostTensor c(Shape{B, 1, S, T}, 0.0);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < S; ++i)
          for (int64_t j = 0; j < T; ++j)
            if (double(j) > double(i) + len.data.at(size_t(b)) - double(S))
              c.data[size_t((b * S + i) * T + j)] = kMasked;
      add_bias(L.constant(c));
    } else {
      HostTensor c(Shape{S, T}, 0.0);
      for (int64_t i = 0; i < S; ++i)
        for (int64_t j = 0; j < T; ++j)
          if (j > i + past_len) c.data[size_t(i * T + j)] = kMasked;
      add_bias(L.constant(c));
    }
  }
  if (left >= 0 || right >= 0) {
    // key j visible to query i iff -right <= (i + offset) - j <= left; offset as for the causal mask
    const bool per_batch = nonpad && !past;
    HostTensor w(Shape{per_batch ? B : 1, 1, S, T}, 0.0);
    for (int64_t b = 0; b < (per_batch ? B : 1); ++b)
      for (int64_t i = 0; i < S; ++i)
        for (int64_t j = 0; j < T; ++j) {
          const double offset = per_batch ? L.known(6).data.at(size_t(b)) - double(S) : double(past_len);
          const double diff = double(i) + offset - double(j);
          if ((left >= 0 && diff > double(left)) || (right >= 0 && -diff > double(right)))
            w.data[size_t((b * S + i) * T + j)] = kMasked;
        }
    add_bias(L.constant(w));
  }
  if (nonpad) {
    const HostTensor& len = L.known(6);
    HostTensor p(Shape{B, 1, 1, T}, 0.0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < T; ++j)
        if (double(j) >= len.data.at(size_t(b))) p.data[size_t(b * T + j)] = kMasked;
    add_bias(L.constant(p));
  }
  if (bias) scores = g.add(scores, *bias);
  NodeId probs = g.softmax(scores, -1);
  if (bias) {  // a row that sees no key gives 0
    NodeId visible =
        g.gt(g.max(g.broadcast_to(*bias, g.node(scores).shape), {-1}, true), g.scalar(kMasked / 2));
    probs = g.mul(probs, visible);
  }
  NodeId y = g.matmul(probs, v);  // [B, Hq, S, Dv]
  if (rank == 3) {
    const Shape ys = g.node(y).shape;
    y = g.reshape(g.permute(y, {0, 2, 1, 3}), {B, S, ys[1] * ys[3]});
  }
  L.out(0, y);
  if (L.has_output(3)) {
    if (mode == 0 || mode == 1)
      L.out(3, raw);
    else if (mode == 2)
      L.out(3, scores);
    else if (mode == 3)
      L.out(3, probs);
    else
      L.unsupported("qk_matmul_output_mode", "expected 0..3, got " + std::to_string(mode));
  }
}

}  // namespace

void add_attention_ops(ConverterTable& t) { t["Attention"] = attention; }

}  // namespace meganeura::onnx
