// Attention family: scaled dot-product attention (causal and/or additive mask, grouped-query), its three
// gradient ops, rotary position embedding, and dropout.
//
// Attrs:
//   Attention        inputs {q [B,Hq,S,D], k [B,Hkv,T,D], v [B,Hkv,T,Dv] [, mask]}, reals {scale},
//                    flag_a = causal. Query head h reads KV head h / (Hq/Hkv). Causal masking is aligned
//                    bottom-right: query i sits at position i + T - S, so a query block decoding after a
//                    KV cache sees the whole cache. A query row that sees no key at all outputs zeros.
//   AttentionLse     inputs and attrs of Attention; the per-row log-sum-exp of the scaled, masked scores,
//                    [B,Hq,S] (-inf for a row that sees no key). The GPU computes it in the forward kernel
//                    (a sibling output); the backward reads it instead of recomputing the softmax statistics.
//   AttentionGradQ/K/V  inputs {q, k, v, dout, out, lse [, mask]}, same attrs, with out and lse the forward's
//                    value and AttentionLse. The references recompute everything from q, k, v and ignore
//                    out and lse (so they check the GPU's saved values too); kernels use out for
//                    rowsum(dout * out) and lse for the probabilities. A mask that needs a gradient gets it
//                    from primitive ops (see attention_mask_grad).
//   Rope             inputs {x [..., S, D][, start i32 [] or [B]]}, reals {theta}, ints {position offset},
//                    flag_a = inverse; row s of batch b is at position offset + start[b] + s
//                    rotation (the VJP). Rotate-half pairing: (x[i], x[i + D/2]) rotated by
//                    (offset + s) * theta^(-2i/D), as Llama-family checkpoints expect.
//   Dropout          reals {p}, seed; mask from ops/dropout_hash.hpp, kept values scaled by 1/(1-p).
#include <cmath>
#include <limits>
#include <optional>

#include "meganeura/ops/dropout_hash.hpp"
#include "meganeura/ops/helpers.hpp"
#include "meganeura/ops/ops.hpp"

