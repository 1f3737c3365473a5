// Session matmuls through the tier family (kernels/matmul.hpp) with the scheduler's fused epilogues, at tiny
// and ragged sizes, and the Mixed16 precision policy against F32.
//
// Mixed16 rounds every matmul operand to f16 as the kernel loads it (f32 buffers, f32 accumulation, f32
// master weights), so it needs neither 16-bit storage nor cooperative matrices: on lavapipe it runs the
// scalar and GEMV tiers. Documented bounds, checked here:
//   * one matmul: |mixed − f32| ≤ 2⁻¹⁰ · Σₖ|aₖ bₖ| + 1e-6 per output (each operand's rounding is ≤ 2⁻¹¹
//   relative,
//     so each product moves by ≤ (2·2⁻¹¹ + 2⁻²²)·|aₖ bₖ|), and mixed equals the float64 reference of the
//     f16-rounded operands to the f32 tolerance;
//   * the README MLP (784-128-10, batch 32, SGD lr 0.1, 30 steps from the same start): every step's loss
//   within
//     1e-3 relative of the F32 session's (measured on lavapipe: 1.0e-4, see docs/performance.md).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "gpu_fixture.hpp"
#include "meganeura/kernels/matmul.hpp"
#include "meganeura/reference/interpreter.hpp"
#include "meganeura/session/pipeline.hpp"

using namespace meganeura;

namespace {

std::shared_ptr<runtime::Device> shared_device() {
  return std::shared_ptr<runtime::Device>(&test::gpu_device(), [](runtime::Device*) {});
}

SessionConfig config(bool training, Precision precision) {
  SessionConfig c = test::gpu_config();
  static const std::string cache = [] {
    auto dir = std::filesystem::temp_directory_path() / ("meganeura-test-mm-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    return dir.string();
  }();
  c.cache_dir = cache;
  c.training = training;
  c.dump_plan.clear();
  c.matmul_tier.reset();
  c.precision = precision;
  if (!training) c.optimizer.kind = OptimizerKind::None;
  return c;
}

using meganeura::test::random_vec;

float round_f16(float x) { return kernels::half_to_float(kernels::float_to_half(x)); }

// Feeds every input and parameter; `rounded` gives the reference f16-rounded values.
reference::Feeds feed(const Graph& g, Session& s, uint32_t seed, bool rounded = false) {
  std::mt19937 rng(seed);
  reference::Feeds feeds;
  for (const auto& list : {g.inputs(), g.parameters()}) {
    for (NodeId n : list) {
      const Node& nd = g.node(n);
      auto v = random_vec(size_t(numel(nd.shape)), rng);
      if (nd.op == Op::Input)
        s.set_input(nd.prov.name, v);
      else
        s.set_parameter(nd.prov.name, v);
      std::vector<double> d(v.size());
      for (size_t i = 0; i < v.size(); ++i) d[i] = rounded ? round_f16(v[i]) : v[i];
      feeds[nd.prov.name] = HostTensor(nd.shape, d);
    }
  }
  return feeds;
}

void expect_close(const std::vector<float>& got, const HostTensor& want, double atol, double rtol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(double(got[i]) - want[i]) <= atol + rtol * std::fabs(want[i])) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: gpu " << got[i] << " vs reference " << want[i];
  }
  EXPECT_EQ(bad, 0u) << what;
}

// relu(op(a)·op(b) + bias) + residual: the whole chain is the matmul's epilogue.
struct Chain {
  Graph g;
  Chain(int64_t batch, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
    auto dims = [&](int64_t r, int64_t c) { return batch > 1 ? Shape{batch, r, c} : Shape{r, c}; };
    NodeId a = g.input("a", ta ? dims(k, m) : dims(m, k));
    NodeId b = g.parameter("b", tb ? Shape{n, k} : Shape{k, n});  // broadcast over the batch
    NodeId bias = g.parameter("bias", {n});
    NodeId res = g.input("res", dims(m, n));
    g.set_outputs({g.add(g.relu(g.add(g.matmul(a, b, ta, tb), bias)), res)});
  }
};

}  // namespace

class SessionMatmul : public test::GpuTest {};

