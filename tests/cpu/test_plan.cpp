// Memory planning: aliasing never lets two simultaneously live values share bytes; persistent kinds are
// sized exactly; inference plans hold no gradients or optimizer state.
#include <gtest/gtest.h>

#include <random>

#include "fake_caps.hpp"
#include "meganeura/autodiff/autodiff.hpp"
#include "meganeura/nn/nn.hpp"
#include "meganeura/plan/plan.hpp"
#include "meganeura/session/pipeline.hpp"

using namespace meganeura;

namespace {

// Every pair of activations whose live level ranges intersect occupies disjoint bytes, and every
// activation lies inside the arena.
void expect_no_live_overlap(const MemoryPlan& p) {
  for (size_t i = 0; i < p.slots.size(); ++i) {
    const Slot& a = p.slots[i];
    if (a.kind != StorageKind::Activation) continue;
    EXPECT_LE(a.offset + a.bytes, p.arena_bytes);
    for (size_t j = i + 1; j < p.slots.size(); ++j) {
      const Slot& b = p.slots[j];
      if (b.kind != StorageKind::Activation) continue;
      bool live_together = !(a.last < b.first || b.last < a.first);
      bool bytes_overlap = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      EXPECT_FALSE(live_together && bytes_overlap)
          << "slots " << i << " [" << a.first << "," << a.last << "] @" << a.offset << "+" << a.bytes
          << " and " << j << " [" << b.first << "," << b.last << "] @" << b.offset << "+" << b.bytes;
    }
  }
}

// A random chain-and-branch graph of pointwise, reduction and matmul nodes over [n, n] values.
Graph random_graph(uint32_t seed, std::vector<NodeId>& roots) {
  std::mt19937 rng(seed);
  Graph g;
  const int64_t n = 8;
  std::vector<NodeId> vals{g.input("x", {n, n}), g.parameter("w", {n, n})};
  for (int i = 0; i < 14; ++i) {
    NodeId a = vals[rng() % vals.size()], b = vals[rng() % vals.size()];
    switch (rng() % 5) {
      case 0: vals.push_back(g.add(a, b)); break;
      case 1: vals.push_back(g.matmul(a, b)); break;
      case 2: vals.push_back(g.softmax(a)); break;
      case 3: vals.push_back(g.add(g.sum(a, {1}, true), b)); break;
      default: vals.push_back(g.tanh(a)); break;
    }
  }
  roots = {vals.back(), vals[vals.size() / 2]};
  g.set_outputs(roots);
  return g;
}

}  // namespace

TEST(Plan, AliasingNeverOverlapsLiveValues) {
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    std::vector<NodeId> roots;
    Graph g = random_graph(seed, roots);
    ScheduleOptions so;
    so.fuse = seed % 2 == 0;  // unfused graphs have many more intermediates to pack
    KernelGraph kg = schedule(g, roots, so);
    PlanOptions po;
    po.outputs = roots;
    MemoryPlan p = plan_memory(g, kg, po);
    expect_no_live_overlap(p);
    PlanOptions off = po;
    off.alias = false;
    MemoryPlan q = plan_memory(g, kg, off);
    EXPECT_LE(p.arena_bytes, q.arena_bytes);
  }
}

TEST(Plan, ReadersKeepValuesLive) {
  // A value read by a later level must be live at that level.
  std::vector<NodeId> roots;
  Graph g = random_graph(7, roots);
  ScheduleOptions so;
  so.fuse = false;
  KernelGraph kg = schedule(g, roots, so);
  MemoryPlan p = plan_memory(g, kg, PlanOptions{});
  for (const Kernel& k : kg.kernels)
    for (NodeId r : k.reads) {
      const Slot& s = p.slots[p.slot(kg, r)];
      if (s.kind != StorageKind::Activation) continue;
      EXPECT_GE(s.last, k.level);
      EXPECT_LT(s.first, k.level);
    }
}

TEST(Plan, AliasingReusesBytesInALongChain) {
  Graph g;
  NodeId v = g.input("x", {64, 64});
  NodeId w = g.parameter("w", {64, 64});
  for (int i = 0; i < 8; ++i) v = g.matmul(v, w);
  g.set_outputs({v});
  KernelGraph kg = schedule(g, {v});
  PlanOptions po;
  po.outputs = {v};
  po.alignment = 256;
  MemoryPlan on = plan_memory(g, kg, po);
  po.alias = false;
  MemoryPlan off = plan_memory(g, kg, po);
  // 7 intermediates of 16 KiB: ping-pong needs two, no aliasing needs seven.
  EXPECT_EQ(on.arena_bytes, 2u * 64 * 64 * 4);
  EXPECT_EQ(off.arena_bytes, 7u * 64 * 64 * 4);
  expect_no_live_overlap(on);
}

