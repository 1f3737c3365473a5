// The Trainer end to end on a real graph: autodiff and the CPU reference interpreter compute the
// gradients, the host optimizer updates. No device.
#include <gtest/gtest.h>

#include <cmath>

#include "meganeura/train/reference_target.hpp"
#include "meganeura/train/trainer.hpp"

using namespace meganeura;

namespace {

Graph mlp(int64_t batch) {
  Graph g;
  const NodeId x = g.input("x", {batch, 4});
  const NodeId h = g.relu(g.matmul(x, g.parameter("w1", {4, 16})));
  const NodeId z = g.matmul(h, g.parameter("w2", {16, 3}));
  g.set_outputs({g.cross_entropy_loss(z, g.input("labels", {batch, 3}))});
  return g;
}

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

TrainConfig adam(int64_t batch, double lr) {
  TrainConfig c;
  c.batch_size = batch;
  c.optimizer = OptimizerConfig{};
  c.optimizer->kind = OptimizerKind::Adam;
  c.optimizer->learning_rate = lr;
  c.progress = ProgressMode::Off;
  return c;
}

}  // namespace

TEST(TrainerReference, AdamLearnsSeparableBlobs) {
  Trainer t(std::make_unique<ReferenceTarget>(mlp(8)), adam(8, 0.05));
  t.init_parameters();
  DataLoader l(blobs(48), {.batch_size = 8, .shuffle = true, .seed = 4});
  const History& h = t.train(l, 30);
  EXPECT_GT(h.epochs.front().train_loss, 0.5);
  EXPECT_LT(h.epochs.back().train_loss, 0.05);
}

TEST(TrainerReference, AccumulatedMicroBatchesEqualTheBigBatch) {
  Trainer big(std::make_unique<ReferenceTarget>(mlp(8)), adam(8, 0.01));
  TrainConfig c = adam(4, 0.01);
  c.grad_accumulation = 2;
  Trainer acc(std::make_unique<ReferenceTarget>(mlp(4)), c);
  big.init_parameters();
  acc.init_parameters();
  DataLoader l8(blobs(24), {.batch_size = 8, .shuffle = false});
  DataLoader l4(blobs(24), {.batch_size = 4, .shuffle = false});
  big.train(l8, 2);
  acc.train(l4, 2);
  for (const char* name : {"w1", "w2"}) {
    const auto a = big.target().read_parameter(name), b = acc.target().read_parameter(name);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << name << "[" << i << "]";
  }
}
