// Sessions on a real Vulkan device (lavapipe in CI): every op the example MLP needs against the CPU
// reference, the MLP's SGD trajectory, aliasing on/off, fused vs unfused parity on random graphs in every
// rewrite mode, bad input, and inference memory.
//
// Tolerances (f32 on the GPU against the float64 reference): |gpu - ref| <= 1e-5 + 1e-4·|ref| for single
// ops and random graphs (a K=784 dot product in f32 carries ~1e-6 relative rounding per term); losses of
// the 100-step training run within 1e-4 absolute.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "gpu_fixture.hpp"
#include "meganeura/autodiff/autodiff.hpp"
#include "meganeura/reference/interpreter.hpp"
#include "meganeura/session/pipeline.hpp"

using namespace meganeura;

namespace {

std::shared_ptr<runtime::Device> shared_device() {
  // The fixture owns the device for the whole process; sessions borrow it.
  return std::shared_ptr<runtime::Device>(&test::gpu_device(), [](runtime::Device*) {});
}

SessionConfig base_config(bool training) {
  SessionConfig c = test::gpu_config();
  static const std::string cache = [] {
    auto dir =
        std::filesystem::temp_directory_path() / ("meganeura-test-session-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    return dir.string();
  }();
  c.cache_dir = cache;  // fresh per process: results never depend on an earlier run
  c.training = training;
  c.dump_plan.clear();
  if (!training) c.optimizer.kind = OptimizerKind::None;
  return c;
}

using meganeura::test::random_vec;

HostTensor to_host(const Shape& s, const std::vector<float>& v) {
  return HostTensor(s, std::vector<double>(v.begin(), v.end()));
}

void expect_close(const std::vector<float>& got, const HostTensor& want, double atol, double rtol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double tol = atol + rtol * std::fabs(want[i]);
    if (!(std::fabs(double(got[i]) - want[i]) <= tol) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: gpu " << got[i] << " vs reference " << want[i];
  }
  EXPECT_EQ(bad, 0u) << what;
}

// Feeds every input and parameter of g with seeded random data, in the session and for the reference.
reference::Feeds feed_all(const Graph& g, Session& s, std::mt19937& rng) {
  reference::Feeds feeds;
  for (NodeId n : g.inputs()) {
    const Node& nd = g.node(n);
    auto v = random_vec(size_t(numel(nd.shape)), rng);
    s.set_input(nd.prov.name, v);
    feeds[nd.prov.name] = to_host(nd.shape, v);
  }
  for (NodeId n : g.parameters()) {
    const Node& nd = g.node(n);
    auto v = random_vec(size_t(numel(nd.shape)), rng, 0.5f);
    s.set_parameter(nd.prov.name, v);
    feeds[nd.prov.name] = to_host(nd.shape, v);
  }
  return feeds;
}

// Runs g's outputs on the GPU and the CPU reference and compares them.
void check_against_reference(const Graph& g, const std::string& what, uint32_t seed = 1) {
  Session s = build(g, base_config(false), shared_device());
  std::mt19937 rng(seed);
  reference::Feeds feeds = feed_all(g, s, rng);
  s.run();
  auto want = reference::evaluate_outputs(g, feeds);
  for (size_t i = 0; i < want.size(); ++i)
    expect_close(s.read_output(i), want[i], 1e-5, 1e-4, what + " output " + std::to_string(i));
}

}  // namespace

class Session_ : public test::GpuTest {};

TEST_F(Session_, MatmulInEveryLayoutMatchesReference) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t m : {3, 21}) {  // 3 takes the GEMV path, 21 the tiled one (not a multiple of the tile)
        Graph g;
        int64_t k = 19, n = 13;
        NodeId a = g.input("a", ta ? Shape{k, m} : Shape{m, k});
        NodeId b = g.parameter("b", tb ? Shape{n, k} : Shape{k, n});
        g.set_outputs({g.matmul(a, b, ta, tb)});
        check_against_reference(
            g, "matmul ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " m=" + std::to_string(m));
      }
}

