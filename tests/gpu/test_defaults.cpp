// Defaults that work: a session starts from seeded parameters by their layer's rule (SessionConfig::init), so
// the product description's snippet — Graph, build_session, Trainer with TrainConfig's defaults, train —
// learns as written; zeros on request; parameters bound to another session keep that session's values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "gpu_fixture.hpp"
#include "gpu_opcheck.hpp"
#include "meganeura/meganeura.hpp"
#include "meganeura/nn/nn.hpp"

using namespace meganeura;

namespace {

class Defaults : public test::GpuTest {};

std::shared_ptr<TensorDataset> ten_classes(int n) {
  auto ds = std::make_shared<TensorDataset>();
  std::vector<float> x, y;
  for (int i = 0; i < n; ++i) {
    const int c = i % 10;
    // Class c lights up pixels [78c, 78c + 78) of 784, over a little deterministic noise.
    for (int p = 0; p < 784; ++p)
      x.push_back((p / 78 == c ? 1.0f : 0.0f) + 0.1f * std::sin(0.37f * float(i * 784 + p)));
    for (int k = 0; k < 10; ++k) y.push_back(k == c ? 1.0f : 0.0f);
  }
  ds->add_f32("x", {784}, x);
  ds->add_f32("labels", {10}, y);
  return ds;
}

float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float f : v) m = std::max(m, std::fabs(f));
  return m;
}

}  // namespace

// The snippet, line for line; the only additions are the data and the look at the losses.
TEST_F(Defaults, ProductSnippetLearnsAsWritten) {
  Graph g;
  const NodeId x = g.input("x", {32, 784});
  const NodeId labels = g.input("labels", {32, 10});

  const NodeId w1 = g.parameter("w1", {784, 128});
  const NodeId h = g.relu(g.matmul(x, w1));
  const NodeId w2 = g.parameter("w2", {128, 10});
  const NodeId logits = g.matmul(h, w2);

  const NodeId loss = g.cross_entropy_loss(logits, labels);
  g.set_outputs({loss});

  Session session = build_session(g);
  TrainConfig config;  // TrainConfig::default()
  config.progress = ProgressMode::Off;
  Trainer trainer(std::move(session), config);
  DataLoader data(ten_classes(320), LoaderOptions{});
  const History& history = trainer.train(data, /* epochs = */ 10);

  ASSERT_EQ(history.epochs.size(), 10u);
  const double first = history.epochs.front().train_loss, last = history.epochs.back().train_loss;
  // All-zero parameters give exactly ln 10 for every step and never move (the bug this guards against).
  EXPECT_GT(std::fabs(first - std::log(10.0)), 1e-6)
      << "the first epoch's loss is that of all-zero parameters";
  // SGD at 0.01 over 100 steps: a float64 numpy model of this run goes from 2.27 to 1.32.
  EXPECT_LT(last, 0.8 * first) << "first epoch " << first << ", last " << last;
}

TEST_F(Defaults, LayerRulesSeedsAndZerosOnRequest) {
  Graph g;
  nn::Context ctx(g, 5);
  const NodeId x = g.input("x", {2, 64});
  nn::Linear fc(ctx, "fc", 64, 32);            // Kaiming-uniform weight, bias U(+-1/sqrt(64))
  const NodeId w = g.parameter("w", {32, 8});  // a bare parameter: the default rule
  const NodeId ln = g.parameter("ln.weight", {8});
  g.set_outputs({g.mul(g.matmul(fc(x), w), ln)});

  SessionConfig c = test::gpu_config();
  c.training = false;
  Session s = build(g, c, test::shared_device());
  const std::vector<float> fw = s.read_parameter("fc.weight"), fb = s.read_parameter("fc.bias");
  const float kaiming = std::sqrt(6.0f / 64.0f), torch_bias = 1.0f / 8.0f, bare = 1.0f / std::sqrt(32.0f);
  EXPECT_LE(max_abs(fw), kaiming);
  EXPECT_GT(max_abs(fw), 0.9f * kaiming);  // 2048 uniform draws reach close to the bound
  EXPECT_LE(max_abs(fb), torch_bias);
  EXPECT_GT(max_abs(fb), 0.5f * torch_bias);
  const std::vector<float> bw = s.read_parameter("w");
  EXPECT_LE(max_abs(bw), bare);
  EXPECT_GT(max_abs(bw), 0.9f * bare);
  for (float v : s.read_parameter("ln.weight")) EXPECT_EQ(v, 1.0f);  // a norm scale starts at one
  EXPECT_EQ(fw, ctx.weights().at("fc.weight"));  // the values the layer hands out for manual upload

  // The layer's seed (5) holds whatever the session's; a bare parameter follows SessionConfig::seed.
  c.seed = 99;
  Session t = build(g, c, test::shared_device());
  EXPECT_EQ(t.read_parameter("fc.weight"), fw);
  EXPECT_NE(t.read_parameter("w"), bw);

  c.init = ParameterInit::Zeros;
  Session z = build(g, c, test::shared_device());
  for (const char* name : {"fc.weight", "fc.bias", "w", "ln.weight"})
    EXPECT_EQ(max_abs(z.read_parameter(name)), 0.0f) << name;
}

TEST_F(Defaults, SharedParametersKeepTheOtherSessionsValues) {
  Graph a;
  a.set_outputs({a.matmul(a.input("x", {1, 4}), a.parameter("w", {4, 4}))});
  Graph b;
  b.set_outputs({b.matmul(b.input("x", {2, 4}), b.parameter("w", {4, 4}))});
  SessionConfig c = test::gpu_config();
  c.training = false;
  Session first = build(a, c, test::shared_device());
  const std::vector<float> sevens(16, 7.0f);
  first.set_parameter("w", sevens);
  Session second = build(b, c, first);
  EXPECT_EQ(second.read_parameter("w"), sevens);
  EXPECT_EQ(first.read_parameter("w"), sevens);
}
