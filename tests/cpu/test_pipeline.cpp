// The device-free pass list: compile_step on the README MLP, the dump-plan text and barrier placement.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "fake_caps.hpp"
#include "meganeura/nn/nn.hpp"
#include "meganeura/session/pipeline.hpp"

using namespace meganeura;

namespace {

using meganeura::test::fake_caps;

Graph mlp() {
  Graph g;
  auto x = g.input("x", {32, 784});
  auto labels = g.input("labels", {32, 10});
  auto w1 = g.parameter("w1", {784, 128});
  auto h = g.named(g.relu(g.matmul(x, w1)), "h");
  auto w2 = g.parameter("w2", {128, 10});
  auto logits = g.named(g.matmul(h, w2), "logits");
  g.set_outputs({g.named(g.cross_entropy_loss(logits, labels), "loss")});
  return g;
}

// The README's 784-128-10 MLP with biases (nn::Mlp, as examples/profile_session.cpp builds it).
Graph nn_mlp(int64_t batch = 32) {
  Graph g;
  nn::Context ctx(g, 1);
  NodeId x = g.input("x", {batch, 784});
  NodeId y = g.input("labels", {batch, 10});
  nn::Mlp mlp(ctx, "mlp", {784, 128, 10});
  g.set_outputs({g.named(g.cross_entropy_loss(mlp(x), y), "loss")});
  return g;
}

struct StepShape {
  size_t dispatches = 0, barriers = 0;
};
StepShape step_shape(const CompiledStep& s, bool update = true) {
  std::vector<size_t> ks = step_kernels(s, update);
  std::vector<bool> b = plan_barriers(s, ks);
  return {ks.size(), size_t(std::count(b.begin(), b.end(), true))};
}

}  // namespace

// Every dispatch and every barrier level of the MLP's Adam step, so that a lost fusion shows here:
//   L0 step counter, x·w0+b0 with relu as epilogue | L1 h·w1+b1 | L2 the loss, its softmax gradient |
//   L3 db1 (column sum) + update b1, dh with relu's mask | L4 dw1 + update w1 (after dh, which reads w1),
//   db0 + update b0, dw0 + update w0
// With the gradients kept (no fused updates): L3 db1, dw1, dh | L4 db0, dw0 | L5 four updates.
TEST(Pipeline, MlpAdamStepDispatchesAndBarrierLevels) {
  SessionConfig c;
  c.optimizer.kind = OptimizerKind::Adam;
  CompiledStep s = compile_step(nn_mlp(), c, fake_caps());
  StepShape shape = step_shape(s);
  EXPECT_EQ(shape.dispatches, 10u) << plan_text(s);
  EXPECT_EQ(shape.barriers, 5u) << plan_text(s);
  EXPECT_EQ(s.kernels.count(Archetype::Pointwise), 0u) << plan_text(s);
  EXPECT_EQ(s.kernels.count(Archetype::Optimizer), 0u) << plan_text(s);
  EXPECT_EQ(s.plan.summary().gradients, 0u);
  c.keep_gradients = true;
  CompiledStep k = compile_step(nn_mlp(), c, fake_caps());
  shape = step_shape(k);
  EXPECT_EQ(shape.dispatches, 14u) << plan_text(k);
  EXPECT_EQ(shape.barriers, 6u) << plan_text(k);
  EXPECT_EQ(k.kernels.count(Archetype::Optimizer), 4u) << plan_text(k);
}

