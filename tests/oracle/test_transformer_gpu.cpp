// Issue 5, item 4: nn::TransformerBlock (RMSNorm, causal grouped-query attention with RoPE, SwiGLU
// feed-forward, residuals) compiled into one GPU training step: its output and the gradients of the input
// and of every parameter against torch (tests/oracle/make_reference.py) and against the float64 CPU
// reference of the same differentiated graph. Runs on the first Vulkan device (lavapipe in CI) with the
// validation layer as the environment says; any validation message fails the test.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpu/gpu_fixture.hpp"
#include "meganeura/autodiff/autodiff.hpp"
#include "meganeura/nn/nn.hpp"
#include "meganeura/reference/interpreter.hpp"
#include "meganeura/session/pipeline.hpp"
#include "oracle/oracle.hpp"

using namespace meganeura;
using json = nlohmann::json;

namespace {

class TransformerGpu : public test::GpuTest {};

// |gpu - want| <= atol + rtol * max(|want|, 1e-3 * max|want|): float32 against float64.
::testing::AssertionResult close_f32(const std::vector<float>& got, const std::vector<double>& want,
                                     const std::string& what) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs " << want.size();
  double scale = 0.0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(double(got[i]) - want[i]);
    if (!(err <= 1e-6 + 2e-4 * std::max(std::abs(want[i]), 1e-3 * scale)))
      return ::testing::AssertionFailure()
             << what << "[" << i << "]: gpu " << got[i] << ", want " << want[i] << " (|err| " << err << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace

TEST_F(TransformerGpu, BlockMatchesTorchAndReference) {
  const json& t = test::oracle().at("transformer_block");
  const json& cfg = t.at("config");
  const int64_t B = cfg.at("batch"), S = cfg.at("seq"), D = cfg.at("dim");
  Graph g;
  nn::Context ctx(g, 0);
  nn::AttentionConfig ac;
  ac.dim = D;
  ac.heads = cfg.at("heads");
  ac.kv_heads = cfg.at("kv_heads");
  ac.rope_theta = cfg.at("theta");
  nn::TransformerBlock blk(ctx, "blk", ac, cfg.at("ffn_hidden").get<int64_t>(), cfg.at("eps").get<double>());
  const NodeId x = g.parameter("x", {B, S, D});
  const NodeId y = g.named(blk(x), "y");
  const NodeId loss = g.sum(g.mul(y, g.input("upstream", {B, S, D})));
  g.set_outputs({loss, y});

  SessionConfig sc = test::gpu_config();
  sc.training = true;
  sc.optimizer.kind = OptimizerKind::None;
  sc.dump_plan.clear();
  // the step really runs flash attention (forward with its log-sum-exp, dQ, dK with dV)
  const CompiledStep step = compile_step(g, sc, test::gpu_device().caps());
  EXPECT_EQ(step.kernels.count(Archetype::Attention), 3u) << step.kernels.to_text(step.graph);
  Session s = build(g, sc, std::shared_ptr<runtime::Device>(&test::gpu_device(), [](runtime::Device*) {}));

  reference::Feeds feeds{{"x", HostTensor({B, S, D}, t.at("x").get<std::vector<double>>())},
                         {"upstream", HostTensor({B, S, D}, t.at("upstream").get<std::vector<double>>())}};
  for (const auto& [name, p] : t.at("params").items())
    feeds[name] = HostTensor(p.at("shape").get<Shape>(), p.at("data").get<std::vector<double>>());
  for (auto& [name, v] : feeds) {
    std::vector<float> f(v.data.begin(), v.data.end());
    for (size_t i = 0; i < f.size(); ++i) v.data[i] = double(f[i]);  // both sides see the same f32 inputs
    if (name == "upstream")
      s.set_input(name, f);
    else
      s.set_parameter(name, f);
  }
  s.run();

  // the CPU reference of the same graph, from the same f32-rounded inputs
  Graph dg = differentiate(g, loss);
  std::vector<NodeId> want_nodes{y};
  std::vector<std::string> names;
  for (const auto& [name, _] : t.at("grads").items()) {
    want_nodes.push_back(*dg.gradient(*g.find(name)));
    names.push_back(name);
  }
  const std::vector<HostTensor> ref = reference::evaluate(dg, feeds, want_nodes);

  const std::vector<float> out = s.read_output(1);
  EXPECT_TRUE(close_f32(out, t.at("output").get<std::vector<double>>(), "block output vs torch"));
  EXPECT_TRUE(close_f32(out, ref[0].data, "block output vs reference"));
  for (size_t i = 0; i < names.size(); ++i) {
    const std::vector<float> gr = s.read_gradient(names[i]);
    EXPECT_TRUE(close_f32(gr, t.at("grads").at(names[i]).get<std::vector<double>>(),
                          "grad " + names[i] + " vs torch"));
    EXPECT_TRUE(close_f32(gr, ref[i + 1].data, "grad " + names[i] + " vs reference"));
  }
}
