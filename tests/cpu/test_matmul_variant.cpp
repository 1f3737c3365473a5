// The matmul variant rule (kernels::choose_variant: scalar tile by device size, split-K for long K under few
// tiles) and how a split matmul reaches the compiled step: two dispatches, scratch in the activation arena, a
// barrier between them. Device-free: fake caps with the H200's 132 SMs.
#include <gtest/gtest.h>

#include <map>

#include "fake_caps.hpp"
#include "meganeura/nn/nn.hpp"
#include "meganeura/session/pipeline.hpp"

using namespace meganeura;
using kernels::MatmulTier;
using kernels::MatmulVariant;

namespace {

runtime::DeviceCaps sm_caps(uint32_t units) {
  runtime::DeviceCaps c = meganeura::test::fake_caps();
  c.compute_units = units;
  return c;
}

kernels::MatmulShape shape(uint32_t m, uint32_t n, uint32_t k, uint32_t batch = 1) {
  kernels::MatmulShape s;
  s.m = m;
  s.n = n;
  s.k = k;
  s.batch = batch;
  return s;
}

std::string chosen(const runtime::DeviceCaps& caps, const kernels::MatmulShape& s) {
  return kernels::choose_variant(caps, s, kernels::choose_tier(caps, s, MatmulTier::Scalar)).to_string();
}

// The README MLP as profile_session builds it (nn::Mlp "mlp", 784-128-10 with biases, Adam).
Graph mlp(int64_t batch) {
  Graph g;
  nn::Context ctx(g, 1);
  NodeId x = g.input("x", {batch, 784});
  NodeId y = g.input("labels", {batch, 10});
  nn::Mlp net(ctx, "mlp", {784, 128, 10});
  g.set_outputs({g.named(g.cross_entropy_loss(net(x), y), "loss")});
  return g;
}

SessionConfig adam() {
  SessionConfig c;
  c.optimizer.kind = OptimizerKind::Adam;
  return c;
}

}  // namespace

TEST(MatmulVariant, RuleFillsTheDeviceWithTilesThenSplitsK) {
  const runtime::DeviceCaps h200 = sm_caps(132);
  EXPECT_EQ(chosen(h200, shape(8192, 8192, 8192)), "scalar.128");
  EXPECT_EQ(chosen(h200, shape(4096, 4096, 4096)), "scalar.128");  // 1024 workgroups
  EXPECT_EQ(chosen(h200, shape(2048, 2048, 2048)), "scalar.128");  // 256
  EXPECT_EQ(chosen(h200, shape(1024, 1024, 1024)), "scalar.64");   // 64 of 128x128 would leave half idle
  // The MLP's first layer: 16 tiles of 16x16, K = 784 cut into 9 slices of 96 -> 144 workgroups.
  EXPECT_EQ(chosen(h200, shape(32, 128, 784)), "scalar.16.k9");
  EXPECT_EQ(kernels::split_chunk(784, 9), 96u);
  // Short K is never split (below kMinSplitK; each slice keeps kMinSliceK), whatever the grid.
  EXPECT_EQ(chosen(h200, shape(32, 10, 255)), "scalar.16");
  EXPECT_EQ(chosen(h200, shape(32, 10, 256)), "scalar.16.k4");
  // A batch fills the device like tiles do: 64 tiles of 64x64, K split in 3 -> 192 workgroups.
  EXPECT_EQ(chosen(h200, shape(64, 64, 4096, 64)), "scalar.64.k3");
  EXPECT_EQ(chosen(h200, shape(4, 64, 4096)), "gemv");  // M <= 8: GEMV, never split
  // Unknown compute units: 64 assumed.
  EXPECT_EQ(kernels::target_workgroups(sm_caps(0)), 64u);
  EXPECT_EQ(chosen(sm_caps(0), shape(32, 128, 784)), "scalar.16.k4");
  // Cooperative tier: the 128x128 tile, split when the grid is small.
  kernels::MatmulShape f16 = shape(256, 256, 4096);
  f16.input = kernels::MatmulInput::F16;
  EXPECT_EQ(kernels::choose_variant(h200, f16, MatmulTier::CoopMatNV).to_string(),
            "coopmat-nv.128x128x32/2x4.k32");
  f16.m = f16.n = 2048;
  EXPECT_EQ(kernels::choose_variant(h200, f16, MatmulTier::CoopMatNV).split_k, 1u);
}