TEST_F(SessionMatmul, FusedEpilogueAtTinyAndRaggedSizesMatchesReference) {
  struct Case {
    int64_t batch, m, n, k;
    int t;
  };  // t: bit 0 transposes A, bit 1 B
  // M = 1 and 8 take GEMV, 9 and 130 the scalar tier (130 crosses a 128-row tile); N and K 1, prime, > 128.
  std::vector<Case> cases = {{1, 1, 1, 1, 0}, {1, 8, 3, 1, 3}, {1, 9, 1, 7, 1}, {1, 5, 131, 129, 2}};
  for (int t = 0; t < 4; ++t) cases.push_back({2, 130, 67, 45, t});
  for (Case c : cases) {
    {
      const int t = c.t;
      Chain ch(c.batch, c.m, c.n, c.k, t & 1, t & 2);
      const std::string what = std::to_string(c.batch) + "x" + std::to_string(c.m) + "x" +
                               std::to_string(c.n) + "x" + std::to_string(c.k) + " t" + std::to_string(t);
      // The chain is fused: one matmul kernel computes everything.
      CompiledStep step = compile_step(ch.g, config(false, Precision::F32), device().caps());
      ASSERT_EQ(step.kernels.kernels.size(), 1u) << what << "\n" << step.kernels.to_text(step.graph);
      EXPECT_EQ(step.kernels.kernels[0].epilogue.size(), 3u) << what << "\n"
                                                             << step.kernels.to_text(step.graph);
      Session s = build(ch.g, config(false, Precision::F32), shared_device());
      reference::Feeds feeds = feed(ch.g, s, 5);
      s.run();
      expect_close(s.read_output(0), reference::evaluate_outputs(ch.g, feeds)[0], 1e-5, 1e-4, what);
    }
  }
}

TEST_F(SessionMatmul, Mixed16MatmulRoundsOperandsWithinTheDocumentedBound) {
  for (int t = 0; t < 4; ++t) {
    for (int64_t m : {3, 37}) {                    // GEMV and scalar
      if ((t == 1 || t == 2) && m == 3) continue;  // lavapipe compiles slowly: every layout once
      Chain ch(1, m, 29, 83, t & 1, t & 2);
      const std::string what = "m=" + std::to_string(m) + " t" + std::to_string(t);
      Session mixed = build(ch.g, config(false, Precision::Mixed16), shared_device());
      Session f32 = build(ch.g, config(false, Precision::F32), shared_device());
      reference::Feeds rounded = feed(ch.g, mixed, 9, true);
      reference::Feeds exact = feed(ch.g, f32, 9);
      mixed.run();
      f32.run();
      const std::vector<float> got = mixed.read_output(0), base = f32.read_output(0);
      // The bias and residual are not matmul operands: give the reference their exact values.
      rounded["bias"] = exact["bias"];
      rounded["res"] = exact["res"];
      if (m <= 8) {  // GEMV: Mixed16 rounds nothing there (codegen/matmul.cpp), so it equals F32 exactly
        EXPECT_EQ(got, base) << what;
        continue;
      }
      expect_close(got, reference::evaluate_outputs(ch.g, rounded)[0], 1e-5, 1e-4,
                   "mixed16 vs rounded " + what);
      // The bound, with Σ|a||b| from the reference on absolute values.
      reference::Feeds abs_feeds = exact;
      for (const char* name : {"a", "b"})
        for (size_t i = 0; i < abs_feeds[name].size(); ++i)
          abs_feeds[name][i] = std::fabs(abs_feeds[name][i]);
      Graph scale_g;
      const Node& an = ch.g.node(ch.g.inputs()[0]);
      const Node& bn = ch.g.node(ch.g.parameters()[0]);
      NodeId a = scale_g.input("a", an.shape), b = scale_g.parameter("b", bn.shape);
      scale_g.set_outputs({scale_g.matmul(a, b, t & 1, t & 2)});
      const HostTensor scale =
          reference::evaluate_outputs(scale_g, {{"a", abs_feeds["a"]}, {"b", abs_feeds["b"]}})[0];
      size_t differ = 0, bad = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        differ += got[i] != base[i];
        if (!(std::fabs(got[i] - base[i]) <= std::ldexp(scale[i], -10) + 1e-6) && bad++ < 5)
          ADD_FAILURE() << what << "[" << i << "]: mixed " << got[i] << " f32 " << base[i] << " bound "
                        << scale[i] / 1024;
      }
      EXPECT_GT(differ, 0u) << "Mixed16 must actually round the operands (" << what << ")";
    }
  }
}

