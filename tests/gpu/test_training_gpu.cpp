// Training through a real Session on the first Vulkan device (lavapipe in CI): the fused update against
// the host update, optimizer memory only when needed, and checkpoints into sessions.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "meganeura/meganeura.hpp"

namespace fs = std::filesystem;
using namespace meganeura;

namespace {

constexpr int64_t kB = 8;

Graph tiny(bool with_loss) {
  Graph g;
  const NodeId x = g.input("x", {kB, 4});
  const NodeId h = g.relu(g.matmul(x, g.parameter("w1", {4, 16})));
  const NodeId z = g.named(g.matmul(h, g.parameter("w2", {16, 3})), "logits");
  if (with_loss) g.set_outputs({g.cross_entropy_loss(z, g.input("labels", {kB, 3}))});
  else g.set_outputs({z});
  return g;
}

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

Session session_with(OptimizerKind kind, double lr = 0.1) {
  SessionConfig cfg = SessionConfig::from_env();
  cfg.training = true;
  cfg.optimizer.kind = kind;
  cfg.optimizer.learning_rate = lr;
  return build(tiny(true), cfg);
}

TrainConfig quiet(OptimizerKind kind, double lr) {
  TrainConfig c;
  c.batch_size = kB;
  c.epochs = 2;
  c.optimizer = OptimizerConfig{};
  c.optimizer->kind = kind;
  c.optimizer->learning_rate = lr;
  c.progress = ProgressMode::Off;
  return c;
}

}  // namespace

TEST(TrainingGpu, FusedSgdMatchesHostSgd) {
  Trainer fused(session_with(OptimizerKind::Sgd), quiet(OptimizerKind::Sgd, 0.1));
  Trainer host(session_with(OptimizerKind::None), quiet(OptimizerKind::Sgd, 0.1));
  EXPECT_TRUE(host.host_update());
  EXPECT_FALSE(fused.host_update());
  fused.init_parameters();
  host.init_parameters();
  DataLoader a(blobs(48), {.batch_size = kB, .shuffle = true, .seed = 2});
  DataLoader b(blobs(48), {.batch_size = kB, .shuffle = true, .seed = 2});
  fused.train(a, 2);
  host.train(b, 2);
  for (const char* name : {"w1", "w2"}) {
    const auto p = fused.target().read_parameter(name), q = host.target().read_parameter(name);
    ASSERT_EQ(p.size(), q.size());
    for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(p[i], q[i], 1e-5) << name << "[" << i << "]";
  }
  EXPECT_LT(fused.history().epochs.back().train_loss, fused.history().epochs.front().train_loss);
}

TEST(TrainingGpu, OptimizerMemoryOnlyWhenNeeded) {
  const uint64_t param_bytes = (4 * 16 + 16 * 3) * 4;
  EXPECT_EQ(session_with(OptimizerKind::Sgd).memory_summary().optimizer_state, 0u);
  EXPECT_EQ(session_with(OptimizerKind::None).memory_summary().optimizer_state, 0u);
  EXPECT_EQ(session_with(OptimizerKind::Adam).memory_summary().optimizer_state, 2 * param_bytes);
  Session infer = build_inference_session(tiny(false));
  EXPECT_EQ(infer.memory_summary().gradients, 0u);
  EXPECT_EQ(infer.memory_summary().optimizer_state, 0u);
}

TEST(TrainingGpu, CheckpointRoundTripIntoSessions) {
  const fs::path path = fs::temp_directory_path() / ("meganeura-gpu-ckpt-" + std::to_string(::getpid()) + ".ckpt");
  Trainer t(session_with(OptimizerKind::Adam, 0.01), quiet(OptimizerKind::Adam, 0.01));
  t.init_parameters();
  DataLoader l(blobs(48), {.batch_size = kB, .shuffle = true, .seed = 3});
  t.train(l, 1);
  t.save(path.string());
  Session fresh = session_with(OptimizerKind::Adam, 0.01);
  SessionStore store(fresh);
  const RestoreReport r = restore_checkpoint(path.string(), store);
  EXPECT_EQ(r.parameters, 2u);
  EXPECT_EQ(r.optimizer_state, 4u);
  for (const char* name : {"w1", "w2"}) EXPECT_EQ(fresh.read_parameter(name), t.target().read_parameter(name));
  for (const TensorInfo& s : t.target().optimizer_state())
    EXPECT_EQ(fresh.read_optimizer_state(s.name), t.target().read_optimizer_state(s.name)) << s.name;
  EXPECT_EQ(fresh.optimizer_step(), t.target().optimizer_step());

  Session infer = build_inference_session(tiny(false));
  SessionStore istore(infer);
  const RestoreReport ri = restore_checkpoint(path.string(), istore);
  EXPECT_EQ(ri.skipped_optimizer_state, 4u);
  EXPECT_EQ(infer.read_parameter("w2"), t.target().read_parameter("w2"));

  // A truncated file changes nothing in the session.
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 10));
  Session other = session_with(OptimizerKind::Adam, 0.01);
  const std::vector<float> before = other.read_parameter("w1");
  SessionStore ostore(other);
  EXPECT_THROW(restore_checkpoint(path.string(), ostore), CheckpointError);
  EXPECT_EQ(other.read_parameter("w1"), before);
  fs::remove(path);
}
