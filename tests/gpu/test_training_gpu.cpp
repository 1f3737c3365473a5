// Training through a real Session on the first Vulkan device (lavapipe in CI): clipping by global norm and
// gradient accumulation inside the recorded step against host formulas and the CPU reference, optimizer
// memory only when needed, the Trainer end to end, and checkpoints into sessions. (Each optimizer against
// torch over 20 steps: tests/oracle/test_optimizers_torch.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "gpu_fixture.hpp"
#include "meganeura/autodiff/autodiff.hpp"
#include "meganeura/meganeura.hpp"
#include "meganeura/nn/nn.hpp"
#include "meganeura/reference/interpreter.hpp"
#include "meganeura/session/pipeline.hpp"

namespace fs = std::filesystem;
using namespace meganeura;

namespace {

class TrainingGpu : public test::GpuTest {};

Graph tiny(int64_t batch, bool with_loss = true) {
  Graph g;
  const NodeId x = g.input("x", {batch, 4});
  const NodeId h = g.relu(g.matmul(x, g.parameter("w1", {4, 16})));
  const NodeId z = g.named(g.matmul(h, g.parameter("w2", {16, 3})), "logits");
  if (with_loss)
    g.set_outputs({g.cross_entropy_loss(z, g.input("labels", {batch, 3}))});
  else
    g.set_outputs({z});
  return g;
}
constexpr uint64_t kParamBytes = (4 * 16 + 16 * 3) * 4;

// Three separable blobs.
std::shared_ptr<TensorDataset> blobs(int n) {
  auto ds = std::make_shared<TensorDataset>();
  std::vector<float> x, y;
  for (int i = 0; i < n; ++i) {
    const int c = i % 3;
    // The constant last feature stands in for a bias, so that no class can be left with every ReLU dead.
    for (int d = 0; d < 3; ++d) x.push_back((d == c ? 2.0f : 0.0f) + 0.3f * std::sin(1.7f * i + d));
    x.push_back(1.0f);
    for (int k = 0; k < 3; ++k) y.push_back(k == c ? 1.0f : 0.0f);
  }
  ds->add_f32("x", {4}, x);
  ds->add_f32("labels", {3}, y);
  return ds;
}

OptimizerConfig rule(OptimizerKind kind, double lr, double clip = 0, int accumulation = 1) {
  OptimizerConfig o;
  o.kind = kind;
  o.learning_rate = lr;
  o.clip_grad_norm = clip;
  o.grad_accumulation = accumulation;
  return o;
}

// Sessions share the test device and one kernel cache (lavapipe compiles every pipeline, the slow part).
Session session(const Graph& g, OptimizerConfig o, bool training = true) {
  static KernelCache cache;
  SessionConfig cfg = test::gpu_config();
  cfg.training = training;
  cfg.optimizer = o;
  cfg.dump_plan.clear();
  std::shared_ptr<runtime::Device> dev(&test::gpu_device(), [](runtime::Device*) {});
  return build_with(g, cfg, dev, {.cache = &cache});
}

TrainConfig quiet(int64_t batch, int epochs = 2) {
  TrainConfig c;
  c.batch_size = batch;
  c.epochs = epochs;
  c.progress = ProgressMode::Off;
  return c;
}

// Seeded inputs: 2·batch rows of x and one-hot labels, so a batch-b session can take either half.
struct Data {
  std::vector<float> x, labels, w1, w2;
  explicit Data(int64_t rows, unsigned seed = 7) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int64_t i = 0; i < rows * 4; ++i) x.push_back(u(rng));
    for (int64_t r = 0; r < rows; ++r)
      for (int k = 0; k < 3; ++k) labels.push_back(k == int(rng() % 3) ? 1.0f : 0.0f);
    for (int i = 0; i < 4 * 16; ++i) w1.push_back(0.5f * u(rng));
    for (int i = 0; i < 16 * 3; ++i) w2.push_back(0.5f * u(rng));
  }
  std::vector<float> rows_of(const std::vector<float>& v, int64_t width, int64_t first, int64_t count) const {
    return {v.begin() + first * width, v.begin() + (first + count) * width};
  }
  void feed(Session& s, int64_t first, int64_t count) const {
    s.set_input("x", rows_of(x, 4, first, count));
    s.set_input("labels", rows_of(labels, 3, first, count));
  }
  void init(Session& s) const {
    s.set_parameter("w1", w1);
    s.set_parameter("w2", w2);
  }
};

