// Flash attention on the GPU: the forward value and dQ, dK, dV against the float64 reference (and a
// finite-difference gradcheck of the GPU loss) at shapes that are multiples of no tile, causal and not,
// explicit masks, grouped-query heads; the fused step (forward + log-sum-exp in one kernel, dK + dV in one
// kernel) against the unfused one; and a memory plan without any sequence² buffer.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "gpu_opcheck.hpp"
#include "meganeura/session/pipeline.hpp"

using namespace meganeura;
using namespace meganeura::test;
using meganeura::test::InputSpec;

namespace {

class AttentionGpu : public GpuTest {};

NodeId sdpa(Graph& g, const std::vector<NodeId>& v, bool causal, double scale = 0.0) {
  std::optional<NodeId> mask;
  if (v.size() > 3) mask = v[3];
  return g.scaled_dot_product_attention(v[0], v[1], v[2], causal, mask, scale);
}

// q [B, HQ, S, D], k [B, HKV, T, D], v [B, HKV, T, DV]
std::vector<InputSpec> qkv(int64_t b, int64_t hq, int64_t hkv, int64_t s, int64_t t, int64_t d, int64_t dv) {
  return {{{b, hq, s, d}}, {{b, hkv, t, d}}, {{b, hkv, t, dv}}};
}

GpuTolerance tol() {
  GpuTolerance t;
  t.atol = 2e-5;
  t.rtol = 2e-4;
  return t;
}

// Inputs uniform in [-1, 1], parameters in [lo, hi], from `seed`.
reference::Feeds random_feeds(const Graph& g, uint64_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  reference::Feeds feeds;
  for (NodeId n : g.inputs()) feeds[g.node(n).prov.name] = random_tensor(g.node(n).shape, rng, -1, 1);
  for (NodeId n : g.parameters()) feeds[g.node(n).prov.name] = random_tensor(g.node(n).shape, rng, lo, hi);
  return feeds;
}

// Two sessions' reads, element by element (the fused step against the unfused one).
void expect_same(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5 + 1e-5 * std::fabs(want[i])) << what << "[" << i << "]";
}

// Session s's output `y_output` (value y of g, when valid) and every parameter's gradient of `loss` against
// the CPU reference on the same feeds.
void expect_reference(Session& s, const Graph& g, NodeId loss, NodeId y, size_t y_output,
                      const reference::Feeds& feeds, const std::string& what = "") {
  std::vector<NodeId> params = g.parameters();
  Graph dg = differentiate(g, loss, params);
  std::vector<NodeId> want_nodes;
  if (y.valid()) want_nodes.push_back(y);
  for (NodeId p : params) want_nodes.push_back(*dg.gradient(p));
  std::vector<HostTensor> want = reference::evaluate(dg, feeds, want_nodes);
  const size_t first = y.valid() ? 1 : 0;
  if (y.valid()) {
    EXPECT_TRUE(close_to(s.read_output(y_output), want[0], 2e-5, 2e-4, what + "y"));
  }
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(close_to(s.read_gradient(g.node(params[i]).prov.name), want[first + i], 2e-5, 2e-4,
                         what + "grad " + g.node(params[i]).prov.name));
}

}  // namespace

// Each case covers several features: every check compiles two sessions, which dominates on lavapipe.
TEST_F(AttentionGpu, ShapesNotMultiplesOfTiles) {
  // one query, one key, grouped-query heads 2 -> 1
  EXPECT_TRUE(check_op_gpu(
      "s1_gqa", [](Graph& g, auto& v) { return sdpa(g, v, false); }, qkv(1, 2, 1, 1, 1, 8, 8), tol()));
  EXPECT_TRUE(check_op_gpu(
      "s7_d12_causal", [](Graph& g, auto& v) { return sdpa(g, v, true); }, qkv(2, 2, 2, 7, 7, 12, 12),
      tol()));
  // two tiles, the second partial; Dv != D; grouped-query heads 4 -> 2
  EXPECT_TRUE(check_op_gpu(
      "s37_d20_dv12_gqa_causal", [](Graph& g, auto& v) { return sdpa(g, v, true); },
      qkv(1, 4, 2, 37, 37, 20, 12), tol()));
}