TEST(MatmulVariant, SplitCountLeavesNoSliceEmpty) {
  for (uint32_t k : {1u, 31u, 64u, 100u, 777u, 784u, 1000u, 4096u}) {
    for (uint32_t s : {1u, 2u, 3u, 7u, 9u, 64u}) {
      const uint32_t n = kernels::split_count(k, s), kc = kernels::split_chunk(k, s);
      EXPECT_GE(n, 1u);
      EXPECT_LE(n, s);
      EXPECT_EQ(kc % 32, 0u);
      EXPECT_GE(uint64_t(n) * kc, k) << k << "/" << s;      // the slices cover K
      EXPECT_LT(uint64_t(n - 1) * kc, k) << k << "/" << s;  // and the last one is not empty
      EXPECT_EQ(kernels::split_chunk(k, n), kc) << "normalising keeps the chunk";
    }
  }
}

TEST(MatmulVariant, StringsRoundTripAndBadOnesAreRejected) {
  for (const char* s : {"scalar.128", "scalar.64.k3", "scalar.16.k9", "gemv", "coopmat-nv.128x128x32/2x4",
                        "coopmat-khr.128x256x16/2x4.k2"}) {
    EXPECT_EQ(MatmulVariant::parse(s).to_string(), s);
  }
  EXPECT_EQ(MatmulVariant::parse("coopmat-nv.k2").coop, kernels::CoopMatTile{});
  for (const char* s :
       {"", "scalar", "scalar.x", "scalar.64.3", "scalar.64.k0", "gemv.k", "tensor.64", "scalar.64.k2.z"})
    EXPECT_THROW(MatmulVariant::parse(s), ConfigError) << s;
  const runtime::DeviceCaps caps = sm_caps(132);
  EXPECT_THROW(kernels::select_matmul(caps, shape(32, 32, 32), MatmulVariant::parse("scalar.32")),
               ConfigError);
  EXPECT_THROW(kernels::select_matmul(caps, shape(4, 32, 512), MatmulVariant{MatmulTier::Gemv, 0, 2, {}}),
               ConfigError);
  // A request for more slices than K holds is normalised.
  EXPECT_EQ(
      kernels::select_matmul(caps, shape(32, 32, 100), MatmulVariant::parse("scalar.16.k50")).variant.split_k,
      4u);
}

TEST(MatmulVariant, CandidatesStartWithTheRuleAndAreDistinct) {
  const runtime::DeviceCaps caps = sm_caps(132);
  const auto c = kernels::matmul_candidates(caps, shape(32, 128, 784), MatmulTier::Scalar);
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].to_string(), "scalar.16.k9");
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_NO_THROW(kernels::select_matmul(caps, shape(32, 128, 784), c[i])) << c[i].to_string();
    for (size_t j = 0; j < i; ++j) EXPECT_FALSE(c[i] == c[j]) << c[i].to_string();
  }
  EXPECT_GE(c.size(), 9u);  // three tiles, split 1, 2, 4, 8 where K allows
}

// The profiled fc0 (32x128x784 with its bias epilogue) must stay split on a 132-SM device: one dispatch whose
// bindings end with the partial products (scratch the plan places in the arena at the kernel's level) and the
// tickets (a persistent slot of their own, so that their zeros survive the kernels between two steps).
TEST(MatmulVariant, MlpFirstLayerIsSplitInTheCompiledStep) {
  const CompiledStep s = compile_step(mlp(32), adam(), sm_caps(132));
  size_t fc0 = SIZE_MAX;
  for (size_t i = 0; i < s.code.size(); ++i) {
    EXPECT_EQ(s.code[i].label.rfind("split-K", 0), std::string::npos) << "no separate pass any more";
    if (s.code[i].label == "mlp.fc0") fc0 = i;
  }
  ASSERT_NE(fc0, SIZE_MAX) << plan_text(s);
  const GeneratedKernel& g = s.code[fc0];
  EXPECT_EQ(g.variant, "matmul.scalar.16.k9");
  EXPECT_EQ(g.grid, (std::array<uint32_t, 3>{8, 2, 9}));  // 144 workgroups
  const Kernel& k = s.kernels.kernels[g.kernel];
  EXPECT_EQ(k.arch, Archetype::MatMul);
  EXPECT_FALSE(k.epilogue.empty()) << "the bias (and relu) are the fix-up's epilogue";
  ASSERT_GE(g.bindings.size(), 6u) << "A, B, C, the epilogue's, partials, tickets";
  const Binding& partials = g.bindings[g.bindings.size() - 2];
  const Binding& tickets = g.bindings.back();
  EXPECT_EQ(partials.kind, Binding::Scratch);
  EXPECT_TRUE(partials.write);
  EXPECT_EQ(partials.bytes, 9u * 32 * 128 * 4);
  EXPECT_EQ(tickets.kind, Binding::Tickets);
  EXPECT_TRUE(tickets.write);
  EXPECT_EQ(tickets.bytes, 8u * 2 * 4) << "one counter a tile";
  EXPECT_NE(g.glsl.find("#define SPLIT_PART " + std::to_string(g.bindings.size() - 2)), std::string::npos);
  EXPECT_NE(g.glsl.find("#define SPLIT_TICKET " + std::to_string(g.bindings.size() - 1)), std::string::npos);
  // The scratch is an arena slot live at its kernel's level only; the tickets are persistent.
  ASSERT_EQ(s.plan.scratch.size(), 1u);
  const Slot& slot = s.plan.slots[s.plan.scratch.begin()->second];
  EXPECT_EQ(slot.kind, StorageKind::Scratch);
  EXPECT_EQ(slot.first, k.level);
  EXPECT_EQ(slot.last, k.level);
  EXPECT_LE(slot.offset + slot.bytes, s.plan.arena_bytes);
  ASSERT_EQ(s.plan.tickets.size(), 1u);
  EXPECT_EQ(s.plan.slots[s.plan.tickets.begin()->second].kind, StorageKind::Tickets);
  EXPECT_FALSE(in_arena(StorageKind::Tickets));
  const std::string text = plan_text(s);
  EXPECT_NE(text.find("out scratch of "), std::string::npos) << text;
  EXPECT_NE(text.find("out split-K tickets of "), std::string::npos) << text;
  // Every other matmul of the step is unsplit (their K is 10, 32 or 128 or their grid fills the device).
  size_t split = 0;
  for (const GeneratedKernel& c : s.code) split += c.variant.find(".k") != std::string::npos;
  EXPECT_EQ(split, 1u) << text;
}