TEST_F(Session_, BatchedMatmulWithBroadcastBatchMatchesReference) {
  Graph g;
  NodeId a = g.input("a", {2, 3, 5, 7});
  NodeId b = g.input("b", {3, 7, 4});
  g.set_outputs({g.matmul(a, b)});
  check_against_reference(g, "batched matmul");
}

TEST_F(Session_, MlpOpsMatchReference) {
  Graph g;
  NodeId x = g.input("x", {6, 10});
  NodeId t = g.input("t", {6, 10});
  NodeId relu = g.relu(x);
  NodeId mask = g.mul(t, g.gt(x, g.scalar(0.0)));
  NodeId sm = g.softmax(x);
  NodeId lsm = g.log_softmax(x, 0);
  NodeId ce = g.cross_entropy_loss(x, g.softmax(t));
  NodeId ce_sum = g.cross_entropy_loss(x, g.softmax(t), Reduction::Sum);
  NodeId ce_none = g.cross_entropy_loss(x, g.softmax(t), Reduction::None);
  NodeId grad = g.mul(g.sub(g.softmax(x), t), g.scalar(1.0 / 6));
  NodeId sum0 = g.sum(x, {0});
  NodeId mean1 = g.mean(x, {1}, true);
  NodeId mx = g.max(x, {1});
  NodeId all = g.sum(x);
  g.set_outputs({relu, mask, sm, lsm, ce, ce_sum, ce_none, grad, sum0, mean1, mx, all});
  check_against_reference(g, "mlp ops");
}

TEST_F(Session_, MoreReductionsAndPointwiseMatchReference) {
  Graph g;
  NodeId x = g.input("x", {5, 3, 4});
  NodeId y = g.input("y", {4});
  g.set_outputs({g.variance(x, {0, 2}), g.min(x, {1}, true), g.argmax(x, 1), g.tanh(g.add(x, y)),
                 g.where(g.lt(x, y), g.exp(x), g.sigmoid(y)), g.mse_loss(x, g.sin(x)),
                 g.sqrt(g.sum(g.square(x), {-1}))});
  check_against_reference(g, "reductions");
}

TEST_F(Session_, MovementOpsMatchReference) {
  Graph g;
  NodeId x = g.input("x", {4, 6});
  NodeId r = g.reshape(g.exp(x), {2, 12});
  g.set_outputs({g.transpose(x), g.relu(r), g.permute(g.reshape(x, {2, 2, 6}), {2, 0, 1})});
  check_against_reference(g, "movement");
}

namespace {

struct Mlp {
  Graph g;
  NodeId loss;
  Mlp() {
    auto x = g.input("x", {32, 784});
    auto labels = g.input("labels", {32, 10});
    auto w1 = g.parameter("w1", {784, 128});
    auto h = g.relu(g.matmul(x, w1));
    auto w2 = g.parameter("w2", {128, 10});
    auto logits = g.matmul(h, w2);
    loss = g.cross_entropy_loss(logits, labels);
    g.set_outputs({loss});
  }
};

}  // namespace

TEST_F(Session_, MlpTrains100SgdStepsLikeTheReference) {
  Mlp m;
  const double lr = 0.1;
  SessionConfig c = base_config(true);
  c.optimizer.kind = OptimizerKind::Sgd;
  c.optimizer.learning_rate = lr;
  Session s = build(m.g, c, shared_device());
  EXPECT_EQ(s.memory_summary().optimizer_state, 0u);  // plain SGD keeps no moments

  std::mt19937 rng(42);
  auto x = random_vec(32 * 784, rng);
  std::vector<float> labels(32 * 10, 0.0f);
  for (int r = 0; r < 32; ++r) labels[size_t(r * 10 + int(rng() % 10))] = 1.0f;
  auto w1 = random_vec(784 * 128, rng, 0.05f);
  auto w2 = random_vec(128 * 10, rng, 0.1f);
  s.set_input("x", x);
  s.set_input("labels", labels);
  s.set_parameter("w1", w1);
  s.set_parameter("w2", w2);

  // The reference: the same differentiated graph in float64 and plain SGD on the host.
  Graph t = differentiate(m.g, m.loss);
  NodeId gw1 = *t.gradient(*t.find("w1")), gw2 = *t.gradient(*t.find("w2"));
  reference::Feeds feeds{{"x", to_host({32, 784}, x)},
                         {"labels", to_host({32, 10}, labels)},
                         {"w1", to_host({784, 128}, w1)},
                         {"w2", to_host({128, 10}, w2)}};
  double first = 0, last = 0;
  for (int step = 0; step < 100; ++step) {
    s.run();
    float gpu_loss = s.read_output(0).at(0);
    auto ref = reference::evaluate(t, feeds, {m.loss, gw1, gw2});
    ASSERT_NEAR(gpu_loss, ref[0][0], 1e-4) << "step " << step;
    if (step == 0) first = ref[0][0];
    last = ref[0][0];
    for (size_t i = 0; i < ref[1].size(); ++i) feeds["w1"][i] -= lr * ref[1][i];
    for (size_t i = 0; i < ref[2].size(); ++i) feeds["w2"][i] -= lr * ref[2][i];
  }
  EXPECT_LT(last, first * 0.5) << "the loss should fall on a fixed batch";
  expect_close(s.read_parameter("w2"), feeds["w2"], 1e-4, 1e-3, "w2 after 100 steps");
}