// Up to 8 queries take the row kernel (a workgroup per query, its 128 threads over the keys): more keys than
// threads and not a multiple of them, grouped-query heads, an output wider than the workgroup (small head
// sizes: the finite-difference check costs a session run per input element).
TEST_F(AttentionGpu, FewQueriesOverManyKeys) {
  EXPECT_TRUE(check_op_gpu(
      "decode_s1_t150_gqa_3_1", [](Graph& g, auto& v) { return sdpa(g, v, true); },
      qkv(1, 3, 1, 1, 150, 4, 4), tol()));
  EXPECT_TRUE(check_op_gpu(
      "s3_t130_dv136", [](Graph& g, auto& v) { return sdpa(g, v, false); }, qkv(1, 1, 1, 3, 130, 2, 136),
      tol()));
}

TEST_F(AttentionGpu, CausalWithUnequalLengths) {
  // S < T: a query block after a cache sees every cached key; 4 query heads over 1 KV head; a given scale
  EXPECT_TRUE(check_op_gpu(
      "decode_gqa_4_1", [](Graph& g, auto& v) { return sdpa(g, v, true, 0.7); }, qkv(2, 4, 1, 7, 13, 8, 8),
      tol()));
  // S > T: the first S - T queries see no key, their output and gradients are zero (not NaN)
  EXPECT_TRUE(check_op_gpu(
      "no_key_rows", [](Graph& g, auto& v) { return sdpa(g, v, true); }, qkv(1, 2, 2, 9, 5, 8, 8), tol()));
}

TEST_F(AttentionGpu, ExplicitMasks) {
  // a fixed additive mask broadcast over batch and heads, with one query row that sees nothing and
  // scattered -inf entries elsewhere
  auto specs = qkv(2, 2, 1, 7, 9, 12, 8);
  InputSpec mask{{7, 9}, -2.0, 2.0};
  mask.differentiable = false;
  mask.values = [](std::mt19937_64& rng) {
    HostTensor m = meganeura::test::random_tensor({7, 9}, rng, -2.0, 2.0);
    const double ninf = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < 9; ++j) m.data[size_t(2 * 9 + j)] = ninf;
    for (size_t i = 0; i < m.data.size(); i += 5) m.data[i] = ninf;
    return m;
  };
  specs.push_back(mask);
  EXPECT_TRUE(check_op_gpu(
      "fixed_mask", [](Graph& g, auto& v) { return sdpa(g, v, false); }, specs, tol()));
  // a learned bias per head [1, HQ, S, T] with a causal mask: its gradient comes from primitive ops
  auto learned = qkv(1, 2, 2, 5, 6, 8, 8);
  learned.push_back(InputSpec{{1, 2, 5, 6}, -1.0, 1.0});
  EXPECT_TRUE(check_op_gpu(
      "learned_mask_causal", [](Graph& g, auto& v) { return sdpa(g, v, true); }, learned, tol()));
}