double norm(const std::vector<std::vector<double>>& gs) {
  double sq = 0;
  for (const auto& g : gs)
    for (double v : g) sq += v * v;
  return std::sqrt(sq);
}

void expect_near(const std::vector<float>& got, const std::vector<double>& want, double rtol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= rtol * std::max(std::abs(want[i]), 1e-2 * scale)) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: gpu " << got[i] << ", want " << want[i];
  EXPECT_EQ(bad, 0u) << what;
}

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

}  // namespace

TEST_F(TrainingGpu, OptimizerMemoryOnlyWhenNeeded) {
  auto mem = [](OptimizerConfig o) { return session(tiny(8), o).memory_summary(); };
  EXPECT_EQ(mem(rule(OptimizerKind::Sgd, 0.1)).optimizer_state, 0u);
  OptimizerConfig momentum = rule(OptimizerKind::Sgd, 0.1);
  momentum.momentum = 0.9;
  EXPECT_EQ(mem(momentum).optimizer_state, kParamBytes);
  momentum.nesterov = true;
  EXPECT_EQ(mem(momentum).optimizer_state, kParamBytes);
  for (OptimizerKind k : {OptimizerKind::Adam, OptimizerKind::AdamW, OptimizerKind::LaProp})
    EXPECT_EQ(mem(rule(k, 0.01)).optimizer_state, 2 * kParamBytes);
  // Forward and backward only: gradients, nothing else.
  const MemorySummary grads_only = mem(rule(OptimizerKind::None, 0));
  EXPECT_EQ(grads_only.optimizer_state, 0u);
  EXPECT_EQ(grads_only.gradients, kParamBytes);
  // Accumulation adds one gradient-sized buffer per parameter, and clipping no buffer at all.
  const MemorySummary acc = mem(rule(OptimizerKind::Sgd, 0.1, 1.0, 2));
  EXPECT_EQ(acc.optimizer_state, 0u);
  EXPECT_EQ(acc.gradients, 2 * kParamBytes);
  const MemorySummary infer = session(tiny(8, false), rule(OptimizerKind::None, 0), false).memory_summary();
  EXPECT_EQ(infer.gradients, 0u);
  EXPECT_EQ(infer.optimizer_state, 0u);
  EXPECT_EQ(infer.parameters, kParamBytes);
}

// One SGD step with clipping: p1 = p0 - lr · min(1, c / (‖g‖ + 1e-6)) · g over both parameters together,
// with g read back from the step. A tight c scales; a loose one leaves plain SGD.
TEST_F(TrainingGpu, ClippedStepMatchesTheHostFormula) {
  const Data d(8);
  const double lr = 0.5;
  for (double clip : {0.05, 1e6}) {
    SCOPED_TRACE("clip " + std::to_string(clip));
    Session s = session(tiny(8), rule(OptimizerKind::Sgd, lr, clip));
    d.init(s);
    d.feed(s, 0, 8);
    s.run();
    const std::vector<std::vector<double>> g = {to_double(s.read_gradient("w1")),
                                                to_double(s.read_gradient("w2"))};
    const double n = norm(g);
    const double scale = std::min(1.0, clip / (n + 1e-6));
    if (clip < 1) {
      EXPECT_LT(scale, 0.5) << "the test needs a clip that binds, norm " << n;
    }
    std::vector<double> step_sq;
    for (int p = 0; p < 2; ++p) {
      const std::vector<float>& p0 = p == 0 ? d.w1 : d.w2;
      std::vector<double> want(p0.size());
      for (size_t i = 0; i < want.size(); ++i) want[i] = p0[i] - lr * scale * g[size_t(p)][i];
      expect_near(s.read_parameter(p == 0 ? "w1" : "w2"), want, 1e-5, p == 0 ? "w1" : "w2");
    }
  }
}