TEST_F(Session_, LearningRateChangesWithoutRebuilding) {
  Mlp m;
  SessionConfig c = base_config(true);
  c.optimizer.learning_rate = 0.5;
  Session s = build(m.g, c, shared_device());
  std::mt19937 rng(3);
  std::vector<float> labels(320, 0.0f);
  for (int r = 0; r < 32; ++r) labels[size_t(r * 10 + r % 10)] = 1.0f;
  s.set_input("x", random_vec(32 * 784, rng));
  s.set_input("labels", labels);
  s.set_parameter("w1", random_vec(784 * 128, rng, 0.05f));
  auto w2 = random_vec(1280, rng, 0.1f);
  s.set_parameter("w2", w2);
  s.set_learning_rate(0.0);
  s.run();
  EXPECT_EQ(s.read_parameter("w2"), w2);  // lr 0: no change
  s.set_learning_rate(0.5);
  s.run();
  EXPECT_NE(s.read_parameter("w2"), w2);
}

TEST_F(Session_, AliasingDoesNotChangeResults) {
  Mlp m;
  std::vector<std::vector<float>> losses(2);
  uint64_t arena[2] = {0, 0};
  for (int alias = 0; alias < 2; ++alias) {
    SessionConfig c = base_config(true);
    c.alias_memory = alias == 1;
    Session s = build(m.g, c, shared_device());
    arena[alias] = s.memory_summary().activations;
    std::mt19937 rng(9);
    std::vector<float> labels(320, 0.0f);
    for (int r = 0; r < 32; ++r) labels[size_t(r * 10 + (r * 7) % 10)] = 1.0f;
    s.set_input("x", random_vec(32 * 784, rng));
    s.set_input("labels", labels);
    s.set_parameter("w1", random_vec(784 * 128, rng, 0.05f));
    s.set_parameter("w2", random_vec(1280, rng, 0.1f));
    for (int i = 0; i < 5; ++i) {
      s.run();
      losses[size_t(alias)].push_back(s.read_output(0).at(0));
    }
  }
  EXPECT_EQ(losses[0], losses[1]);  // bit-identical: the same kernels on different offsets
  EXPECT_LT(arena[1], arena[0]);
}