// The tuner's knobs (KernelVariant tier / tile / split) replace the rule's choices.
// SmolLM2-135M's products at batch 1, sequence 128 (issue 29): no tile fills 132 SMs unsplit, so the largest
// tile that fits inside the output and keeps at least half the device busy once K is split (at most 8 slices)
// takes them, not the 16 tile (whose 331 dispatches were the F32 step's largest family on the H200).
TEST(MatmulVariant, ModelShapesTakeASplitLargeTileOverTheSixteenTile) {
  const runtime::DeviceCaps h200 = sm_caps(132);
  EXPECT_EQ(chosen(h200, shape(128, 576, 576)), "scalar.64.k6");  // 18 tiles x 6 slices of 96
  EXPECT_EQ(chosen(h200, shape(128, 960, 576)), "scalar.64.k5");  // the fused QKV projection
  // The 128 tile would take six 96-deep slices (12 x 6 = 72 >= 132 / 2), and its last workgroup's sum of them
  // cost more than the slices: the 64 tile (48 x 3). H100 F32 step 15.82 -> 15.13 ms, that family 3.66
  // -> 2.79.
  EXPECT_EQ(chosen(h200, shape(128, 1536, 576)), "scalar.64.k3");
  EXPECT_EQ(chosen(h200, shape(128, 576, 1536)), "scalar.64.k8");  // the down projection: 8 slices at most
  // The head's input gradient: slices of 768 and more are always allowed (kLongSliceK), so the 128 tile
  // splits 27 ways (135 workgroups); 64.k8 ran 0.487 ms on the H100, 128.k64 0.342.
  EXPECT_EQ(chosen(h200, shape(128, 576, 49152)), "scalar.128.k27");
  EXPECT_EQ(chosen(h200, shape(576, 576, 128)), "scalar.64");     // weight gradient, K = 128 unsplit: 81
  EXPECT_EQ(chosen(h200, shape(128, 49152, 576)), "scalar.128");  // the head fills the device
  // Weight gradient at 2048 tokens: slices of 341 keep the 128 tile (scalar.64.k2 ran 0.222 ms, 128.k6
  // 0.094).
  EXPECT_EQ(chosen(h200, shape(576, 576, 2048)), "scalar.128.k6");
  EXPECT_EQ(chosen(h200, shape(2048, 576, 576)), "scalar.64");    // 288 tiles: unchanged
  EXPECT_EQ(chosen(h200, shape(128, 192, 576)), "scalar.16.k2");  // a thin output: 64 x 3 x 6 = 36 < 66
  // The cooperative tier's tile: 64x64 where split 128x128 tiles leave more than half the device idle.
  runtime::DeviceCaps coop = h200;
  coop.subgroup_size = 32;
  coop.storage_16bit = coop.fp16_arithmetic = coop.coopmat_nv = true;
  coop.coopmat_nv_shapes = {{16, 8, 16, "f16", "f16", "f32", "f32", "subgroup", 0}};
  auto tile = [&](kernels::MatmulShape s) {
    s.input = kernels::MatmulInput::F32RoundF16;
    const kernels::CoopMatTile t = kernels::default_coopmat_tile(coop, s, MatmulTier::CoopMatNV);
    return kernels::choose_variant(coop, s, MatmulTier::CoopMatNV, t).to_string();
  };
  EXPECT_EQ(tile(shape(128, 576, 576)), "coopmat-nv.64x64x32/2x2.k6");
  EXPECT_EQ(tile(shape(576, 576, 128)), "coopmat-nv.64x64x32/2x2");  // 81 workgroups against 25
  // Cooperative splits fit one wave: 64 tiles x 2 = 128 workgroups on 132 (x3 would start a second wave).
  EXPECT_EQ(tile(shape(1024, 1024, 1024)), "coopmat-nv.128x128x32/2x4.k2");
  // 80 tiles keep more than half the device busy: not split (k2 ran 1.25x slower, H100 f16).
  EXPECT_EQ(tile(shape(2048, 576, 576)), "coopmat-nv.128x128x32/2x4");
  EXPECT_EQ(tile(shape(2048, 576, 1536)), "coopmat-nv.128x128x32/2x4");
  // The head's input gradient: the 128x128 tile split 26 ways (64x64.k8 ran 0.434 ms, 128x128.k64 0.213).
  EXPECT_EQ(tile(shape(128, 576, 49152)), "coopmat-nv.128x128x32/2x4.k26");
  EXPECT_EQ(tile(shape(4096, 4096, 64)), "coopmat-nv.128x256x32/4x4/g4/s1");
}