// k = 2 micro-batches of 4 rows update exactly as one batch of 8 (the loss is a mean, so the mean of the
// micro-gradients is the big batch's gradient): against the float64 reference with momentum SGD over three
// updates (so the accumulators must restart from zero), and against a batch-8 session.
TEST_F(TrainingGpu, AccumulationEqualsOneBigBatch) {
  const Data d(8);
  const double lr = 0.2, mu = 0.9;
  OptimizerConfig o = rule(OptimizerKind::Sgd, lr, 0, 2);
  o.momentum = mu;
  Session acc = session(tiny(4), o);
  o.grad_accumulation = 1;
  Session big = session(tiny(8), o);
  d.init(acc);
  d.init(big);
  d.feed(big, 0, 8);

  const Graph g8 = tiny(8);
  const Graph t = differentiate(g8, g8.outputs()[0]);
  const NodeId gw[2] = {*t.gradient(*t.find("w1")), *t.gradient(*t.find("w2"))};
  reference::Feeds feeds{{"x", HostTensor({8, 4}, to_double(d.x))},
                         {"labels", HostTensor({8, 3}, to_double(d.labels))},
                         {"w1", HostTensor({4, 16}, to_double(d.w1))},
                         {"w2", HostTensor({16, 3}, to_double(d.w2))}};
  std::vector<double> m[2] = {std::vector<double>(64, 0.0), std::vector<double>(48, 0.0)};
  for (int update = 1; update <= 3; ++update) {
    const std::vector<float> before = acc.read_parameter("w1");
    d.feed(acc, 0, 4);
    acc.run();
    EXPECT_EQ(acc.read_parameter("w1"), before) << "the first micro-batch only accumulates";
    EXPECT_EQ(acc.optimizer_step(), uint64_t(update - 1));
    d.feed(acc, 4, 4);
    acc.run();
    EXPECT_EQ(acc.optimizer_step(), uint64_t(update));
    big.run();
    const std::vector<HostTensor> ref = reference::evaluate(t, feeds, {gw[0], gw[1]});
    for (int p = 0; p < 2; ++p) {
      const char* name = p == 0 ? "w1" : "w2";
      HostTensor& w = feeds[name];
      for (size_t i = 0; i < w.size(); ++i) {
        m[p][i] = mu * m[p][i] + ref[size_t(p)][i];
        w[i] -= lr * m[p][i];
      }
      const std::string what = std::string(name) + " after update " + std::to_string(update);
      expect_near(acc.read_parameter(name), w.data, 1e-5, what + " (reference)");
      expect_near(acc.read_parameter(name), to_double(big.read_parameter(name)), 1e-5, what + " (batch 8)");
    }
  }
  // Setting the step count drops a half-accumulated update: afterwards two micro-batches make one update.
  d.feed(acc, 0, 4);
  acc.run();
  acc.set_optimizer_step(3);
  const std::vector<float> before = acc.read_parameter("w2");
  acc.run();
  EXPECT_EQ(acc.read_parameter("w2"), before);
  acc.run();
  EXPECT_NE(acc.read_parameter("w2"), before);
}