namespace meganeura::ops {

namespace {

// ------------------------------------------------------------------------------------------ attention
struct AttnGeom {
  int64_t b, hq, hkv, s, t, d, dv;
};

AttnGeom attn_geom(const Shape& q, const Shape& k, const Shape& v) {
  return {q[0], q[1], k[1], q[2], k[2], q[3], v[3]};
}

// Checks q/k/v (inputs 0..2) and the optional mask at input `mask_at`; returns the geometry.
AttnGeom check_attention(const ShapeCtx& c, size_t mask_at) {
  for (size_t i = 0; i < c.arity(); ++i)
    if (!is_float(c.dtype(i)))
      c.fail("floating-point inputs", "input " + std::to_string(i) + " of dtype " + dtype_name(c.dtype(i)));
  if (c.attrs.reals.size() != 1 || !(c.attrs.reals[0] > 0.0))
    c.fail("reals {scale > 0}", std::to_string(c.attrs.reals.size()) + " reals");
  const Shape &q = c.shape(0), &k = c.shape(1), &v = c.shape(2);
  const std::string got = "q " + shape_str(q) + ", k " + shape_str(k) + ", v " + shape_str(v);
  if (q.size() != 4 || k.size() != 4 || v.size() != 4)
    c.fail("q [B,Hq,S,D], k [B,Hkv,T,D], v [B,Hkv,T,Dv]", got);
  if (k[0] != q[0] || v[0] != q[0] || k[3] != q[3] || v[1] != k[1] || v[2] != k[2])
    c.fail("q [B,Hq,S,D], k [B,Hkv,T,D], v [B,Hkv,T,Dv] with matching B, D, Hkv and T", got);
  if (k[1] < 1 || q[1] % k[1]) c.fail("Hq a multiple of Hkv (grouped-query attention)", got);
  AttnGeom g = attn_geom(q, k, v);
  if (c.arity() > mask_at) {
    const Shape& m = c.shape(mask_at);
    const Shape full{g.b, g.hq, g.s, g.t};
    auto bs = broadcast_shapes(m, full);
    if (m.size() > 4 || !bs || *bs != full)
      c.fail("a mask that broadcasts to " + shape_str(full), "mask " + shape_str(m) + " with " + got);
  }
  return g;
}

TypeInfo attention_shape(const ShapeCtx& c) {
  if (c.arity() != 3 && c.arity() != 4)
    c.fail("inputs {q, k, v[, mask]}", std::to_string(c.arity()) + " inputs");
  AttnGeom g = check_attention(c, 3);
  return {{g.b, g.hq, g.s, g.dv}, c.dtype(0)};
}

TypeInfo attention_lse_shape(const ShapeCtx& c) {
  if (c.arity() != 3 && c.arity() != 4)
    c.fail("inputs {q, k, v[, mask]}", std::to_string(c.arity()) + " inputs");
  AttnGeom g = check_attention(c, 3);
  return {{g.b, g.hq, g.s}, c.dtype(0)};
}

TypeInfo attention_grad_shape(const ShapeCtx& c) {
  if (c.arity() != 6 && c.arity() != 7)
    c.fail("inputs {q, k, v, dout, out, lse[, mask]}", std::to_string(c.arity()) + " inputs");
  AttnGeom g = check_attention(c, 6);
  const Shape dout{g.b, g.hq, g.s, g.dv}, lse{g.b, g.hq, g.s};
  if (c.shape(3) != dout) c.fail("dout " + shape_str(dout), "dout " + shape_str(c.shape(3)));
  if (c.shape(4) != dout) c.fail("out " + shape_str(dout), "out " + shape_str(c.shape(4)));
  if (c.shape(5) != lse) c.fail("lse " + shape_str(lse), "lse " + shape_str(c.shape(5)));
  const size_t which = c.op == Op::AttentionGradQ ? 0 : c.op == Op::AttentionGradK ? 1 : 2;
  return {c.shape(which), c.dtype(which)};
}

enum class AttnOut { O, Lse, dQ, dK, dV };

// One routine for the forward value and all three gradients, recomputing the probabilities per (b, h):
//   P = softmax(scale * q k^T + mask, causal),  O = P v
//   dP = dO v^T,  dS = P * (dP - rowsum(P * dP)),  dq = scale dS k,  dk = scale dS^T q,  dv = P^T dO
HostTensor attention_eval(const Node& node, const std::vector<const HostTensor*>& in, AttnOut what) {
  const HostTensor &q = *in[0], &k = *in[1], &v = *in[2];
  const bool grad = what != AttnOut::O && what != AttnOut::Lse;
  const HostTensor* dout = grad ? in[3] : nullptr;
  const size_t mask_at = grad ? 6 : 3;
  const HostTensor* mask = in.size() > mask_at ? in[mask_at] : nullptr;
  const AttnGeom g = attn_geom(q.shape, k.shape, v.shape);
  const double scale = node.attrs.reals[0];
  const bool causal = node.attrs.flag_a;
  const int64_t group = g.hq / g.hkv;
  std::optional<BroadcastIndex> mi;
  if (mask) mi.emplace(mask->shape, Shape{g.b, g.hq, g.s, g.t});

  HostTensor out(node.shape);
  std::vector<double> p(size_t(g.t)), dp(size_t(g.t));
  const double ninf = -std::numeric_limits<double>::infinity();
  for (int64_t b = 0; b < g.b; ++b)
    for (int64_t h = 0; h < g.hq; ++h) {
      const int64_t kh = h / group;
      auto Q = [&](int64_t i, int64_t d) { return q.data[size_t(((b * g.hq + h) * g.s + i) * g.d + d)]; };
      auto Kx = [&](int64_t j, int64_t d) { return size_t(((b * g.hkv + kh) * g.t + j) * g.d + d); };
      auto Vx = [&](int64_t j, int64_t d) { return size_t(((b * g.hkv + kh) * g.t + j) * g.dv + d); };
      auto Ox = [&](int64_t i, int64_t d) { return size_t(((b * g.hq + h) * g.s + i) * g.dv + d); };
      for (int64_t i = 0; i < g.s; ++i) {
        double mx = ninf;
        for (int64_t j = 0; j < g.t; ++j) {
          double sc = ninf;
          // A key the mask hides (-inf) is skipped as a key past the causal edge is: no product, so a NaN or
          // infinity in a KV cache's unwritten rows never reaches the output (the GPU kernels skip it too).
          const double mk =
              mi ? double(mask->data[size_t((*mi)(((b * g.hq + h) * g.s + i) * g.t + j))]) : 0.0;
          if ((!causal || j <= i + g.t - g.s) && mk != ninf) {
            sc = 0.0;
            for (int64_t d = 0; d < g.d; ++d) sc += Q(i, d) * k.data[Kx(j, d)];
            sc = sc * scale + mk;
          }
          p[size_t(j)] = sc;
          mx = std::max(mx, sc);
        }
        if (mx == ninf) {  // no visible key: the row's output and gradients stay zero
          if (what == AttnOut::Lse) out.data[size_t((b * g.hq + h) * g.s + i)] = ninf;
          continue;
        }
        double den = 0.0;
        for (auto& x : p) den += (x = x == ninf ? 0.0 : std::exp(x - mx));
        if (what == AttnOut::Lse) {
          out.data[size_t((b * g.hq + h) * g.s + i)] = mx + std::log(den);
          continue;
        }
        for (auto& x : p) x /= den;
        if (what == AttnOut::O) {
          for (int64_t j = 0; j < g.t; ++j)
            for (int64_t d = 0; d < g.dv; ++d) out.data[Ox(i, d)] += p[size_t(j)] * v.data[Vx(j, d)];
          continue;
        }
        if (what == AttnOut::dV) {
          for (int64_t j = 0; j < g.t; ++j)
            for (int64_t d = 0; d < g.dv; ++d) out.data[Vx(j, d)] += p[size_t(j)] * dout->data[Ox(i, d)];
          continue;
        }
        double rowdot = 0.0;
        for (int64_t j = 0; j < g.t; ++j) {
          double s = 0.0;
          for (int64_t d = 0; d < g.dv; ++d) s += dout->data[Ox(i, d)] * v.data[Vx(j, d)];
          dp[size_t(j)] = s;
          rowdot += p[size_t(j)] * s;
        }
        for (int64_t j = 0; j < g.t; ++j) {
          const double ds = scale * p[size_t(j)] * (dp[size_t(j)] - rowdot);
          if (ds == 0.0) continue;
          for (int64_t d = 0; d < g.d; ++d) {
            if (what == AttnOut::dQ)
              out.data[size_t(((b * g.hq + h) * g.s + i) * g.d + d)] += ds * k.data[Kx(j, d)];
            else
              out.data[Kx(j, d)] += ds * Q(i, d);
          }
        }
      }
    }
  return out;
}

HostTensor attention_ref(const Node& n, const std::vector<const HostTensor*>& in) {
  return attention_eval(n, in, AttnOut::O);
}
HostTensor attention_lse_ref(const Node& n, const std::vector<const HostTensor*>& in) {
  return attention_eval(n, in, AttnOut::Lse);
}
HostTensor attention_grad_q_ref(const Node& n, const std::vector<const HostTensor*>& in) {
  return attention_eval(n, in, AttnOut::dQ);
}
HostTensor attention_grad_k_ref(const Node& n, const std::vector<const HostTensor*>& in) {
  return attention_eval(n, in, AttnOut::dK);
}
HostTensor attention_grad_v_ref(const Node& n, const std::vector<const HostTensor*>& in) {
  return attention_eval(n, in, AttnOut::dV);
}

// The gradient of an additive mask (a learned bias such as relative positions) is dS = P * (dP - rowsum(P
// dP)) summed to the mask's shape. It needs the probabilities themselves, so it is built from primitive ops
// and materialises the [B, Hq, S, T] scores: only graphs that train their mask pay for that.
NodeId attention_mask_grad(VjpCtx& c) {
  Graph& g = c.g;
  const Shape q = c.in_shape(0), k = c.in_shape(1), v = c.in_shape(2), m = c.in_shape(3);
  const AttnGeom a = attn_geom(q, k, v);
  const int64_t group = a.hq / a.hkv;
  // query heads of one KV head are consecutive, so [B, Hq, S, D] regroups as [B, Hkv, G*S, D]
  NodeId qg = g.reshape(c.in(0), {a.b, a.hkv, group * a.s, a.d});
  NodeId scores = g.reshape(g.matmul(qg, c.in(1), false, true), {a.b, a.hq, a.s, a.t});
  scores = g.add(g.mul(scores, g.scalar(c.fwd.attrs.reals[0])), c.in(3));
  if (c.fwd.attrs.flag_a) {
    std::vector<float> causal(size_t(a.s * a.t), 0.0f);
    for (int64_t i = 0; i < a.s; ++i)
      for (int64_t j = 0; j < a.t; ++j)
        if (j > i + a.t - a.s) causal[size_t(i * a.t + j)] = -std::numeric_limits<float>::infinity();
    scores = g.add(scores, g.constant(causal, {a.s, a.t}));
  }
  NodeId p = g.softmax(scores, -1);
  NodeId dog = g.reshape(c.grad, {a.b, a.hkv, group * a.s, a.dv});
  NodeId dp = g.reshape(g.matmul(dog, c.in(2), false, true), {a.b, a.hq, a.s, a.t});
  NodeId ds = g.mul(p, g.sub(dp, g.sum(g.mul(p, dp), {-1}, true)));
  return sum_to_shape(g, ds, m);
}

std::vector<NodeId> attention_vjp(VjpCtx& c) {
  std::vector<NodeId> fwd_ins{c.in(0), c.in(1), c.in(2)};
  if (c.fwd.inputs.size() > 3) fwd_ins.push_back(c.in(3));
  Provenance pv;
  pv.loc = c.fwd.prov.loc;
  NodeId lse = c.g.make(Op::AttentionLse, fwd_ins, c.fwd.attrs, pv);
  std::vector<NodeId> ins{c.in(0), c.in(1), c.in(2), c.grad, c.id, lse};
  if (c.fwd.inputs.size() > 3) ins.push_back(c.in(3));
  std::vector<NodeId> out(c.fwd.inputs.size());
  const Op grads[3] = {Op::AttentionGradQ, Op::AttentionGradK, Op::AttentionGradV};
  for (size_t i = 0; i < 3; ++i)
    if (c.needs(i)) out[i] = c.g.make(grads[i], ins, c.fwd.attrs, {});
  if (c.fwd.inputs.size() > 3 && c.needs(3)) out[3] = attention_mask_grad(c);
  return out;
}

// Second-order gradients through attention are not built; asking for one is an error, not a silent zero.
std::vector<NodeId> attention_grad_vjp(VjpCtx& c) {
  for (size_t i = 0; i < c.fwd.inputs.size(); ++i)
    if (c.needs(i))
      throw GraphError(std::string("[") + op_name(c.fwd.op) +
                       "] expected no second-order gradient through attention, got a request for one at " +
                       where(c.fwd.prov.loc));
  return std::vector<NodeId>(c.fwd.inputs.size());
}

// ------------------------------------------------------------------------------------------ rope
TypeInfo rope_shape(const ShapeCtx& c) {
  if (c.arity() < 1 || c.arity() > 2)
    c.fail("x and an optional start", std::to_string(c.arity()) + " inputs");
  const Shape& x = c.shape(0);
  if (!is_float(c.dtype(0))) c.fail("a floating-point x", std::string("dtype ") + dtype_name(c.dtype(0)));
  if (c.attrs.reals.size() != 1 || !(c.attrs.reals[0] > 0.0) || c.attrs.ints.size() != 1)
    c.fail("reals {theta > 0} and ints {position offset}",
           std::to_string(c.attrs.reals.size()) + " reals, " + std::to_string(c.attrs.ints.size()) + " ints");
  if (x.size() < 2 || x.back() % 2) c.fail("x [..., S, D] with D even", "x " + shape_str(x));
  if (c.arity() == 2) {
    const Shape& p = c.shape(1);
    if (c.dtype(1) != DType::I32 || !(p.empty() || (p.size() == 1 && x.size() >= 3 && p[0] == x[0])))
      c.fail("an i32 start of shape [] or [" + std::to_string(x[0]) + "] (x's first axis, x of rank >= 3)",
             std::string(dtype_name(c.dtype(1))) + shape_str(p));
  }
  return {x, c.dtype(0)};
}

HostTensor rope_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  const HostTensor& x = *in[0];
  const int64_t d = x.shape.back(), s = x.shape[x.shape.size() - 2], half = d / 2;
  const double theta = node.attrs.reals[0], sgn = node.attrs.flag_a ? -1.0 : 1.0;
  const int64_t offset = node.attrs.ints[0];
  const int64_t rows_per_batch = numel(x.shape) / d / std::max<int64_t>(1, x.shape[0]);
  HostTensor y(node.shape);
  for (int64_t row = 0; row < numel(x.shape) / d; ++row) {
    double start = 0;  // kept in f64: an i32 position can be any integer the reference holds
    if (in.size() == 2) start = in[1]->data[in[1]->data.size() == 1 ? 0 : size_t(row / rows_per_batch)];
    const double pos = double((row % s) + offset) + start;
    const size_t base = size_t(row * d);
    for (int64_t i = 0; i < half; ++i) {
      const double ang = pos * std::pow(theta, -2.0 * double(i) / double(d));
      const double co = std::cos(ang), si = sgn * std::sin(ang);
      const double a = x.data[base + size_t(i)], b = x.data[base + size_t(i + half)];
      y.data[base + size_t(i)] = a * co - b * si;
      y.data[base + size_t(i + half)] = b * co + a * si;
    }
  }
  return y;
}

// A rotation's transpose is the opposite rotation.
std::vector<NodeId> rope_vjp(VjpCtx& c) {
  if (!c.needs(0)) return {NodeId{}};
  Attrs a = c.fwd.attrs;
  a.flag_a = !a.flag_a;
  std::vector<NodeId> ins{c.grad};
  if (c.fwd.inputs.size() == 2) ins.push_back(c.in(1));
  std::vector<NodeId> out{c.g.make(Op::Rope, ins, a, {})};
  out.resize(c.fwd.inputs.size());
  return out;
}

// ------------------------------------------------------------------------------------------ dropout
TypeInfo dropout_shape(const ShapeCtx& c) {
  if (!is_float(c.dtype(0))) c.fail("a floating-point x", std::string("dtype ") + dtype_name(c.dtype(0)));
  if (c.attrs.reals.size() != 1 || !(c.attrs.reals[0] >= 0.0 && c.attrs.reals[0] < 1.0))
    c.fail("a drop probability p in [0, 1)",
           c.attrs.reals.empty() ? std::string("none") : "p = " + std::to_string(c.attrs.reals[0]));
  if (numel(c.shape(0)) > int64_t(UINT32_MAX)) c.fail("fewer than 2^32 elements", shape_str(c.shape(0)));
  return {c.shape(0), c.dtype(0)};
}

HostTensor dropout_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  const HostTensor& x = *in[0];
  const double p = node.attrs.reals[0], keep_scale = 1.0 / (1.0 - p);
  const uint32_t thr = dropout_threshold(p);
  HostTensor y(node.shape);
  for (size_t i = 0; i < x.data.size(); ++i)
    y.data[i] = dropout_bits(node.attrs.seed, uint32_t(i)) >= thr ? x.data[i] * keep_scale : 0.0;
  return y;
}