namespace {

// A random small graph mixing pointwise (with broadcasting), reductions and matmuls over [n, n].
Graph random_graph(uint32_t seed) {
  std::mt19937 rng(seed);
  Graph g;
  const int64_t n = 2 + int64_t(rng() % 5);
  std::vector<NodeId> vals{g.input("x", {n, n}), g.parameter("w", {n, n})};
  NodeId v = g.input("v", {n});
  int count = 4 + int(rng() % 7);
  for (int i = 0; i < count; ++i) {
    NodeId a = vals[rng() % vals.size()], b = vals[rng() % vals.size()];
    NodeId r;
    switch (rng() % 12) {
      case 0: r = g.add(a, b); break;
      case 1: r = g.mul(g.sub(a, v), b); break;
      case 2: r = g.tanh(a); break;
      case 3: r = g.mul(g.matmul(a, b, rng() % 2, rng() % 2), g.scalar(1.0 / double(n))); break;
      case 4: r = g.softmax(a, rng() % 2 ? -1 : 0); break;
      case 5: r = g.add(a, g.mean(b, {1}, true)); break;
      case 6: r = g.mul(a, g.max(b, {0})); break;
      case 7: r = g.relu(g.sub(a, g.scalar(0.1))); break;
      case 8: r = g.where(g.gt(a, b), a, g.sigmoid(b)); break;
      case 9: r = g.log_softmax(g.add(a, v)); break;
      case 10: r = g.exp(g.tanh(a)); break;
      default: r = g.maximum(a, g.neg(b)); break;
    }
    vals.push_back(r);
  }
  std::vector<NodeId> outs{vals.back()};
  if (vals.size() > 4 && rng() % 2) outs.push_back(vals[2 + rng() % (vals.size() - 3)]);
  if (rng() % 3 == 0) outs.push_back(g.sum(vals.back()));
  g.set_outputs(outs);
  return g;
}

}  // namespace

TEST_F(Session_, FusedAndUnfusedAgreeOnRandomGraphsInEveryRewriteMode) {
  const int graphs = 200;
  KernelCache cache;  // identical kernels of different graphs become one pipeline
  for (RewriteMode mode : {RewriteMode::Greedy, RewriteMode::Saturate, RewriteMode::Off}) {
    for (int i = 0; i < graphs; ++i) {
      Graph g = random_graph(uint32_t(1000 + i));
      SessionConfig c = base_config(false);
      c.rewrite = mode;
      CompileOptions fused, unfused;
      fused.cache = unfused.cache = &cache;
      unfused.fuse = false;
      Session f = build_with(g, c, shared_device(), fused);
      Session u = build_with(g, c, shared_device(), unfused);
      std::mt19937 rng{uint32_t(i)};
      reference::Feeds feeds = feed_all(g, f, rng);
      std::mt19937 rng2{uint32_t(i)};
      feed_all(g, u, rng2);
      f.run();
      u.run();
      auto want = reference::evaluate_outputs(g, feeds);
      std::string what = "graph " + std::to_string(i) + " mode " + std::to_string(int(mode));
      for (size_t o = 0; o < g.outputs().size(); ++o) {
        auto a = f.read_output(o), b = u.read_output(o);
        expect_close(a, want[o], 1e-5, 1e-4, what + " fused");
        expect_close(b, want[o], 1e-5, 1e-4, what + " unfused");
      }
      if (HasFailure()) {
        ADD_FAILURE() << g.to_text();
        return;
      }
    }
  }
}

// A transformer's head split (slice of a fused QKV, reshape into heads, permute, RoPE) and a pad/concat chain
// in the backward's shape: each chain is one copy kernel when fused (the movement ops only it reads are
// computed through index functions), several unfused, and both equal the reference. The same value read
// by a second consumer stays stored.
TEST_F(Session_, MovementChainsFuseIntoOneCopyAndMatchUnfused) {
  Graph g;
  const NodeId qkv = g.input("qkv", {2, 5, 24});  // [batch, seq, (4 + 2) heads x 4]
  auto heads = [&](int64_t from, int64_t count) {
    const NodeId s = g.slice(qkv, 2, from * 4, (from + count) * 4);
    return g.permute(g.reshape(s, {2, 5, count, 4}), {0, 2, 1, 3});
  };
  const NodeId q = g.rope(heads(0, 4), 10000.0, 3);
  const NodeId v = heads(4, 2);
  const NodeId back = g.reshape(g.permute(v, {0, 2, 1, 3}), {2, 5, 8});
  const NodeId joined = g.concat({g.pad(back, {0, 0, 1}, {0, 0, 2}, 0.5), g.slice(qkv, 2, 0, 5)}, 2);
  g.set_outputs({g.named(q, "q"), g.named(joined, "joined"), g.named(g.exp(v), "v_exp")});
  SessionConfig c = base_config(false);
  c.rewrite = RewriteMode::Off;  // as built: the rewrite folds the permute pair of v
  CompileOptions fused, unfused;
  unfused.fuse = false;
  const CompiledStep fs = compile_step(g, c, test::gpu_device().caps(), fused);
  const CompiledStep us = compile_step(g, c, test::gpu_device().caps(), unfused);
  // fused: q (slice, reshape, permute into RoPE), v (read twice: stored), joined (permute, reshape, pad and
  // slice into the concat); unfused: every movement op its own kernel
  EXPECT_EQ(fs.kernels.count(Archetype::Copy), 3u) << fs.kernels.to_text(fs.graph);
  EXPECT_GE(us.kernels.count(Archetype::Copy), 9u) << us.kernels.to_text(us.graph);
  Session f = build_with(g, c, shared_device(), fused);
  Session u = build_with(g, c, shared_device(), unfused);
  std::mt19937 rng{7}, rng2{7};
  reference::Feeds feeds = feed_all(g, f, rng);
  feed_all(g, u, rng2);
  f.run();
  u.run();
  const auto want = reference::evaluate_outputs(g, feeds);
  for (size_t o = 0; o < want.size(); ++o) {
    expect_close(f.read_output(o), want[o], 1e-5, 1e-4, "fused output " + std::to_string(o));
    expect_close(u.read_output(o), want[o], 1e-5, 1e-4, "unfused output " + std::to_string(o));
  }
}