// A large A·Bᵀ with no epilogue. Mixed16 sessions read f32 buffers rounded on load, and for those the
// workgroup-scope tile ran at half the subgroup tile's speed on the H200 (37.8 vs 75.6 TFLOP/s at 8192³,
// session 9), so kernels::default_coopmat_tile must not give it to them; on lavapipe the scalar tier runs.
// Either way the product must match the reference on the f16-rounded operands.
TEST_F(SessionMatmul, Mixed16LargeABTransposedMatchesRounded) {
  Graph g;
  NodeId a = g.input("a", {2048, 64});
  NodeId b = g.parameter("b", {4096, 64});
  g.set_outputs({g.matmul(a, b, false, true)});
  Session s = build(g, config(false, Precision::Mixed16), shared_device());
  const std::vector<PipelineReport> pipes = s.pipelines();
  ASSERT_EQ(pipes.size(), 1u);
  const std::string variant = pipes[0].variant;
  std::printf("[ variant  ] %s\n", variant.c_str());
  EXPECT_EQ(variant.find("/w"), std::string::npos) << variant;
  reference::Feeds rounded = feed(g, s, 11, true);
  s.run();
  expect_close(s.read_output(0), reference::evaluate_outputs(g, rounded)[0], 1e-4, 1e-4,
               "2048x4096x64 nt " + variant);
}

// Mixed16 products of at least kernels::kMinF16CopyMacs multiply-adds first copy both operands to f16 (one
// dispatch into the kernel's scratch, B's halves after A's) and multiply the copies: a batched A against a
// broadcast B, plain and transposed, must match the reference on f16-rounded operands, and the session must
// show the copy; F32 sessions and smaller products have none.
TEST_F(SessionMatmul, LargeMixed16ProductsMultiplyAnF16Copy) {
  auto copies = [](const Session& s) {
    size_t n = 0;
    for (const PipelineReport& p : s.pipelines()) n += p.variant == "matmul.f16-copy";
    return n;
  };
  for (bool tb : {false, true}) {
    Graph g;
    NodeId a = g.input("a", {4, 512, 1024});
    NodeId b = g.parameter("b", tb ? Shape{512, 1024} : Shape{1024, 512});
    g.set_outputs({g.matmul(a, b, false, tb)});
    Session s = build(g, config(false, Precision::Mixed16), shared_device());
    EXPECT_EQ(copies(s), 1u) << "B transposed " << tb;
    reference::Feeds rounded = feed(g, s, 21, true);
    s.run();
    expect_close(s.read_output(0), reference::evaluate_outputs(g, rounded)[0], 1e-4, 1e-4,
                 std::string("4x512x1024 · ") + (tb ? "(512x1024)ᵀ" : "1024x512") + " via the f16 copy");
    EXPECT_EQ(copies(build(g, config(false, Precision::F32), shared_device())), 0u) << "F32";
  }
  Graph small;
  small.set_outputs({small.matmul(small.input("a", {2, 512, 1024}), small.parameter("b", {1024, 512}))});
  EXPECT_EQ(copies(build(small, config(false, Precision::Mixed16), shared_device())), 0u)
      << "2^29 multiply-adds";
}