// The mask depends only on (seed, index), so the gradient is the same dropout applied to dy.
std::vector<NodeId> dropout_vjp(VjpCtx& c) {
  if (!c.needs(0)) return {NodeId{}};
  return {c.g.make(Op::Dropout, {c.grad}, c.fwd.attrs, {})};
}

// ------------------------------------------------------------------------------------------ swiglu
// silu(gate) * up, the fused form a rewrite makes of SwiGLU feed-forward layers.
TypeInfo swiglu_shape(const ShapeCtx& c) {
  for (size_t i = 0; i < 2; ++i)
    if (!is_float(c.dtype(i)))
      c.fail("floating-point inputs", "input " + std::to_string(i) + " of dtype " + dtype_name(c.dtype(i)));
  if (c.shape(0) != c.shape(1) || c.dtype(0) != c.dtype(1))
    c.fail("gate and up of one shape and dtype", shape_str(c.shape(0)) + " and " + shape_str(c.shape(1)));
  return {c.shape(0), c.dtype(0)};
}

HostTensor swiglu_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  HostTensor y(node.shape);
  for (size_t i = 0; i < y.data.size(); ++i) {
    const double a = in[0]->data[i];
    y.data[i] = a / (1.0 + std::exp(-a)) * in[1]->data[i];
  }
  return y;
}