TEST(Plan, TrainingPlanSizesPersistentKinds) {
  Graph g;
  NodeId x = g.input("x", {32, 784});
  NodeId labels = g.input("labels", {32, 10});
  NodeId w1 = g.parameter("w1", {784, 128});
  NodeId w2 = g.parameter("w2", {128, 10});
  NodeId loss = g.cross_entropy_loss(g.matmul(g.relu(g.matmul(x, w1)), w2), labels);
  g.set_outputs({loss});
  Graph t = differentiate(g, loss);
  std::vector<std::pair<NodeId, NodeId>> pg;
  std::vector<NodeId> roots{loss};
  for (NodeId p : t.parameters()) {
    pg.push_back({p, *t.gradient(p)});
    roots.push_back(*t.gradient(p));
  }
  KernelGraph kg = schedule(t, roots);
  PlanOptions po;
  po.outputs = {loss};
  po.param_grads = pg;
  const uint64_t params = (784 * 128 + 128 * 10) * 4;
  for (uint32_t moments : {0u, 1u, 2u}) {
    po.moments_per_parameter = moments;
    po.hyper_bytes = 32;
    MemorySummary s = plan_memory(t, kg, po).summary();
    EXPECT_EQ(s.parameters, params);
    EXPECT_EQ(s.gradients, params);
    EXPECT_EQ(s.optimizer_state, moments * params);
    EXPECT_EQ(s.outputs, 4u);
  }
  // The forward graph alone: no gradients, no optimizer state.
  KernelGraph fk = schedule(g, {loss, w1, w2, x, labels});
  PlanOptions fo;
  fo.outputs = {loss};
  MemorySummary f = plan_memory(g, fk, fo).summary();
  EXPECT_EQ(f.gradients, 0u);
  EXPECT_EQ(f.optimizer_state, 0u);
  EXPECT_EQ(f.parameters, params);
}

// A device that binds at most 64 KiB per buffer: the training step of a 4-block language model (an Adam
// step's parameters and moments, ~1 MiB, and its activations) is planned in parts of 64 KiB; no value
// straddles a part, activations live together still never share bytes, and a value larger than a part is a
// SessionError naming it.
TEST(Plan, ArenasSplitIntoPartsThatNoValueStraddles) {
  auto lm = [](int64_t vocab) {
    Graph g;
    nn::Context ctx(g, 1);
    nn::CausalLmConfig cfg;
    cfg.vocab = vocab;
    cfg.dim = 64;
    cfg.layers = 4;
    cfg.heads = 4;
    cfg.kv_heads = 2;
    cfg.ffn_hidden = 96;
    nn::CausalLm m(ctx, "", cfg);
    NodeId logits = g.reshape(m(g.input("tokens", {2, 16}, DType::I32)), {32, vocab});
    g.set_outputs({g.named(g.cross_entropy_loss_index(logits, g.input("labels", {32}, DType::I32)), "loss")});
    return g;
  };
  runtime::DeviceCaps caps = meganeura::test::fake_caps();
  caps.max_storage_buffer_range = 64 << 10;
  SessionConfig c;
  c.optimizer.kind = OptimizerKind::Adam;
  const CompiledStep s = compile_step(lm(200), c, caps);
  const MemoryPlan& p = s.plan;
  ASSERT_EQ(p.part_bytes, 64u << 10);
  EXPECT_GT(MemoryPlan::parts(p.persistent_bytes, p.part_bytes), 10u) << p.persistent_bytes;
  EXPECT_GT(MemoryPlan::parts(p.arena_bytes, p.part_bytes), 1u) << p.arena_bytes;
  for (const Slot& sl : p.slots) {
    EXPECT_EQ(sl.offset / p.part_bytes, (sl.offset + sl.bytes - 1) / p.part_bytes)
        << storage_kind_name(sl.kind) << " " << sl.offset << "+" << sl.bytes;
    EXPECT_LE(sl.offset + sl.bytes, in_arena(sl.kind) ? p.arena_bytes : p.persistent_bytes);
  }
  // persistent values never share bytes
  for (size_t i = 0; i < p.slots.size(); ++i)
    for (size_t j = i + 1; j < p.slots.size(); ++j) {
      const Slot &a = p.slots[i], &b = p.slots[j];
      if (in_arena(a.kind) || in_arena(b.kind)) continue;
      EXPECT_FALSE(a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes) << i << " " << j;
    }
  expect_no_live_overlap(p);
  EXPECT_NE(p.to_text(s.graph).find("split into buffers of 65536 B"), std::string::npos);
  // an embedding of 300 x 64 floats (76800 B) fits no part
  try {
    compile_step(lm(300), c, caps);
    ADD_FAILURE() << "expected a SessionError";
  } catch (const SessionError& e) {
    EXPECT_NE(std::string(e.what()).find("embed.weight"), std::string::npos) << e.what();
  }
}

// NVIDIA's maxStorageBufferRange is 2^32 - 1 with a 16-byte offset alignment: parts of 2^32 - 16 bytes were
// 2^32 once the allocator rounded them to its 256-byte blocks, past the range (the H100 refused
// SmolLM2-135M's Adam step at batch 8, sequence 512). A part is a whole number of allocator blocks no larger
// than the range.
TEST(Plan, PartsAreWholeAllocatorBuffersWithinTheRange) {
  runtime::DeviceCaps caps = meganeura::test::fake_caps();
  caps.max_storage_buffer_range = 4294967295u;
  caps.min_storage_buffer_offset_alignment = 16;
  EXPECT_EQ(runtime::buffer_alignment(caps), 256u);
  EXPECT_EQ(runtime::bindable_bytes(caps), 4294967040u);
  Graph g;
  NodeId x = g.input("x", {4, 8});
  NodeId w = g.parameter("w", {8, 3});
  g.set_outputs({g.named(g.sum(g.matmul(x, w), {}, false), "loss")});
  SessionConfig c;
  c.optimizer.kind = OptimizerKind::Adam;
  const MemoryPlan p = compile_step(g, c, caps).plan;
  EXPECT_EQ(p.part_bytes, 4294967040u);
  EXPECT_EQ(p.part_bytes % runtime::buffer_alignment(caps), 0u);
  caps.min_storage_buffer_offset_alignment = 1024;  // a device alignment above 256 rules
  EXPECT_EQ(runtime::bindable_bytes(caps), 4294966272u);
  EXPECT_EQ(compile_step(g, c, caps).plan.part_bytes, 4294966272u);
}