// Clipping of the accumulated gradient: the norm is that of the mean of the micro-gradients.
TEST_F(TrainingGpu, ClippedAccumulationMatchesTheHostFormula) {
  const Data d(8);
  const double lr = 0.5, clip = 0.05;
  Session s = session(tiny(4), rule(OptimizerKind::Sgd, lr, clip, 2));
  d.init(s);
  std::vector<std::vector<double>> mean = {std::vector<double>(64, 0.0), std::vector<double>(48, 0.0)};
  for (int half = 0; half < 2; ++half) {
    d.feed(s, 4 * half, 4);
    s.run();
    for (int p = 0; p < 2; ++p) {
      const std::vector<float> g = s.read_gradient(p == 0 ? "w1" : "w2");
      for (size_t i = 0; i < g.size(); ++i) mean[size_t(p)][i] += 0.5 * g[i];
    }
  }
  const double scale = std::min(1.0, clip / (norm(mean) + 1e-6));
  EXPECT_LT(scale, 0.5);
  for (int p = 0; p < 2; ++p) {
    const std::vector<float>& p0 = p == 0 ? d.w1 : d.w2;
    std::vector<double> want(p0.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = p0[i] - lr * scale * mean[size_t(p)][i];
    expect_near(s.read_parameter(p == 0 ? "w1" : "w2"), want, 1e-5, p == 0 ? "w1" : "w2");
  }
}

// Updates fused into the kernels computing their gradients (the default) against the same step with the
// gradients kept (an update kernel per parameter): every loss, parameter and optimizer state bit for bit over
// 10 steps of every rule, on MLPs with biases whose sizes fit no tile. The weight gradients take the 16 tile
// (7 rows, 13 -> 11 -> 5), the 128 and 64 tiles unsplit (8 rows, 2050 -> 1030 -> 520: the epilogue that loads
// a tile's optimizer state before its stores, MM_STORE_TILE_PRELOAD) and the 64 tile split over 1000 rows
// (the fix-up's update); the test asserts that each of those kernels is in the step. The shapes get those
// tiles from the rule both where the device says nothing of its compute units (lavapipe: 64 assumed) and on a
// 132-SM H100 (1030 -> 1030 and 300 rows did not there: the 64 tile and the 16 tile took them).
TEST_F(TrainingGpu, FusedUpdatesMatchTheUnfusedStepBitForBit) {
  struct Case {
    int64_t rows;
    std::vector<int64_t> sizes;
    std::vector<std::string> fused_variants;  // prefixes of matmul kernels that must carry a fused update
  };
  const Case cases[] = {{7, {13, 11, 5}, {"matmul.scalar.16"}},
                        {8, {2050, 1030, 520}, {"matmul.scalar.128", "matmul.scalar.64"}},
                        {1000, {130, 140, 10}, {"matmul.scalar.64.k"}}};
  for (const Case& c : cases) {
    SCOPED_TRACE("rows " + std::to_string(c.rows) + ", first layer " + std::to_string(c.sizes[0]));
    const int64_t in = c.sizes.front(), classes = c.sizes.back();
    Graph g;
    nn::Context ctx(g, 5);
    const NodeId x = g.input("x", {c.rows, in});
    const NodeId y = g.input("labels", {c.rows, classes});
    nn::Mlp mlp(ctx, "mlp", c.sizes);
    g.set_outputs({g.cross_entropy_loss(mlp(x), y)});
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> xv(size_t(c.rows * in)), yv(size_t(c.rows * classes), 0.0f);
    for (float& f : xv) f = u(rng);
    for (int64_t r = 0; r < c.rows; ++r) yv[size_t(r * classes + r % classes)] = 1.0f;
    static KernelCache cache;
    auto make = [&](OptimizerConfig o, bool keep) {
      SessionConfig cfg = test::gpu_config();
      cfg.optimizer = o;
      cfg.keep_gradients = keep;
      cfg.dump_plan.clear();
      std::shared_ptr<runtime::Device> dev(&test::gpu_device(), [](runtime::Device*) {});
      Session s = build_with(g, cfg, dev, {.cache = &cache});
      for (const auto& [name, w] : ctx.weights()) s.set_parameter(name, w);
      s.set_input("x", xv);
      s.set_input("labels", yv);
      return s;
    };
    {  // the kernels this case is for
      SessionConfig cfg = test::gpu_config();
      cfg.optimizer = rule(OptimizerKind::Adam, 0.05);
      const CompiledStep step = compile_step(g, cfg, device().caps());
      for (const std::string& want : c.fused_variants) {
        bool found = false;
        for (const GeneratedKernel& k : step.code)
          found = found || (k.variant.rfind(want, 0) == 0 &&
                            k.glsl.find("#define MN_UPDATE_PRELOAD") != std::string::npos);
        std::string variants;
        for (const GeneratedKernel& k : step.code) variants += " " + k.variant;
        EXPECT_TRUE(found) << "no " << want << " kernel with a fused update among" << variants;
      }
    }
    OptimizerConfig sgd = rule(OptimizerKind::Sgd, 0.05);
    sgd.momentum = 0.9;
    sgd.nesterov = true;
    sgd.weight_decay = 0.01;
    OptimizerConfig adam = rule(OptimizerKind::Adam, 0.05);
    adam.weight_decay = 0.01;
    OptimizerConfig adamw = rule(OptimizerKind::AdamW, 0.05);
    adamw.weight_decay = 0.1;
    for (const OptimizerConfig& o :
         {rule(OptimizerKind::Sgd, 0.05), sgd, adam, adamw, rule(OptimizerKind::LaProp, 0.05)}) {
      SCOPED_TRACE("optimizer " + std::to_string(int(o.kind)) + " momentum " + std::to_string(o.momentum));
      Session fused = make(o, false), kept = make(o, true);
      EXPECT_EQ(fused.memory_summary().gradients, 0u);  // every update fused: no gradient stored
      EXPECT_GT(kept.memory_summary().gradients, 0u);
      for (int step = 0; step < 10; ++step) {
        for (Session* s : {&fused, &kept}) {
          s->step();
          s->wait();
        }
        ASSERT_EQ(fused.read_output(0), kept.read_output(0)) << "loss of step " << step;
      }
      for (const auto& [name, w] : ctx.weights())
        EXPECT_EQ(fused.read_parameter(name), kept.read_parameter(name)) << name;
      for (const OptimizerStateInfo& st : kept.optimizer_state())
        EXPECT_EQ(fused.read_optimizer_state(st.name), kept.read_optimizer_state(st.name)) << st.name;
      EXPECT_EQ(fused.optimizer_step(), kept.optimizer_step());
      EXPECT_NO_THROW(kept.read_gradient("mlp.fc0.weight"));
      try {
        fused.read_gradient("mlp.fc0.weight");
        ADD_FAILURE() << "read_gradient of a fused update";
      } catch (const SessionError& e) {
        EXPECT_NE(std::string(e.what()).find("keep_gradients"), std::string::npos) << e.what();
      }
    }
  }
}

// The Trainer over sessions: Adam learns the blobs, and 2 × 4-row micro-batches train as 8-row batches.
TEST_F(TrainingGpu, TrainerWithAdamLearnsAndAccumulatesLikeTheBigBatch) {
  Trainer big(session(tiny(8), rule(OptimizerKind::Adam, 0.02)), quiet(8));
  Trainer acc(session(tiny(4), rule(OptimizerKind::Adam, 0.02, 0, 2)), quiet(4));
  big.init_parameters();
  acc.init_parameters();
  DataLoader l8(blobs(48), {.batch_size = 8, .shuffle = false});
  DataLoader l4(blobs(48), {.batch_size = 4, .shuffle = false});
  const History& h = big.train(l8, 4);
  acc.train(l4, 4);
  EXPECT_LT(h.epochs.back().train_loss, 0.5 * h.epochs.front().train_loss);
  EXPECT_EQ(big.update_step(), 24);
  EXPECT_EQ(acc.update_step(), 24);
  EXPECT_EQ(acc.target().optimizer_step(), 24u);
  for (const char* name : {"w1", "w2"})
    expect_near(acc.target().read_parameter(name), to_double(big.target().read_parameter(name)), 1e-4, name);
}

TEST_F(TrainingGpu, CheckpointRoundTripIntoSessions) {
  const fs::path path =
      fs::temp_directory_path() / ("meganeura-gpu-ckpt-" + std::to_string(::getpid()) + ".ckpt");
  Trainer t(session(tiny(8), rule(OptimizerKind::Adam, 0.01)), quiet(8));
  t.init_parameters();
  DataLoader l(blobs(48), {.batch_size = 8, .shuffle = true, .seed = 3});
  t.train(l, 1);
  t.save(path.string());
  Session fresh = session(tiny(8), rule(OptimizerKind::Adam, 0.01));
  SessionStore store(fresh);
  const RestoreReport r = restore_checkpoint(path.string(), store);
  EXPECT_EQ(r.parameters, 2u);
  EXPECT_EQ(r.optimizer_state, 4u);
  for (const char* name : {"w1", "w2"})
    EXPECT_EQ(fresh.read_parameter(name), t.target().read_parameter(name));
  for (const TensorInfo& s : t.target().optimizer_state())
    EXPECT_EQ(fresh.read_optimizer_state(s.name), t.target().read_optimizer_state(s.name)) << s.name;
  EXPECT_EQ(fresh.optimizer_step(), t.target().optimizer_step());
  Session infer = session(tiny(8, false), rule(OptimizerKind::None, 0), false);
  SessionStore istore(infer);
  const RestoreReport ri = restore_checkpoint(path.string(), istore);
  EXPECT_EQ(ri.skipped_optimizer_state, 4u);
  EXPECT_EQ(infer.read_parameter("w2"), t.target().read_parameter("w2"));

  // A truncated file changes nothing in the session.
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 10));
  Session other = session(tiny(8), rule(OptimizerKind::Adam, 0.01));
  const std::vector<float> before = other.read_parameter("w1");
  SessionStore ostore(other);
  EXPECT_THROW(restore_checkpoint(path.string(), ostore), CheckpointError);
  EXPECT_EQ(other.read_parameter("w1"), before);
  fs::remove(path);

  // Both continue alike: the restored step count carries Adam's bias corrections with it.
  Session& trained = static_cast<SessionTarget&>(t.target()).session();
  const Data d(8);
  for (Session* s : {&trained, &fresh}) {
    d.feed(*s, 0, 8);
    s->run();
  }
  for (const char* name : {"w1", "w2"})
    expect_near(fresh.read_parameter(name), to_double(trained.read_parameter(name)), 1e-6, name);
}

