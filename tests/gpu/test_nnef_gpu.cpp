// An imported NNEF model is an ordinary Graph: its float variables are parameters, so it fine-tunes. A
// two-layer MLP written as graph.nnef (linear → relu → linear, weights in .dat bytes) gets a cross-entropy
// loss appended and trains with SGD on the GPU; the loss must fall and the weights must move. (Models
// converted by nnef-tools: tests/oracle/test_nnef_models.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "gpu_fixture.hpp"
#include "gpu_opcheck.hpp"
#include "meganeura/nnef/nnef.hpp"
#include "nnef_writer.hpp"

namespace meganeura::test {
namespace {

class NnefGpu : public GpuTest {};

TEST_F(NnefGpu, ImportedMlpFineTunes) {
  std::vector<float> w1(16 * 4), w2(3 * 16);
  for (size_t i = 0; i < w1.size(); ++i) w1[i] = 0.3f * std::sin(1.3f * float(i) + 0.5f);
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = 0.3f * std::cos(0.7f * float(i));
  const std::map<std::string, std::vector<std::byte>> files = {
      {"fc1/weight", nnef_writer::f32({16, 4}, w1)},
      {"fc1/bias", nnef_writer::f32({1, 16}, std::vector<float>(16, 0.1f))},
      {"fc2/weight", nnef_writer::f32({3, 16}, w2)},
      {"fc2/bias", nnef_writer::f32({1, 3}, {0, 0, 0})}};
  const std::string text = R"(
version 1.0;
graph mlp( x ) -> ( logits )
{
    x = external<scalar>(shape = [6, 4]);
    w1 = variable<scalar>(shape = [16, 4], label = 'fc1/weight');
    b1 = variable<scalar>(shape = [1, 16], label = 'fc1/bias');
    w2 = variable<scalar>(shape = [3, 16], label = 'fc2/weight');
    b2 = variable<scalar>(shape = [1, 3], label = 'fc2/bias');
    h = relu(linear(x, w1, b1));
    logits = linear(h, w2, b2);
}
)";
  NnefModel m = load_nnef_text(
      text, "mlp.nnef",
      [&](const std::string& label) -> std::optional<std::vector<std::byte>> { return files.at(label); });
  ASSERT_EQ(m.parameters.size(), 4u);
  Graph& g = m.graph;
  const NodeId logits = g.outputs()[0];
  g.set_outputs({g.cross_entropy_loss(logits, g.input("labels", {6, 3}))});

  SessionConfig config = session_config(true);
  config.optimizer.kind = OptimizerKind::Sgd;
  config.optimizer.learning_rate = 0.5;
  Session s = build_with(g, config, shared_device(), {});
  for (const auto& [name, values] : m.parameters) s.set_parameter(name, values);
  std::vector<float> x, labels;
  for (int i = 0; i < 6; ++i) {
    const int c = i % 3;
    for (int d = 0; d < 4; ++d) x.push_back((d == c ? 2.0f : 0.0f) + 0.2f * std::sin(1.1f * float(i + d)));
    for (int k = 0; k < 3; ++k) labels.push_back(k == c ? 1.0f : 0.0f);
  }
  s.set_input("x", x);
  s.set_input("labels", labels);
  s.run();
  const float first = s.read_output(0)[0];
  float last = first;
  for (int step = 0; step < 40; ++step) {
    s.run();
    last = s.read_output(0)[0];
  }
  EXPECT_TRUE(std::isfinite(first));
  EXPECT_LT(last, 0.5f * first) << "loss " << first << " -> " << last;
  const std::vector<float> trained = s.read_parameter("fc1/weight");
  double moved = 0;
  for (size_t i = 0; i < w1.size(); ++i) moved += std::fabs(trained[i] - w1[i]);
  EXPECT_GT(moved, 1e-3);
}

}  // namespace
}  // namespace meganeura::test
