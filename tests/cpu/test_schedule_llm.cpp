// Scheduling a language model's training step (nn::CausalLm: embedding, TransformerBlocks, tied head,
// cross-entropy over index labels): the archetype of every kernel, device-free.
#include <gtest/gtest.h>

#include <map>

#include "fake_caps.hpp"
#include "meganeura/nn/nn.hpp"
#include "meganeura/session/pipeline.hpp"

using namespace meganeura;
using meganeura::test::fake_caps;

namespace {

// One block of width 32 (4 heads, 2 KV heads), SwiGLU 48, vocabulary 40, batch 2, sequence 8.
Graph tiny_lm(int64_t layers = 1, int64_t batch = 2) {
  Graph g;
  nn::Context ctx(g, 3);
  nn::CausalLmConfig cfg;
  cfg.vocab = 40;
  cfg.dim = 32;
  cfg.layers = layers;
  cfg.heads = 4;
  cfg.kv_heads = 2;
  cfg.ffn_hidden = 48;
  nn::CausalLm lm(ctx, "", cfg);
  NodeId tokens = g.input("tokens", {batch, 8}, DType::I32);
  NodeId labels = g.input("labels", {batch, 8}, DType::I32);
  NodeId logits = g.reshape(lm(tokens), {batch * 8, cfg.vocab});
  g.set_outputs({g.named(g.cross_entropy_loss_index(logits, g.reshape(labels, {batch * 8})), "loss")});
  return g;
}

std::string describe(const CompiledStep& s) {
  std::string t;
  for (const Kernel& k : s.kernels.kernels) t += std::string(archetype_name(k.arch)) + " " + k.label + "\n";
  return t;
}

std::map<std::string, size_t> archetype_counts(const CompiledStep& s) {
  std::map<std::string, size_t> m;
  for (const Kernel& k : s.kernels.kernels) ++m[archetype_name(k.arch)];
  return m;
}

bool is_weight(const Graph& g, NodeId p) { return p.valid() && g.node(p).shape.size() == 2; }

}  // namespace

// The Adam step of a two-block model at batch 2: every kernel's archetype. Linear layers see [B, S, D]
// activations; their weight gradients fold B·S into the product's K, so each is one matmul (with the update
// fused), never a batched product summed by a row reduction. The tied embedding's gradient is the head's
// matmul with the embedding's scatter-add as its epilogue.
TEST(ScheduleLlm, TransformerStepArchetypes) {
  SessionConfig c;
  c.optimizer.kind = OptimizerKind::Adam;
  const CompiledStep s = compile_step(tiny_lm(2, 2), c, fake_caps());
  const Graph& g = s.graph;
  for (const Kernel& k : s.kernels.kernels) {
    if (is_weight(g, k.update)) {
      EXPECT_EQ(k.arch, Archetype::MatMul) << k.label << "\n" << describe(s);
    }
    if (k.arch == Archetype::RowReduce) {
      EXPECT_FALSE(is_weight(g, k.update)) << k.label;
    }
  }
  // per block: 6 weights (qkv, o, gate, up, down) = 5 matmul updates; plus the head's gradient into embed
  size_t weight_updates = 0;
  for (const Kernel& k : s.kernels.kernels)
    weight_updates += is_weight(g, k.update) && k.arch == Archetype::MatMul;
  EXPECT_EQ(weight_updates, 2u * 5u + 1u) << describe(s);
  const std::map<std::string, size_t> want{
      // matmuls: per block 5 forward, 5 input gradients, 5 weight gradients; the head, its input gradient and
      // the embedding's gradient. Copies, 1 a block: the gradients of Q, K and V concatenated into the QKV
      // product's (their pads' sum is a concat: add_adjacent_pads); the forward attention stores its output
      // with the heads merged (KernelGraph::permuted_into). 8 while the slice, head split and RoPE of Q, K,
      // V,
      // the gradient's head split and the merge were copy kernels of their own, 18 before movement chains
      // fused into one copy. Pointwise: 23 while the RMSNorm gradient stored xhat and dy·w (two more a norm,
      // ops/norm.cpp rms_norm_vjp)
      {"attention", 6},       {"copy", 2},       {"counter", 1},     {"gather", 1},
      {"matmul", 2 * 15 + 3}, {"pointwise", 13}, {"row-reduce", 23}, {"scatter", 1}};
  EXPECT_EQ(archetype_counts(s), want) << describe(s);
  EXPECT_EQ(s.kernels.count(Archetype::Optimizer), 0u) << describe(s);
  // Every attention kernel, forward and backward, reads Q, K and V through their chains from the QKV
  // product (and dO from the output projection's input gradient): no head split, permute or RoPE is stored.
  // The one permute a backward kernel reads holds the forward's output, merged (permuted_into).
  std::set<NodeId> holders;
  for (const auto& [value, permute] : s.kernels.permuted_into) holders.insert(permute);
  EXPECT_EQ(holders.size(), 2u);
  size_t attention_kernels = 0;
  for (const Kernel& k : s.kernels.kernels) {
    if (k.arch != Archetype::Attention) continue;
    ++attention_kernels;
    bool reads_qkv = false;
    for (NodeId r : k.reads) {
      const Op op = g.node(r).op;
      EXPECT_FALSE((op == Op::Rope || op == Op::Permute || op == Op::Slice) && !holders.count(r))
          << k.label << " reads a stored " << op_name(op) << " '" << node_label(g, r) << "'";
      reads_qkv = reads_qkv || g.node(r).prov.name.find("attn.qkv") != std::string::npos;
    }
    EXPECT_TRUE(reads_qkv) << k.label;
  }
  EXPECT_EQ(attention_kernels, 6u);

  // Kept gradients: each weight's gradient is written by a matmul kernel.
  c.keep_gradients = true;
  const CompiledStep k = compile_step(tiny_lm(2, 2), c, fake_caps());
  size_t checked = 0;
  for (auto [p, gr] : k.param_grads) {
    if (!is_weight(k.graph, p)) continue;
    const Kernel& w = k.kernels.kernels.at(k.kernels.producer.at(k.kernels.storage_of(gr)));
    EXPECT_EQ(w.arch, Archetype::MatMul) << w.label;
    ++checked;
  }
  EXPECT_EQ(checked, 11u);
}

