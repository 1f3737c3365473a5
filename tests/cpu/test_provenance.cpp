// Provenance end to end, device-free: a user's name follows its value through autodiff (grad/<name>), every
// rewrite driver and fusion into dispatch labels, the phase of each dispatch and the plan dump; codegen
// reports each kernel's variant and workgroup for profiles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "fake_caps.hpp"
#include "meganeura/autodiff/autodiff.hpp"
#include "meganeura/session/pipeline.hpp"

using namespace meganeura;

namespace {

using meganeura::test::fake_caps;

Graph block() {
  Graph g;
  auto x = g.input("x", {12, 20});
  auto t = g.input("t", {12, 6});
  auto w1 = g.parameter("w1", {20, 24});
  auto qkv = g.named(g.matmul(x, w1), "blk3.qkv");
  auto act = g.mul(qkv, g.sigmoid(qkv));  // rewritten into Silu: the new node keeps provenance
  auto w2 = g.parameter("w2", {24, 6});
  auto y = g.named(g.matmul(act, w2), "blk3.out");
  g.set_outputs({g.named(g.mse_loss(y, t), "loss")});
  return g;
}

bool any_label(const CompiledStep& s, Phase p, const std::string& text) {
  for (const Kernel& k : s.kernels.kernels)
    if (kernel_phase(s.graph, k) == p && k.label.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(Provenance, AutodiffNamesCotangentsAndMarksBackwardNodes) {
  Graph g = block();
  Graph d = differentiate(g, g.outputs()[0]);
  auto cot = d.find("grad/blk3.qkv");
  ASSERT_TRUE(cot.has_value());
  EXPECT_EQ(d.node(*cot).shape, (Shape{12, 24}));
  EXPECT_TRUE(d.node(*cot).prov.backward);
  EXPECT_EQ(d.node(*cot).prov.rule, "autodiff");
  EXPECT_TRUE(d.find("grad/blk3.out").has_value());
  // Every node autodiff added is backward, and no forward node is.
  for (uint32_t v = 0; v < d.size(); ++v) EXPECT_EQ(d.node(NodeId{v}).prov.backward, v >= g.size()) << v;
  // An unnamed VJP node's label names the value whose VJP made it (blk3.out's gives the gradient of act).
  size_t from_out = 0;
  for (uint32_t v = uint32_t(g.size()); v < d.size(); ++v)
    if (d.node(NodeId{v}).prov.name.empty() && provenance_label(d, NodeId{v}) == "grad/blk3.out") ++from_out;
  EXPECT_GT(from_out, 0u);
}

TEST(Provenance, NamesReachDispatchLabelsPhasesAndThePlanDumpInEveryRewriteMode) {
  for (RewriteMode mode : {RewriteMode::Greedy, RewriteMode::Saturate, RewriteMode::Off}) {
    SCOPED_TRACE(int(mode));
    SessionConfig c;
    c.rewrite = mode;
    c.optimizer.kind = OptimizerKind::Adam;
    c.keep_gradients = true;  // updates in kernels of their own
    CompiledStep s = compile_step(block(), c, fake_caps());
    EXPECT_TRUE(any_label(s, Phase::Forward, "blk3.qkv"));
    EXPECT_TRUE(any_label(s, Phase::Forward, "blk3.out"));
    EXPECT_TRUE(any_label(s, Phase::Backward, "grad/blk3.qkv"));
    EXPECT_TRUE(any_label(s, Phase::Backward, "grad/w1"));
    EXPECT_TRUE(any_label(s, Phase::Update, "update w1"));
    EXPECT_FALSE(any_label(s, Phase::Forward, "grad/"));
    EXPECT_TRUE(s.graph.find("grad/blk3.qkv").has_value());
    size_t phases[3] = {0, 0, 0};
    for (const Kernel& k : s.kernels.kernels) ++phases[int(kernel_phase(s.graph, k))];
    EXPECT_GE(phases[0], 2u);
    EXPECT_GE(phases[1], 3u);
    EXPECT_EQ(phases[2], 3u);  // two parameter updates and Adam's step counter
    // Fused updates: the weight gradients' kernels (backward) also update and say so.
    c.keep_gradients = false;
    CompiledStep f = compile_step(block(), c, fake_caps());
    EXPECT_TRUE(any_label(f, Phase::Backward, "update w1"));
    EXPECT_EQ(f.kernels.count(Archetype::Optimizer), 0u);
    const std::string text = plan_text(s);
    EXPECT_NE(text.find("grad/blk3.qkv"), std::string::npos) << text;
    EXPECT_NE(text.find(" backward from "), std::string::npos) << text;
    EXPECT_NE(text.find(" forward from "), std::string::npos) << text;
    EXPECT_NE(text.find("test_provenance.cpp:"), std::string::npos) << text;  // the builder line of block()
  }
}

TEST(Provenance, RewrittenNodesInheritTheOriginOfTheNodeTheyReplace) {
  Graph g;
  auto x = g.input("x", {4, 5});
  auto act = g.named(g.mul(x, g.sigmoid(x)), "act");
  g.set_outputs({g.named(g.sum(g.mul(act, g.scalar(2.0))), "out")});
  SessionConfig c;
  c.training = false;
  c.optimizer.kind = OptimizerKind::None;
  CompiledStep s = compile_step(g, c, fake_caps());
  auto a = s.graph.find("act");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(s.graph.node(*a).op, Op::Silu);  // the rule fired, and the name followed the value
  Provenance p = Provenance::derived(s.graph.node(*a).prov, *a, "some-rule");
  EXPECT_EQ(p.origin, "act");
  EXPECT_FALSE(p.backward);
  EXPECT_TRUE(Provenance::derived(p, *a, "autodiff").backward);
}

TEST(Provenance, CodegenReportsVariantAndWorkgroupOfEveryKernel) {
  SessionConfig c;
  CompiledStep s = compile_step(block(), c, fake_caps());
  size_t matmuls = 0;
  for (const GeneratedKernel& k : s.code) {
    EXPECT_FALSE(k.variant.empty()) << k.label;
    EXPECT_GE(k.workgroup[0] * k.workgroup[1] * k.workgroup[2], 1u) << k.label;
    if (k.arch == Archetype::MatMul) {
      ++matmuls;
      // "matmul." + the kernels::MatmulVariant (tier, tile, split).
      const std::string& v = k.variant;
      ASSERT_EQ(v.rfind("matmul.", 0), 0u) << k.variant;
      EXPECT_NO_THROW(kernels::MatmulVariant::parse(v.substr(7))) << k.variant;
      EXPECT_GT(k.workgroup[0], 1u);
    }
    if (k.arch == Archetype::Pointwise) {
      EXPECT_EQ(k.variant, "pointwise");
      EXPECT_EQ(k.workgroup[0], 256u);  // 4 elements per thread (codegen/pointwise.cpp)
    }
  }
  EXPECT_GE(matmuls, 4u);
}

// debug() changes memory settings only: the rewrite mode and matmul tier read from the environment (set here
// to values that are not the defaults, so the test fails if debug() resets them) and the precision survive.
TEST(Provenance, DebugConfigKeepsRewriteAndPrecisionSeparate) {
  const char* vars[] = {"MEGANEURA_REWRITE", "MEGANEURA_MATMUL"};
  std::vector<std::optional<std::string>> saved;
  for (const char* v : vars)
    saved.push_back(std::getenv(v) ? std::optional<std::string>(std::getenv(v)) : std::nullopt);
  setenv("MEGANEURA_REWRITE", "saturate", 1);
  setenv("MEGANEURA_MATMUL", "scalar", 1);
  const SessionConfig d = SessionConfig::debug();
  for (size_t i = 0; i < 2; ++i) {
    if (saved[i])
      setenv(vars[i], saved[i]->c_str(), 1);
    else
      unsetenv(vars[i]);
  }
  ASSERT_NE(SessionConfig{}.rewrite, RewriteMode::Saturate);
  EXPECT_FALSE(d.alias_memory);
  EXPECT_TRUE(d.host_visible);
  EXPECT_TRUE(d.keep_intermediates);
  EXPECT_EQ(d.rewrite, RewriteMode::Saturate);
  EXPECT_EQ(d.matmul_tier, meganeura::MatmulTier::Scalar);
  EXPECT_EQ(d.precision, SessionConfig{}.precision);
}