// The fused step (forward with its log-sum-exp in one kernel, dK with dV in one kernel) against one kernel
// per node, on the same device; and the fused step for a device of one compute unit, whose tiles take four
// threads a row and square K/V tiles, where lavapipe's (64 units assumed) take sixteen and 64 keys a tile
// (codegen/attention.cpp attention_tpr, attention_key_tile).
TEST_F(AttentionGpu, FusedMatchesUnfused) {
  Graph g;
  // several tiles of queries and keys, none full
  const NodeId x = g.input("x", {1, 4, 70, 12});
  const NodeId q = g.mul(x, g.parameter("wq", {1, 4, 70, 12}));
  const NodeId k = g.mul(g.input("xk", {1, 2, 75, 12}), g.parameter("wk", {1, 2, 75, 12}));
  const NodeId v = g.mul(g.input("xv", {1, 2, 75, 12}), g.parameter("wv", {1, 2, 75, 12}));
  const NodeId y = g.scaled_dot_product_attention(q, k, v, true);
  // the loss is a plain sum: the attention gradients read a Fill as dout
  const NodeId loss = g.sum(y);
  g.set_outputs({loss, y});

  const reference::Feeds feeds = random_feeds(g, 3, 0.9, 1.1);

  SessionConfig cfg = session_config(true);
  CompileOptions fused, unfused;
  unfused.fuse = false;
  const CompiledStep fs = compile_step(g, cfg, device().caps(), fused);
  const CompiledStep us = compile_step(g, cfg, device().caps(), unfused);
  EXPECT_EQ(fs.kernels.count(Archetype::Attention), 3u)
      << fs.kernels.to_text(fs.graph);  // fwd+lse, dQ, dK+dV
  EXPECT_EQ(us.kernels.count(Archetype::Attention), 5u) << us.kernels.to_text(us.graph);
  runtime::DeviceCaps one = device().caps();
  one.compute_units = 1;
  CompileOptions narrow;
  narrow.caps = &one;
  // The values a define takes in the step's attention kernels (the forward and dQ, or dK/dV's parts).
  auto defined = [&](const CompiledStep& st, const std::string& name, bool dkdv) {
    std::set<std::string> n;
    for (const GeneratedKernel& k : st.code) {
      const size_t at = k.glsl.find("#define " + name + " ");
      if (k.variant.rfind("attention", 0) == 0 && (k.variant == "attention.dkdv-parts") == dkdv &&
          at != std::string::npos) {
        const size_t from = at + name.size() + 9;
        n.insert(k.glsl.substr(from, k.glsl.find('\n', at) - from));
      }
    }
    return n;
  };
  const CompiledStep ns = compile_step(g, cfg, one, fused);
  EXPECT_EQ(defined(fs, "AT_TPR", false), std::set<std::string>{"16u"});
  EXPECT_EQ(defined(fs, "AT_TPR", true), std::set<std::string>{"16u"});
  EXPECT_EQ(defined(ns, "AT_TPR", false), std::set<std::string>{"4u"});
  // Key tiles of 64 against query tiles of 16 where a row has 16 threads (attention_key_tile); square ones
  // with four threads a row, and in dK/dV.
  EXPECT_EQ(defined(fs, "AT_BR", false), std::set<std::string>{"16u"});
  EXPECT_EQ(defined(fs, "AT_BC", false), std::set<std::string>{"64u"});
  EXPECT_EQ(defined(fs, "AT_BC", true), std::set<std::string>{"16u"});
  EXPECT_EQ(defined(ns, "AT_BC", false), defined(ns, "AT_BR", false));

  Session a = build_with(g, cfg, shared_device(), fused);
  Session b = build_with(g, cfg, shared_device(), unfused);
  Session c = build_with(g, cfg, shared_device(), narrow);
  feed_all(a, g, feeds);
  feed_all(b, g, feeds);
  feed_all(c, g, feeds);
  a.run();
  b.run();
  c.run();
  expect_same(a.read_output(1), b.read_output(1), "y");
  expect_same(c.read_output(1), b.read_output(1), "y, four threads a row");
  for (const char* w : {"wq", "wk", "wv"}) {
    expect_same(a.read_gradient(w), b.read_gradient(w), std::string("grad ") + w);
    expect_same(c.read_gradient(w), b.read_gradient(w), std::string("grad ") + w + ", four threads a row");
  }
  expect_reference(a, g, loss, y, 1, feeds);  // and both against the reference
}