// Long rows on few rows take two dispatches (partials per row chunk, then the combine): a 49152-class
// cross-entropy over 4 rows on a device of 8 compute units gets 12 chunks of 4096 per row (48 workgroups, not
// one); its gradient's softmax likewise. Rows as many as compute units, or short, stay one pass.
TEST(ScheduleLlm, LongRowsSplitIntoChunks) {
  auto dispatches = [](int64_t rows, int64_t classes) {
    Graph g;
    NodeId logits = g.parameter("logits", {rows, classes});
    NodeId labels = g.input("labels", {rows}, DType::I32);
    g.set_outputs({g.named(g.cross_entropy_loss_index(logits, labels), "loss")});
    SessionConfig c;
    const CompiledStep s = compile_step(g, c, fake_caps());
    std::vector<std::pair<std::string, uint32_t>> d;  // (variant, workgroups) of the row-reduction dispatches
    for (const GeneratedKernel& k : s.code)
      if (k.arch == Archetype::RowReduce) d.push_back({k.variant, k.grid[0] * k.grid[1] * k.grid[2]});
    return d;
  };
  using V = std::vector<std::pair<std::string, uint32_t>>;
  // the loss (batch-reduced: one combining workgroup), the count of counted labels for the gradient's mean (a
  // short row), the gradient's softmax (a workgroup per chunk)
  const std::pair<std::string, uint32_t> count{"row-reduce", 1};
  EXPECT_EQ(dispatches(4, 49152), (V{{"reduce.partials", 48},
                                     {"reduce.combine", 1},
                                     count,
                                     {"reduce.partials", 48},
                                     {"reduce.combine", 48}}));
  // 1 row: enough chunks (of at least 512 elements) for every compute unit
  EXPECT_EQ(dispatches(1, 8192), (V{{"reduce.partials", 8},
                                    {"reduce.combine", 1},
                                    count,
                                    {"reduce.partials", 8},
                                    {"reduce.combine", 8}}));
  // 16 rows of 8192 fill 8 units: the softmax stays one pass, the batch-reduced loss is still split over rows
  EXPECT_EQ(dispatches(16, 8192),
            (V{{"reduce.partials", 32}, {"reduce.combine", 1}, count, {"row-reduce", 16}}));
  // short rows: one pass each
  EXPECT_EQ(dispatches(4, 1000), (V{{"row-reduce", 1}, count, {"row-reduce", 4}}));
}

// SmolLM2's attention (9 query heads over 3 KV heads, S = 128, head dim 64) on a device of 8 compute units
// with 32 KiB of shared memory: the forward fits 32-row tiles, the backward 16; forward and dQ a workgroup
// per (query tile, head); dK/dV a workgroup per (key tile, query head) into parts, which the last workgroup
// of each key tile sums (a ticket a batch, KV head and key tile: 3 x 8).
TEST(ScheduleLlm, AttentionBackwardGrids) {
  Graph g;
  NodeId q = g.parameter("q", {1, 9, 128, 64}), k = g.parameter("k", {1, 3, 128, 64}),
         v = g.parameter("v", {1, 3, 128, 64});
  g.set_outputs({g.named(
      g.sum(g.mul(g.scaled_dot_product_attention(q, k, v, true), g.input("r", {1, 9, 128, 64}))), "loss")});
  SessionConfig c;
  const CompiledStep s = compile_step(g, c, fake_caps());
  std::vector<std::pair<std::string, std::array<uint32_t, 3>>> got;
  for (const GeneratedKernel& gk : s.code)
    if (gk.arch == Archetype::Attention) got.push_back({gk.variant, gk.grid});
  using G = std::array<uint32_t, 3>;
  EXPECT_EQ(got,
            (std::vector<std::pair<std::string, G>>{
                {"attention", G{4, 9, 1}}, {"attention", G{8, 9, 1}}, {"attention.dkdv-parts", G{8, 9, 1}}}));
  size_t tickets = 0;
  for (const GeneratedKernel& gk : s.code)
    for (const Binding& b : gk.bindings)
      if (b.kind == Binding::Tickets) {
        EXPECT_EQ(gk.variant, "attention.dkdv-parts");
        EXPECT_EQ(b.bytes, 3u * 8u * 4u);
        ++tickets;
      }
  EXPECT_EQ(tickets, 1u);
}