TEST_F(Session_, BadGraphsGiveClearErrors) {
  {
    Graph g;
    g.input("x", {3});
    EXPECT_THROW(build(g, base_config(false), shared_device()), GraphError);
  }
  {
    Graph g;
    NodeId x = g.input("x", {3});
    NodeId c = g.named(g.add(g.constant({1, 2, 3}, {3}), g.scalar(1.0)), "no_input");
    g.set_outputs({g.relu(x), c});
    try {
      build(g, base_config(false), shared_device());
      ADD_FAILURE() << "expected GraphError";
    } catch (const GraphError& e) {
      EXPECT_NE(std::string(e.what()).find("no_input"), std::string::npos) << e.what();
    }
  }
}

TEST_F(Session_, BadCallsGiveClearErrorsAndTheSessionStaysUsable) {
  Graph g;
  NodeId x = g.input("x", {2, 3});
  NodeId w = g.parameter("w", {3, 2});
  g.set_outputs({g.matmul(x, w)});
  Session s = build(g, base_config(false), shared_device());
  std::vector<float> xv{1, 2, 3, 4, 5, 6}, wv{1, 0, 0, 1, 1, 1};
  s.set_input("x", xv);
  s.set_parameter("w", wv);
  try {
    s.set_parameter("w", std::vector<float>(5, 1.0f));
    ADD_FAILURE() << "expected SessionError";
  } catch (const SessionError& e) {
    EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("6 values"), std::string::npos) << e.what();
  }
  try {
    s.set_input("nope", xv);
    ADD_FAILURE() << "expected SessionError";
  } catch (const SessionError& e) {
    EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(s.set_input("x", std::vector<int32_t>(6, 1)), SessionError);
  EXPECT_THROW(s.read_output(3), SessionError);
  EXPECT_THROW(s.read_output("nope"), SessionError);
  EXPECT_THROW(s.set_learning_rate(0.1), SessionError);
  s.run();
  EXPECT_EQ(s.read_output(0), (std::vector<float>{4, 5, 10, 11}));
}

TEST_F(Session_, InferenceSessionHasNoGradientOrOptimizerBuffers) {
  Mlp m;
  Session inf = build(m.g, base_config(false), shared_device());
  MemorySummary a = inf.memory_summary();
  EXPECT_EQ(a.gradients, 0u);
  EXPECT_EQ(a.optimizer_state, 0u);
  EXPECT_EQ(a.parameters, (784u * 128 + 1280) * 4);
  SessionConfig c = base_config(true);
  c.optimizer.kind = OptimizerKind::Adam;
  Session adam = build(m.g, c, shared_device());
  EXPECT_EQ(adam.memory_summary().gradients, 0u);  // the updates run in the gradients' kernels
  c.keep_gradients = true;
  adam = build(m.g, c, shared_device());
  EXPECT_EQ(adam.memory_summary().gradients, (784u * 128 + 1280) * 4);
  EXPECT_EQ(adam.memory_summary().optimizer_state, 2u * (784 * 128 + 1280) * 4);
  EXPECT_EQ(adam.optimizer_state().size(), 4u);
}

