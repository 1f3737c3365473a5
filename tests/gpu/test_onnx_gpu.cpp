// An imported ONNX model is an ordinary Graph: its initializers are parameters, so it fine-tunes. A two-layer
// MLP written as ONNX (Gemm → Relu → Gemm) gets a cross-entropy loss appended and trains with SGD on the GPU;
// the loss must fall and the weights must move. (Forward conformance:
// tests/oracle/test_onnx_conformance.cpp.)
#include <gtest/gtest.h>

#include <cmath>

#include "gpu_fixture.hpp"
#include "gpu_opcheck.hpp"
#include "meganeura/onnx/onnx.hpp"
#include "onnx_writer.hpp"

namespace meganeura::test {
namespace {

using namespace onnx_writer;

class OnnxGpu : public GpuTest {};

TEST_F(OnnxGpu, ImportedMlpFineTunes) {
  std::vector<float> w1(16 * 4), w2(3 * 16);
  for (size_t i = 0; i < w1.size(); ++i) w1[i] = 0.3f * std::sin(1.3f * float(i) + 0.5f);
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = 0.3f * std::cos(0.7f * float(i));
  const std::string bytes = model(
      {node("Gemm", {"x", "fc1.weight", "fc1.bias"}, {"h"}, "fc1", {attr_int("transB", 1)}),
       node("Relu", {"h"}, {"a"}, "act"),
       node("Gemm", {"a", "fc2.weight", "fc2.bias"}, {"logits"}, "fc2", {attr_int("transB", 1)})},
      {tensor_f32("fc1.weight", {16, 4}, w1), tensor_f32("fc1.bias", {16}, std::vector<float>(16, 0.1f)),
       tensor_f32("fc2.weight", {3, 16}, w2), tensor_f32("fc2.bias", {3}, {0, 0, 0})},
      {value_info("x", 1, {"batch", "4"})}, {value_info("logits", 1, {"batch", "3"})});
  OnnxOptions options;
  options.dims["batch"] = 6;
  OnnxModel m = load_onnx_bytes(as_bytes(bytes), "mlp", options);
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
  const std::vector<float> trained = s.read_parameter("fc1.weight");
  double moved = 0;
  for (size_t i = 0; i < w1.size(); ++i) moved += std::fabs(trained[i] - w1[i]);
  EXPECT_GT(moved, 1e-3);
}

}  // namespace
}  // namespace meganeura::test