// The update's arithmetic in both of its forms (fused into a gradient's kernel: mn_update_with; an update
// kernel per parameter: the Optimizer kernels of keep_gradients) is `precise`, so that no driver contracts
// a·b + c into an fma in one form and not the other: NVIDIA's did (g + wd·p), and the fused step stopped
// matching the unfused one bit for bit (TrainingGpu.FusedUpdatesMatchTheUnfusedStepBitForBit on the H100,
// twelfth session). Every float the update computes is a precise local, and every store writes a local, not
// an expression.
TEST(Pipeline, UpdateArithmeticIsPreciseInBothForms) {
  const auto check = [](const std::string& code, const std::string& what) {
    std::istringstream lines(code);
    int statements = 0;
    for (std::string line; std::getline(lines, line);) {
      const size_t eq = line.find(" = ");
      const bool computes =
          eq != std::string::npos && line.find_first_of("*+-/", eq + 3) != std::string::npos;
      if (line.find("float ") != std::string::npos && line.find("hyper.lr") == std::string::npos &&
          line.find("float gradient") == std::string::npos) {
        EXPECT_NE(line.find("precise float "), std::string::npos) << what << ": " << line;
        ++statements;
      }
      if (line.find(".d[i] = ") != std::string::npos)
        EXPECT_FALSE(computes) << what << " stores an expression, not a precise local: " << line;
    }
    EXPECT_GE(statements, 3) << what << ":\n" << code;
  };
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::Sgd;
  sgd.momentum = 0.9;
  OptimizerConfig adam, adamw, laprop;
  adam.kind = OptimizerKind::Adam;
  adamw.kind = OptimizerKind::AdamW;
  laprop.kind = OptimizerKind::LaProp;
  for (OptimizerConfig o : {sgd, adam, adamw, laprop}) {
    o.weight_decay = 0.01;
    for (bool keep : {false, true}) {
      SessionConfig c;
      c.optimizer = o;
      c.keep_gradients = keep;
      const CompiledStep s = compile_step(nn_mlp(), c, fake_caps());
      const std::string what =
          std::string(keep ? "update kernel" : "fused update") + " of rule " + std::to_string(int(o.kind));
      int forms = 0;
      for (const GeneratedKernel& k : s.code) {
        const size_t fused = k.glsl.find("void mn_update_with(");
        if (!keep && fused != std::string::npos) {
          check(k.glsl.substr(fused, k.glsl.find("\n}\n", fused) - fused), what + " in " + k.label);
          ++forms;
        }
        if (keep && k.variant == "optimizer") {
          const size_t body = k.glsl.find("void main() {");
          ASSERT_NE(body, std::string::npos) << k.glsl;
          check(k.glsl.substr(body), what + " " + k.label);
          ++forms;
        }
      }
      EXPECT_GT(forms, 0) << what << ": no update found\n" << plan_text(s);
    }
  }
}

TEST(Pipeline, TrainingStepDumpNamesDispatchesBindingsAndBarriers) {
  SessionConfig c;
  c.rewrite = RewriteMode::Greedy;
  CompiledStep s = compile_step(mlp(), c, fake_caps());
  ASSERT_EQ(s.code.size(), s.kernels.kernels.size());
  EXPECT_LE(s.code.size(), 10u);
  std::vector<size_t> kernels = step_kernels(s, true);
  ASSERT_EQ(kernels.size(), s.code.size());
  std::vector<bool> barriers = plan_barriers(s, kernels);
  std::string text = plan_text(s);
  EXPECT_NE(text.find("matmul [h]"), std::string::npos) << text;  // labels carry the user's names
  EXPECT_EQ(text.find("pointwise"), std::string::npos) << text;   // relu is x·w1's epilogue
  EXPECT_NE(text.find("row-reduce [loss]"), std::string::npos) << text;
  EXPECT_NE(text.find("matmul [grad/w1,update w1]"), std::string::npos) << text;  // the update is fused
  EXPECT_NE(text.find("in  x f32[32,784] (100352 B)"), std::string::npos) << text;
  EXPECT_NE(text.find("-- barrier --"), std::string::npos) << text;
  EXPECT_NE(text.find("grid "), std::string::npos) << text;
  // A barrier sits between every producer and its consumer, and never within a level of independent
  // kernels whose memory is disjoint.
  EXPECT_TRUE(barriers[0]);
  for (size_t i = 1; i < s.kernels.kernels.size(); ++i) {
    if (s.kernels.kernels[i].level == s.kernels.kernels[i - 1].level &&
        s.kernels.kernels[i].arch != Archetype::Optimizer) {
      EXPECT_FALSE(barriers[i]) << "kernel " << i << "\n" << text;
    }
  }
  size_t levels = size_t(s.kernels.kernels.back().level) + 1;
  size_t count = size_t(std::count(barriers.begin(), barriers.end(), true));
  EXPECT_EQ(count, levels) << text;
}