// Multi-head attention as nn::MultiHeadAttention builds it: one QKV product, each head group a slice,
// reshape and permute of it, RoPE on Q and K (grouped KV heads, a position offset, a sequence that fills no
// tile). The schedule computes those chains inside the forward, dQ and dK/dV kernels (and dO's head split
// inside both backward ones) instead of storing them, and the forward stores its output with the heads merged
// (the backward reads it back there): no copy kernel is left in the forward, and values and gradients equal
// the unfused step's (one kernel per node, every chain stored) and the reference's.
TEST_F(AttentionGpu, OperandChainsComputedInsideMatchUnfused) {
  const int64_t B = 1, S = 37, D = 48, HQ = 4, HKV = 2, HD = 8;
  Graph g;
  const NodeId x = g.input("x", {B, S, D});
  const NodeId w = g.parameter("wqkv", {D, (HQ + 2 * HKV) * HD});
  const NodeId p = g.matmul(x, w);
  auto heads = [&](int64_t start, int64_t count) {
    const NodeId t = g.slice(p, 2, start * HD, (start + count) * HD);
    return g.permute(g.reshape(t, {B, S, count, HD}), {0, 2, 1, 3});
  };
  const NodeId q = g.rope(heads(0, HQ), 10000.0, 3), k = g.rope(heads(HQ, HKV), 10000.0, 3);
  const NodeId v = heads(HQ + HKV, HKV);
  const NodeId a = g.scaled_dot_product_attention(q, k, v, true);
  const NodeId merged = g.reshape(g.permute(a, {0, 2, 1, 3}), {B, S, HQ * HD});
  const NodeId wo = g.parameter("wo", {HQ * HD, D});
  const NodeId y = g.matmul(merged, wo);
  const NodeId loss = g.sum(g.mul(y, y));
  g.set_outputs({loss, y});

  const reference::Feeds feeds = random_feeds(g, 5, -0.3, 0.3);

  SessionConfig cfg = session_config(true);
  CompileOptions fused, unfused;
  unfused.fuse = false;
  const CompiledStep fs = compile_step(g, cfg, device().caps(), fused);
  // The backward reads the forward's output from where the forward stored it: merged (permuted_into).
  auto holds_output = [&](NodeId r) {
    for (const auto& [value, permute] : fs.kernels.permuted_into)
      if (permute == r) return true;
    return false;
  };
  EXPECT_EQ(fs.kernels.permuted_into.size(), 1u) << fs.kernels.to_text(fs.graph);
  size_t forward_copies = 0, attention_kernels = 0;
  for (const Kernel& kn : fs.kernels.kernels) {
    if (kn.arch == Archetype::Attention) {
      ++attention_kernels;
      for (NodeId r : kn.reads) {
        const Op op = fs.graph.node(r).op;
        EXPECT_FALSE((op == Op::Rope || op == Op::Permute || op == Op::Slice) && !holds_output(r))
            << kn.label << " reads a stored " << op_name(op) << "\n"
            << fs.kernels.to_text(fs.graph);
      }
    }
    forward_copies += kn.arch == Archetype::Copy && kernel_phase(fs.graph, kn) == Phase::Forward;
  }
  EXPECT_EQ(attention_kernels, 3u) << fs.kernels.to_text(fs.graph);
  EXPECT_EQ(forward_copies, 0u) << "no forward copy: the heads' merge is the attention's store\n"
                                << fs.kernels.to_text(fs.graph);

  Session sf = build_with(g, cfg, shared_device(), fused);
  Session su = build_with(g, cfg, shared_device(), unfused);
  feed_all(sf, g, feeds);
  feed_all(su, g, feeds);
  sf.run();
  su.run();
  expect_same(sf.read_output(1), su.read_output(1), "y");
  for (const char* n : {"wqkv", "wo"})
    expect_same(sf.read_gradient(n), su.read_gradient(n), std::string("grad ") + n);
  expect_reference(sf, g, loss, y, 1, feeds);
}