// The compiled SmolLM2-135M step on 132 SMs (two blocks stand for thirty): no product takes the 16 tile.
TEST(MatmulVariant, SmolLm2StepHasNoSixteenTile) {
  Graph g;
  nn::Context ctx(g, 1);
  nn::CausalLmConfig cfg;
  cfg.layers = 2;
  nn::CausalLm lm(ctx, "", cfg);
  NodeId tokens = g.input("tokens", {1, 128}, DType::I32);
  NodeId labels = g.input("labels", {1, 128}, DType::I32);
  g.set_outputs(
      {g.cross_entropy_loss_index(g.reshape(lm(tokens), {128, cfg.vocab}), g.reshape(labels, {128}))});
  const CompiledStep s = compile_step(g, adam(), sm_caps(132));
  std::map<std::string, int> variants;
  for (const GeneratedKernel& k : s.code)
    if (k.variant.rfind("matmul.", 0) == 0) ++variants[k.variant];
  std::string all;
  for (const auto& [v, n] : variants) all += v + " x" + std::to_string(n) + "\n";
  EXPECT_GE(variants.size(), 3u) << all;
  for (const auto& [v, n] : variants) EXPECT_EQ(v.find("scalar.16"), std::string::npos) << all;
}

TEST(MatmulVariant, TunerKnobsReplaceTheRule) {
  const CompiledStep s = compile_step(mlp(32), adam(), sm_caps(132));
  size_t fc0 = SIZE_MAX, sum = SIZE_MAX;
  for (size_t i = 0; i < s.code.size(); ++i)
    if (s.code[i].label == "mlp.fc0") fc0 = s.code[sum = i].kernel;
  ASSERT_NE(fc0, SIZE_MAX);
  EXPECT_EQ(codegen::matmul_shape(s.graph, s.kernels.kernels[fc0].core, Precision::F32).k, 784u);
  auto gen = [&](const std::string& v) {
    return generate_kernel(s.graph, s.kernels, fc0, sm_caps(132), s.codegen, KernelVariant::parse(v));
  };
  std::vector<GeneratedKernel> one = gen("tier=scalar tile=64 split=1");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].variant, "matmul.scalar.64");
  EXPECT_EQ(one[0].base_hash, s.code[sum].base_hash) << "one tuning key for every variant of the kernel";
  std::vector<GeneratedKernel> split = gen("tier=scalar tile=64 split=3");
  ASSERT_EQ(split.size(), 1u);
  EXPECT_EQ(split[0].variant, "matmul.scalar.64.k3");
  // The tile alone keeps the rule's split for that tile: 2 tiles of 64x64 want 12 slices, which are 9 of 96.
  EXPECT_EQ(gen("tier=scalar tile=64").back().variant, "matmul.scalar.64.k9");
  EXPECT_EQ(KernelVariant::parse("tier=scalar tile=16 split=4").to_string(), "tier=scalar tile=16 split=4");
  EXPECT_THROW(gen("tier=gemv"), GraphError) << "GEMV cannot run M = 32";
  EXPECT_THROW(gen("tier=scalar tile=128x128x32/2x4"), GraphError) << "a cooperative tile on the scalar tier";
  EXPECT_THROW(KernelVariant::parse("tile=32"), ConfigError);
  // The tuner's matmul candidates are unsplit (the plan holds split buffers only for the rule's splits).
  for (const KernelVariant& v : tune_candidates(s.graph, s.kernels, fc0, sm_caps(132), s.codegen)) {
    if (!v.is_default()) {
      EXPECT_EQ(gen(v.to_string()).size(), 1u) << v.to_string();
    }
  }
}