TEST_F(Session_, AdamStepMatchesHostFormula) {
  Graph g;
  NodeId x = g.input("x", {4, 3});
  NodeId w = g.parameter("w", {3, 2});
  g.set_outputs({g.sum(g.square(g.matmul(x, w)))});
  for (OptimizerKind kind : {OptimizerKind::Adam, OptimizerKind::AdamW}) {
    SessionConfig c = base_config(true);
    c.optimizer.kind = kind;
    c.optimizer.learning_rate = 0.01;
    c.optimizer.weight_decay = 0.1;
    Session s = build(g, c, shared_device());
    std::mt19937 rng(5);
    auto xv = random_vec(12, rng);
    auto wv = random_vec(6, rng);
    s.set_input("x", xv);
    s.set_parameter("w", wv);
    Graph t = differentiate(g, g.outputs()[0]);
    NodeId gw = *t.gradient(*t.find("w"));
    reference::Feeds feeds{{"x", to_host({4, 3}, xv)}, {"w", to_host({3, 2}, wv)}};
    std::vector<double> m1(6, 0), v1(6, 0);
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8, lr = 0.01, wd = 0.1;
    for (int step = 1; step <= 3; ++step) {
      s.run();
      HostTensor gr = reference::evaluate(t, feeds, gw);
      for (size_t i = 0; i < 6; ++i) {
        double p = feeds["w"][i], gi = gr[i];
        if (kind == OptimizerKind::Adam)
          gi += wd * p;
        else
          p *= 1 - lr * wd;
        m1[i] = b1 * m1[i] + (1 - b1) * gi;
        v1[i] = b2 * v1[i] + (1 - b2) * gi * gi;
        double mh = m1[i] / (1 - std::pow(b1, step)), vh = v1[i] / (1 - std::pow(b2, step));
        feeds["w"][i] = p - lr * mh / (std::sqrt(vh) + eps);
      }
    }
    EXPECT_EQ(s.optimizer_step(), 3u);
    expect_close(s.read_parameter("w"), feeds["w"], 1e-5, 1e-4, "adam w");
  }
}

// An unwritable trace path is an error when the session is built (not lost in the trace's destructor at
// exit); an unusable cache directory is one warning naming it, and the session works without the cache.
TEST_F(Session_, UnwritableTraceIsAConfigErrorAndUnusableCacheDirAWarning) {
  Graph g;
  NodeId x = g.input("x", {3, 4});
  g.set_outputs({g.relu(g.mul(x, g.scalar(2.0)))});
  SessionConfig c = base_config(false);
  c.trace_path = "/nonexistent-meganeura-dir/trace.json";
  try {
    build(g, c, shared_device());
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(c.trace_path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("MEGANEURA_TRACE"), std::string::npos) << e.what();
  }
  // a regular file where the directory should be: neither creatable nor writable
  const std::filesystem::path blocker =
      std::filesystem::temp_directory_path() / ("meganeura-cache-blocker-" + std::to_string(::getpid()));
  std::ofstream(blocker) << "not a directory";
  SessionConfig d = base_config(false);
  d.cache_dir = (blocker / "cache").string();
  for (int build_no = 0; build_no < 2; ++build_no) {
    testing::internal::CaptureStderr();
    Session s = build(g, d, shared_device());
    const std::string err = testing::internal::GetCapturedStderr();
    if (build_no == 0)
      EXPECT_NE(err.find("the cache directory '" + d.cache_dir + "'"), std::string::npos) << err;
    else
      EXPECT_EQ(err.find("the cache directory"), std::string::npos) << "warned twice: " << err;
    std::vector<float> xv(12, -1.0f);
    xv[5] = 1.5f;
    s.set_input("x", xv);
    s.run();
    const std::vector<float> y = s.read_output(0);
    EXPECT_EQ(y[5], 3.0f);
    EXPECT_EQ(y[0], 0.0f);
  }
  std::filesystem::remove(blocker);
}