// dK/dV by parts (grouped KV heads) sums its parts in the dispatch's last workgroup of each key tile, which
// puts the tile's ticket back to zero: a second step of the same session, on other inputs, must match the
// reference again (a ticket left non-zero would skip that step's sums and keep the first step's dK, dV).
TEST_F(AttentionGpu, PartsSummedInPlaceStayRightStepAfterStep) {
  Graph g;
  const NodeId q = g.mul(g.input("x", {1, 6, 45, 8}), g.parameter("wq", {1, 6, 45, 8}));
  const NodeId k = g.mul(g.input("xk", {1, 2, 45, 8}), g.parameter("wk", {1, 2, 45, 8}));
  const NodeId v = g.mul(g.input("xv", {1, 2, 45, 8}), g.parameter("wv", {1, 2, 45, 8}));
  const NodeId y = g.scaled_dot_product_attention(q, k, v, true);
  const NodeId loss = g.sum(g.mul(y, y));
  g.set_outputs({loss});
  SessionConfig cfg = session_config(true);
  const CompiledStep st = compile_step(g, cfg, device().caps());
  size_t by_parts = 0;
  for (const GeneratedKernel& gk : st.code)
    for (const Binding& b : gk.bindings)
      by_parts += gk.variant == "attention.dkdv-parts" && b.kind == Binding::Tickets;
  ASSERT_EQ(by_parts, 1u) << "the test needs the parts path on this device";
  Session s = build_with(g, cfg, shared_device(), CompileOptions{});
  for (uint64_t seed : {7u, 8u, 9u}) {
    const reference::Feeds feeds = random_feeds(g, seed, 0.5, 1.5);
    feed_all(s, g, feeds);
    s.run();
    expect_reference(s, g, loss, NodeId{}, 0, feeds, "step " + std::to_string(seed - 6) + ", ");
  }
}

// Tiles of 32 (64 compute units assumed on lavapipe: 2 x 8 heads x 5 query tiles fill them), the size the
// H100 takes at SmolLM2's batch 16 prefill: the forward's softmax over four threads a row, value and
// gradients against the reference (no finite difference: its run per input element is the cost here).
TEST_F(AttentionGpu, TilesOfThirtyTwoMatchTheReference) {
  GpuTolerance t = tol();
  t.finite_difference = false;
  EXPECT_TRUE(check_op_gpu(
      "s160_gqa_8_4_causal", [](Graph& g, auto& v) { return sdpa(g, v, true); },
      qkv(2, 8, 4, 160, 160, 16, 16), t));
}

// Issue 5, item 5: no buffer of the compiled training step holds S x S values.
TEST_F(AttentionGpu, NoSequenceSquaredBuffer) {
  constexpr int64_t S = 512, D = 16;
  Graph g;
  const NodeId q = g.mul(g.input("x", {1, 4, S, D}), g.parameter("wq", {1, 4, S, D}));
  const NodeId k = g.mul(g.input("xk", {1, 2, S, D}), g.parameter("wk", {1, 2, S, D}));
  const NodeId v = g.mul(g.input("xv", {1, 2, S, D}), g.parameter("wv", {1, 2, S, D}));
  g.set_outputs({g.sum(g.scaled_dot_product_attention(q, k, v, true))});
  const CompiledStep st = compile_step(g, session_config(true), device().caps());
  const uint64_t limit = uint64_t(S) * S * 4;  // bytes of one head's f32 score matrix
  ASSERT_GT(st.plan.slots.size(), 0u);
  for (const Slot& s : st.plan.slots) EXPECT_LT(s.bytes, limit) << node_label(st.graph, s.node);
  for (const GeneratedKernel& k2 : st.code)
    for (const Binding& b : k2.bindings) EXPECT_LT(b.bytes, limit) << k2.label;
  // (The arena as a whole may exceed one score matrix: dK/dV's parts grow with the device's compute units,
  // 1.19 MB on the H200's 132; no single buffer does.)
  EXPECT_EQ(st.kernels.count(Archetype::Attention), 3u) << st.kernels.to_text(st.graph);
}