TEST(Pipeline, InferenceStepHasNoUpdatesAndNoGradients) {
  SessionConfig c;
  c.training = false;
  c.optimizer.kind = OptimizerKind::None;
  CompiledStep s = compile_step(mlp(), c, fake_caps());
  EXPECT_EQ(s.kernels.count(Archetype::Optimizer), 0u);
  EXPECT_TRUE(s.param_grads.empty());
  EXPECT_EQ(s.plan.summary().gradients, 0u);
  EXPECT_FALSE(s.plan.hyper.has_value());
}

TEST(Pipeline, ClippingAndAccumulationAreKernelsOfTheRecordedStep) {
  SessionConfig c;
  c.optimizer.kind = OptimizerKind::Adam;
  c.optimizer.clip_grad_norm = 1.0;
  c.optimizer.grad_accumulation = 3;
  CompiledStep s = compile_step(mlp(), c, fake_caps());
  EXPECT_EQ(s.kernels.count(Archetype::Accumulate), 2u);
  EXPECT_EQ(s.kernels.count(Archetype::GradNorm), 1u);
  EXPECT_EQ(s.kernels.count(Archetype::ClipScale), 1u);
  EXPECT_EQ(s.kernels.count(Archetype::Optimizer), 2u);
  ASSERT_TRUE(accumulates(s));
  // The accumulate-only list has the forward and backward kernels plus one accumulate per parameter; the
  // update list has everything else.
  std::set<Archetype> accumulate_list, update_list;
  for (size_t i : step_kernels(s, false)) accumulate_list.insert(s.code[i].arch);
  for (size_t i : step_kernels(s, true)) update_list.insert(s.code[i].arch);
  EXPECT_EQ(step_kernels(s, false).size() + 5, step_kernels(s, true).size() + 2);
  EXPECT_TRUE(accumulate_list.count(Archetype::Accumulate));
  for (Archetype a : {Archetype::GradNorm, Archetype::ClipScale, Archetype::Optimizer, Archetype::Counter}) {
    EXPECT_FALSE(accumulate_list.count(a)) << archetype_name(a);
    EXPECT_TRUE(update_list.count(a)) << archetype_name(a);
  }
  EXPECT_FALSE(update_list.count(Archetype::Accumulate));
  // Accumulators are gradient-sized and count as gradients; the norm's partial sums live in the hyper block.
  const uint64_t params = (784 * 128 + 128 * 10) * 4;
  EXPECT_EQ(s.plan.summary().gradients, 2 * params);
  EXPECT_EQ(s.plan.summary().optimizer_state, 2 * params);
  ASSERT_TRUE(s.plan.hyper.has_value());
  EXPECT_GT(s.plan.slots[*s.plan.hyper].bytes, 16u);
  const std::string text = plan_text(s);
  EXPECT_NE(text.find("accumulate-only step"), std::string::npos) << text;
  EXPECT_NE(text.find("grad-norm [gradient norm]"), std::string::npos) << text;
  // The norm is complete before the clip factor is computed, and the factor before any update reads it; the
  // step counter opens the step.
  std::vector<size_t> ks = step_kernels(s, true);
  std::vector<bool> barriers = plan_barriers(s, ks);
  for (size_t i = 0; i < ks.size(); ++i) {
    Archetype a = s.code[ks[i]].arch;
    if (a == Archetype::GradNorm || a == Archetype::ClipScale || a == Archetype::Counter) {
      EXPECT_TRUE(barriers[i]) << i;
    }
  }

  SessionConfig plain;
  plain.keep_gradients = true;
  CompiledStep p = compile_step(mlp(), plain, fake_caps());
  EXPECT_FALSE(accumulates(p));
  EXPECT_EQ(p.kernels.count(Archetype::GradNorm), 0u);
  EXPECT_EQ(p.plan.summary().gradients, params);
  // Without clipping and accumulation the updates run in the gradients' kernels: no gradient is stored.
  plain.keep_gradients = false;
  EXPECT_EQ(compile_step(mlp(), plain, fake_caps()).plan.summary().gradients, 0u);
}