// d gate = dy * up * silu'(gate), silu'(a) = s * (1 + a * (1 - s)) with s = sigmoid(a); d up = dy *
// silu(gate)
std::vector<NodeId> swiglu_vjp(VjpCtx& c) {
  Graph& g = c.g;
  NodeId a = c.in(0), up = c.in(1), dg, du;
  if (c.needs(0)) {
    NodeId s = g.sigmoid(a);
    NodeId dsilu = g.mul(s, g.add(g.scalar(1.0), g.mul(a, g.sub(g.scalar(1.0), s))));
    dg = g.mul(g.mul(c.grad, up), dsilu);
  }
  if (c.needs(1)) du = g.mul(c.grad, g.silu(a));
  return {dg, du};
}

}  // namespace

void register_attention(OpTable& t) {
  t.add({Op::Attention, -1, attention_shape, attention_vjp, attention_ref, nullptr});
  t.add({Op::AttentionLse, -1, attention_lse_shape, attention_grad_vjp, attention_lse_ref, nullptr});
  t.add({Op::AttentionGradQ, -1, attention_grad_shape, attention_grad_vjp, attention_grad_q_ref, nullptr});
  t.add({Op::AttentionGradK, -1, attention_grad_shape, attention_grad_vjp, attention_grad_k_ref, nullptr});
  t.add({Op::AttentionGradV, -1, attention_grad_shape, attention_grad_vjp, attention_grad_v_ref, nullptr});
  t.add({Op::Rope, -1, rope_shape, rope_vjp, rope_ref, nullptr});
  // rope and dropout depend on the element's index, which the pointwise expression template does not
  // expose, so they are index-aware copy kernels (Movement); dropout's generator for kernels is
  // dropout_glsl() in ops/dropout_hash.hpp
  t.add({Op::Dropout, 1, dropout_shape, dropout_vjp, dropout_ref, nullptr});
  t.add({Op::SwiGlu, 2, swiglu_shape, swiglu_vjp, swiglu_ref, "($0 * mn_sigmoid($0) * $1)"});
}

}  // namespace meganeura::ops