// A large Mixed16 product with few output tiles is split over K as well: the f16 copy and the partial
// products share the kernel's scratch (the copy, then the split product: two dispatches). On a device with
// many compute units (the H200's 132) the product above splits too; here a 96x96 output (36 tiles) makes it
// split on any device.
TEST_F(SessionMatmul, LargeMixed16ProductsSplitOverKKeepTheF16Copy) {
  Graph g;
  NodeId a = g.input("a", {96, 131072});
  NodeId b = g.parameter("b", {131072, 96});
  g.set_outputs({g.matmul(a, b)});
  const CompiledStep step = compile_step(g, config(false, Precision::Mixed16), device().caps());
  ASSERT_EQ(step.code.size(), 2u) << "expected the f16 copy and the split product";
  EXPECT_EQ(step.code[0].variant, "matmul.f16-copy");
  EXPECT_NE(step.code[1].variant.find(".k"), std::string::npos) << step.code[1].variant;
  Session s = build(g, config(false, Precision::Mixed16), shared_device());
  reference::Feeds rounded = feed(g, s, 23, true);
  s.run();
  // Outputs spread ~120 wide; f32 sums of 131072 products drift ~3e-3 from the float64 reference.
  expect_close(s.read_output(0), reference::evaluate_outputs(g, rounded)[0], 1e-2, 1e-4,
               "96x131072 · 131072x96 via the f16 copy, split over K");
}

TEST_F(SessionMatmul, Mixed16MlpTrainsLikeF32) {
  Graph g;
  auto x = g.input("x", {32, 784});
  auto labels = g.input("labels", {32, 10});
  auto w1 = g.parameter("w1", {784, 128});
  auto w2 = g.parameter("w2", {128, 10});
  g.set_outputs({g.cross_entropy_loss(g.matmul(g.relu(g.matmul(x, w1)), w2), labels)});
  std::vector<std::vector<float>> losses(2);
  double worst = 0;
  for (int p = 0; p < 2; ++p) {
    SessionConfig c = config(true, p == 0 ? Precision::F32 : Precision::Mixed16);
    c.optimizer.kind = OptimizerKind::Sgd;
    c.optimizer.learning_rate = 0.1;
    Session s = build(g, c, shared_device());
    std::mt19937 rng(42);
    std::vector<float> lab(320, 0.0f);
    for (int r = 0; r < 32; ++r) lab[size_t(r * 10 + int(rng() % 10))] = 1.0f;
    s.set_input("x", random_vec(32 * 784, rng));
    s.set_input("labels", lab);
    s.set_parameter("w1", random_vec(784 * 128, rng, 0.05f));
    s.set_parameter("w2", random_vec(1280, rng, 0.1f));
    for (int step = 0; step < 30; ++step) {
      s.run();
      losses[p].push_back(s.read_output(0).at(0));
    }
  }
  for (size_t i = 0; i < losses[0].size(); ++i) {
    const double rel = std::fabs(losses[1][i] - losses[0][i]) / losses[0][i];
    worst = std::max(worst, rel);
    EXPECT_LE(rel, 1e-3) << "step " << i << ": mixed16 " << losses[1][i] << " f32 " << losses[0][i];
  }
  EXPECT_LT(losses[1].back(), losses[1].front() * 0.5) << "Mixed16 training must make progress";
  std::printf("Mixed16 vs F32 MLP loss over 30 SGD steps: worst relative difference %.3g\n", worst);
}

// A Fill operand has no storage (the scheduler inlines fills): the matmul reads its literal.
TEST_F(SessionMatmul, FillOperandsReadTheirLiteral) {
  for (int t = 0; t < 4; ++t) {
    for (int64_t m : {3, 20}) {  // GEMV and scalar
      Graph g;
      const bool ta = t & 1, tb = t & 2;
      NodeId b = g.parameter("b", tb ? Shape{7, 11} : Shape{11, 7});
      NodeId a = g.fill(0.5, ta ? Shape{11, m} : Shape{m, 11});
      NodeId x = g.input("x", ta ? Shape{11, m} : Shape{m, 11});
      g.set_outputs({g.add(g.matmul(a, b, ta, tb),
                           g.matmul(x, g.fill(-0.25, tb ? Shape{7, 11} : Shape{11, 7}), ta, tb))});
      Session s = build(g, config(false, Precision::F32), shared_device());
      reference::Feeds feeds = feed(g, s, 3);
      s.run();
      expect_close(s.read_output(0), reference::evaluate_outputs(g, feeds)[0], 1e-5, 1e-4,
                   "fill m=" + std::to_string(m) + " t" + std::to_string(t));
    }
  }
}