TEST(Pipeline, BadClippingOrAccumulationSettingsAreConfigErrors) {
  auto fails = [](SessionConfig c, const std::string& needle) {
    try {
      compile_step(mlp(), c, fake_caps());
      ADD_FAILURE() << "no error for " << needle;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  SessionConfig c;
  c.optimizer.clip_grad_norm = -1;
  fails(c, "clip_grad_norm >= 0");
  c = {};
  c.optimizer.grad_accumulation = 0;
  fails(c, "grad_accumulation >= 1");
  c = {};
  c.optimizer.kind = OptimizerKind::None;
  c.optimizer.grad_accumulation = 2;
  fails(c, "OptimizerKind::None");
}

TEST(Pipeline, EqualKernelsShareAHash) {
  Graph g;
  NodeId a = g.input("a", {8, 8});
  NodeId b = g.input("b", {8, 8});
  g.set_outputs({g.exp(a), g.exp(b)});
  SessionConfig c;
  c.training = false;
  c.rewrite = RewriteMode::Off;
  CompiledStep s = compile_step(g, c, fake_caps());
  ASSERT_EQ(s.code.size(), 2u);
  EXPECT_EQ(s.code[0].hash, s.code[1].hash);  // same shapes and expression: one shader
}

TEST(Pipeline, NoOutputsIsAGraphError) {
  Graph g;
  g.input("x", {2});
  SessionConfig c;
  EXPECT_THROW(compile_step(g, c, fake_caps()), GraphError);
}

TEST(Pipeline, DispatchesKnowTheirKernelWhenAScatterNeedsAClear) {
  // Float atomics: the embedding's scatter-add is two dispatches (clear, then add), so dispatch and kernel
  // indices differ after it; the plan dump, profiles and traces must still describe the right kernel.
  runtime::DeviceCaps caps = fake_caps();
  caps.shader_float_atomic_add = true;
  Graph g;
  auto ids = g.input("ids", {6}, DType::I32);
  auto table = g.parameter("table", {9, 4});
  auto w = g.parameter("w", {4, 3});
  auto t = g.input("t", {6, 3});
  auto logits = g.named(g.matmul(g.embedding(table, ids), w), "logits");
  g.set_outputs({g.mse_loss(logits, t)});
  SessionConfig c;
  CompiledStep s = compile_step(g, c, caps);
  ASSERT_EQ(s.code.size(), s.kernels.kernels.size() + 1) << plan_text(s);  // one clear
  for (size_t i = 0; i < s.code.size(); ++i) {
    ASSERT_LT(s.code[i].kernel, s.kernels.kernels.size());
    const std::string& label = s.kernels.kernels[s.code[i].kernel].label;
    EXPECT_NE(s.code[i].label.find(label), std::string::npos)
        << "dispatch " << i << " [" << s.code[i].label << "] vs kernel [" << label << "]";
  }
  EXPECT_EQ(step_kernels(s, true).size(), s.code.size());
  EXPECT_NE(plan_text(s).find("clear "), std::string::npos);
}

// 16-bit values need 16-bit storage: on a device without it, codegen names the kernel and the device.
TEST(Pipeline, SixteenBitValuesNeedSixteenBitStorage) {
  Graph g;
  NodeId h = g.named(g.exp(g.cast(g.input("x", {4}), DType::F16)), "half_x");
  g.set_outputs({h});
  SessionConfig c;
  c.training = false;
  c.optimizer.kind = OptimizerKind::None;
  runtime::DeviceCaps caps = fake_caps();
  caps.storage_16bit = true;
  EXPECT_NO_THROW(compile_step(g, c, caps));
  caps.storage_16bit = false;
  try {
    compile_step(g, c, caps);
    FAIL() << "expected GraphError";
  } catch (const GraphError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("half_x"), std::string::npos) << m;
    EXPECT_NE(m.find("16-bit storage"), std::string::npos) << m;
  }
}