// A KV cache's unwritten rows sit behind a -inf mask: those keys are skipped (no product, and whole hidden
// tiles not visited), so a NaN in their K rows, or in V rows of a hidden tile, never reaches the output. Keys
// `visible`.. are hidden; K holds NaN from key `visible` on, V from key `v_nan` on. The expected values are a
// float64 softmax over the visible keys, written here (grouped-query heads: query head h reads KV head
// h / (hq / hkv)).
namespace {

void masked_keys_case(int64_t hq, int64_t hkv, int64_t S, int64_t T, int64_t D, int64_t DV, int64_t visible,
                      int64_t v_nan) {
  SCOPED_TRACE("hq " + std::to_string(hq) + " S " + std::to_string(S) + " T " + std::to_string(T) + " D " +
               std::to_string(D) + " DV " + std::to_string(DV));
  Graph g;
  const NodeId q = g.input("q", {1, hq, S, D}), k = g.input("k", {1, hkv, T, D}),
               v = g.input("v", {1, hkv, T, DV});
  const NodeId mask = g.input("mask", {S, T});
  g.set_outputs({g.scaled_dot_product_attention(q, k, v, false, mask)});
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  auto fill = [&](int64_t n) {
    std::vector<double> x(static_cast<size_t>(n));
    for (double& e : x) e = u(rng);
    return x;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  std::vector<double> qv = fill(hq * S * D), kv = fill(hkv * T * D), vv = fill(hkv * T * DV),
                      mv = fill(S * T);
  for (int64_t h = 0; h < hkv; ++h)
    for (int64_t j = visible; j < T; ++j) {
      for (int64_t d = 0; d < D; ++d) kv[size_t((h * T + j) * D + d)] = nan;
      if (j >= v_nan)
        for (int64_t d = 0; d < DV; ++d) vv[size_t((h * T + j) * DV + d)] = nan;
    }
  for (int64_t i = 0; i < S; ++i)
    for (int64_t j = visible; j < T; ++j) mv[size_t(i * T + j)] = -inf;
  reference::Feeds feeds{{"q", HostTensor({1, hq, S, D}, qv)},
                         {"k", HostTensor({1, hkv, T, D}, kv)},
                         {"v", HostTensor({1, hkv, T, DV}, vv)},
                         {"mask", HostTensor({S, T}, mv)}};
  Session s = build_gpu(g, false);
  feed_all(s, g, feeds);
  s.run();
  const std::vector<float> got = s.read_output(0);
  ASSERT_EQ(got.size(), size_t(hq * S * DV));
  const double scale = 1.0 / std::sqrt(double(D));
  for (int64_t h = 0; h < hq; ++h) {
    const int64_t kh = h / (hq / hkv);
    for (int64_t i = 0; i < S; ++i) {
      std::vector<double> p(static_cast<size_t>(visible));
      double mx = -inf, den = 0.0;
      for (int64_t j = 0; j < visible; ++j) {
        double sc = 0.0;
        for (int64_t d = 0; d < D; ++d)
          sc += qv[size_t((h * S + i) * D + d)] * kv[size_t((kh * T + j) * D + d)];
        p[size_t(j)] = sc * scale + mv[size_t(i * T + j)];
        mx = std::max(mx, p[size_t(j)]);
      }
      for (double& x : p) den += (x = std::exp(x - mx));
      for (int64_t d = 0; d < DV; ++d) {
        double o = 0.0;
        for (int64_t j = 0; j < visible; ++j) o += p[size_t(j)] / den * vv[size_t((kh * T + j) * DV + d)];
        const float gpu = got[size_t((h * S + i) * DV + d)];
        ASSERT_TRUE(std::isfinite(gpu)) << "head " << h << " query " << i << " column " << d;
        EXPECT_NEAR(gpu, o, 2e-5 + 2e-4 * std::fabs(o)) << "head " << h << " query " << i << " column " << d;
      }
    }
  }
}

}  // namespace

// 20 queries: the tiled forward (V NaN from key 64, a tile boundary for tiles of 16 and 32).
TEST_F(AttentionGpu, MaskedKeysAreSkipped) { masked_keys_case(2, 1, 20, 70, 8, 8, 40, 64); }

// Up to 8 queries: the rows kernel. Head size 80 reads a K row in two chunks of 40; V rows of 6 columns one
// value a thread (85 key parts: 680 keys an iteration, so 700 keys take two); 64 x 64 heads four columns a
// thread (32 parts, 256 keys an iteration: 300 visible keys take two); more keys than its 512 threads.
TEST_F(AttentionGpu, RowsKernelMatchesAFloat64SoftmaxOverVisibleKeys) {
  masked_keys_case(3, 1, 2, 760, 80, 6, 700, 720);
  masked_keys_case(2, 2, 1, 320, 64, 64, 300, 310);
}
