// A small CNN (two conv + max-pool stages, two linear layers) built from nn layers trains end to end on the
// GPU (lavapipe in CI) on real Fashion-MNIST: forward, backward through conv/pool and the fused Adam update
// in one recorded step, with the loss clearly falling within a short run.
#include <gtest/gtest.h>

#include <numeric>

#include "gpu_opcheck.hpp"
#include "meganeura/data/loader.hpp"
#include "meganeura/meganeura.hpp"
#include "meganeura/nn/nn.hpp"

using namespace meganeura;
using namespace meganeura::test;

namespace {

class CnnGpu : public GpuTest {};

constexpr int64_t kBatch = 32;
constexpr int kSteps = 40;

}  // namespace

TEST_F(CnnGpu, LossFallsOnFashionMnist) {
  ImageSet train = load_mnist(test::dataset_dir("fashion-mnist").string(), Split::Train);
  const int64_t n = kBatch * kSteps;
  ASSERT_GE(train.count, n);
  train.count = n;
  train.images.resize(size_t(n * 784));
  train.labels.resize(size_t(n));
  auto data = std::make_shared<TensorDataset>(to_dataset(train, LabelEncoding::OneHot));
  DataLoader loader(data, {.batch_size = kBatch, .shuffle = true, .seed = 1, .drop_last = true});

  Graph g;
  nn::Context ctx(g, 5);
  nn::Conv2d conv1(ctx, "conv1", 1, 8, 3, 1, 1);
  nn::MaxPool2d pool1(ctx, "pool1", 2);
  nn::Conv2d conv2(ctx, "conv2", 8, 16, 3, 1, 1);
  nn::MaxPool2d pool2(ctx, "pool2", 2);
  nn::Linear fc1(ctx, "fc1", 16 * 7 * 7, 32);
  nn::Linear fc2(ctx, "fc2", 32, 10);
  NodeId t = g.reshape(g.input("x", {kBatch, 784}), {kBatch, 1, 28, 28});
  t = pool1(g.relu(conv1(t)));
  t = pool2(g.relu(conv2(t)));
  t = g.relu(fc1(g.reshape(t, {kBatch, 16 * 7 * 7})));
  const NodeId logits = fc2(t);
  g.set_outputs({g.cross_entropy_loss(logits, g.input("labels", {kBatch, 10}))});

  SessionConfig cfg = session_config(true);
  cfg.optimizer.kind = OptimizerKind::Adam;
  cfg.optimizer.learning_rate = 2e-3;
  Session s = build(g, cfg, shared_device());
  for (const auto& [name, values] : ctx.weights()) s.set_parameter(name, values);

  std::vector<double> losses;
  while (auto batch = loader.next()) {
    s.set_input("x", batch->at("x").f32);
    s.set_input("labels", batch->at("labels").f32);
    s.run();
    const float loss = s.read_output(0).at(0);
    ASSERT_TRUE(std::isfinite(loss)) << "step " << losses.size();
    losses.push_back(loss);
  }
  ASSERT_EQ(losses.size(), size_t(kSteps));
  const double first = std::accumulate(losses.begin(), losses.begin() + 10, 0.0) / 10;
  const double last = std::accumulate(losses.end() - 10, losses.end(), 0.0) / 10;
  // Ten classes start near ln 10 = 2.30; forty Adam steps on real images bring the mean well below it.
  EXPECT_GT(first, 1.8);
  EXPECT_LT(last, 0.75 * first) << "first 10 steps " << first << ", last 10 steps " << last;
}
