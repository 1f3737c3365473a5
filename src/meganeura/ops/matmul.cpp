// MatMul: [.., M, K] x [.., K, N] with broadcast batch dimensions. attrs.flag_a / flag_b read A / B
// transposed in place ([.., K, M] / [.., N, K]); the VJP uses the same flags so no transpose is ever copied.
#include "meganeura/ops/helpers.hpp"

namespace meganeura::ops {

namespace {

struct Dims {
  int64_t m, k, n;
  Shape batch;
};

Dims dims_of(const Shape& a, const Shape& b, bool ta, bool tb, const Shape& batch) {
  size_t ra = a.size(), rb = b.size();
  Dims d;
  d.m = ta ? a[ra - 1] : a[ra - 2];
  d.k = ta ? a[ra - 2] : a[ra - 1];
  d.n = tb ? b[rb - 2] : b[rb - 1];
  d.batch = batch;
  return d;
}

TypeInfo matmul_rule(const ShapeCtx& c) {
  const Shape &a = c.shape(0), &b = c.shape(1);
  bool ta = c.attrs.flag_a, tb = c.attrs.flag_b;
  std::string form = std::string(ta ? "A[..,K,M]" : "A[..,M,K]") + " x " + (tb ? "B[..,N,K]" : "B[..,K,N]");
  if (a.size() < 2 || b.size() < 2)
    c.fail("operands of rank >= 2 (" + form + ")", shape_str(a) + " x " + shape_str(b));
  require_float(c, 0);
  require_float(c, 1);
  DType dt = common_dtype(c, 0, 2);
  int64_t ka = ta ? a[a.size() - 2] : a.back();
  int64_t kb = tb ? b.back() : b[b.size() - 2];
  if (ka != kb)
    c.fail("equal K in " + form, shape_str(a) + " x " + shape_str(b) + " (K " + std::to_string(ka) + " vs " +
                                     std::to_string(kb) + ")");
  Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  auto batch = broadcast_shapes(ba, bb);
  if (!batch) c.fail("batch dimensions that broadcast", shape_str(a) + " x " + shape_str(b));
  Dims d = dims_of(a, b, ta, tb, *batch);
  Shape out = *batch;
  out.push_back(d.m);
  out.push_back(d.n);
  return {out, dt};
}

HostTensor ref_matmul(const Node& node, const std::vector<const HostTensor*>& in) {
  const HostTensor &A = *in[0], &B = *in[1];
  bool ta = node.attrs.flag_a, tb = node.attrs.flag_b;
  Shape batch(node.shape.begin(), node.shape.end() - 2);
  Dims d = dims_of(A.shape, B.shape, ta, tb, batch);
  Shape ba(A.shape.begin(), A.shape.end() - 2), bb(B.shape.begin(), B.shape.end() - 2);
  BroadcastIndex ia(ba, batch), ib(bb, batch);
  HostTensor r(node.shape);
  int64_t nb = numel(batch), mk = d.m * d.k, kn = d.k * d.n;
  for (int64_t bi = 0; bi < nb; ++bi) {
    const double* a = A.data.data() + ia(bi) * mk;
    const double* b = B.data.data() + ib(bi) * kn;
    double* o = r.data.data() + bi * d.m * d.n;
    for (int64_t i = 0; i < d.m; ++i)
      for (int64_t j = 0; j < d.n; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < d.k; ++k)
          acc += (ta ? a[k * d.m + i] : a[i * d.k + k]) * (tb ? b[j * d.k + k] : b[k * d.n + j]);
        o[i * d.n + j] = acc;
      }
  }
  return r;
}

// C = op(A) op(B), G = dC. Each case picks flags so that dA has A's layout and dB has B's.
std::vector<NodeId> vjp_matmul(VjpCtx& c) {
  Graph& g = c.g;
  NodeId A = c.in(0), B = c.in(1), G = c.grad;
  bool ta = c.fwd.attrs.flag_a, tb = c.fwd.attrs.flag_b;
  NodeId ga, gb;
  if (c.needs(0)) {
    if (!ta)
      ga = tb ? g.matmul(G, B) : g.matmul(G, B, false, true);  // G B | G Bᵀ
    else
      ga = tb ? g.matmul(B, G, true, true) : g.matmul(B, G, false, true);  // (G B)ᵀ = Bᵀ Gᵀ | B Gᵀ
    ga = sum_to_shape(g, ga, c.in_shape(0));
  }
  if (c.needs(1) && !ta && c.in_shape(1).size() == 2 && c.in_shape(0).size() > 2) {
    // A 2-D B (a linear layer's weight) against A [.., M, K]: the batch axes are more rows of the product, so
    // the weight gradient is one matmul over K' = batch·M rather than a batched product summed over its
    // batch. Copies: every node made below may move the graph's node storage.
    const Shape as = c.in_shape(0);
    const int64_t g_cols = g.node(G).shape.back();
    const int64_t rows = numel(as) / as.back();
    NodeId a2 = g.reshape(A, {rows, as.back()});
    NodeId g2 = g.reshape(G, {rows, g_cols});
    gb = tb ? g.matmul(g2, a2, true, false) : g.matmul(a2, g2, true, false);  // Gᵀ A | Aᵀ G
  } else if (c.needs(1)) {
    if (!tb)
      gb = ta ? g.matmul(A, G) : g.matmul(A, G, true, false);  // A G | Aᵀ G
    else
      gb = ta ? g.matmul(G, A, true, true) : g.matmul(G, A, true, false);  // Gᵀ Aᵀ | Gᵀ A
    gb = sum_to_shape(g, gb, c.in_shape(1));
  }
  return {ga, gb};
}

}  // namespace

void register_matmul(OpTable& t) { t.add({Op::MatMul, 2, matmul_rule, vjp_matmul, ref_matmul, nullptr}); }

}  // namespace meganeura::ops