// The optimizer-kind check runs on the SessionStore path too: Adam moments never land in an AdamW or LaProp
// session (same moment names, other update rule), and a refused restore changes nothing there; a session
// saved through SessionStore names its optimizer, so the same refusal works the other way round.
TEST_F(TrainingGpu, SessionStoreRefusesStateOfAnotherOptimizerKind) {
  const fs::path path =
      fs::temp_directory_path() / ("meganeura-gpu-kind-" + std::to_string(::getpid()) + ".ckpt");
  Session adam = session(tiny(8), rule(OptimizerKind::Adam, 0.01));
  const Data d(8);
  d.feed(adam, 0, 8);
  adam.run();
  SessionStore astore(adam);
  save_checkpoint(path.string(), astore);
  EXPECT_EQ(inspect_checkpoint(path.string()).metadata.at("optimizer"), "adam");
  for (OptimizerKind other : {OptimizerKind::AdamW, OptimizerKind::LaProp}) {
    Session s = session(tiny(8), rule(other, 0.01));
    const std::vector<float> before = s.read_parameter("w1");
    const uint64_t step_before = s.optimizer_step();
    SessionStore store(s);
    try {
      restore_checkpoint(path.string(), store);
      ADD_FAILURE() << "restored Adam state into " << optimizer_name(other);
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("expected state of ") + optimizer_name(other) +
                                           ", got adam"),
                std::string::npos)
          << e.what();
    }
    EXPECT_EQ(s.read_parameter("w1"), before);
    EXPECT_EQ(s.optimizer_step(), step_before);
  }
  // The same kind restores.
  Session again = session(tiny(8), rule(OptimizerKind::Adam, 0.01));
  SessionStore store(again);
  EXPECT_EQ(restore_checkpoint(path.string(), store).optimizer_state, 4u);
  EXPECT_EQ(again.read_parameter("w1"), adam.read_parameter("w1"));
  fs::remove(path);
}
