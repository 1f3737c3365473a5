// Every update rule against Debian's torch for 20 updates, run through a real GPU session (lavapipe in CI):
// SGD, momentum (with weight decay), Nesterov, Adam (L2 weight decay), AdamW, LaProp (decoupled weight
// decay; torch has no LaProp, so make_reference.py writes the paper's update in torch ops), clipping by
// global norm, and gradient accumulation (two 4-row micro-batches per update against torch accumulating
// the same halves). The model is a 5-8-3 tanh MLP with biases and a cross-entropy loss, on a new batch
// each update, so that any difference in the rule compounds along the trajectory.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "gpu/gpu_fixture.hpp"
#include "meganeura/meganeura.hpp"
#include "meganeura/session/pipeline.hpp"
#include "oracle/oracle.hpp"

using namespace meganeura;
using json = nlohmann::json;

namespace {

class OptimizersTorch : public test::GpuTest {};

OptimizerConfig config_of(const json& c) {
  const json& cfg = c.at("config");
  OptimizerConfig o;
  const std::string kind = c.at("optimizer");
  o.kind = kind == "sgd"     ? OptimizerKind::Sgd
           : kind == "adam"  ? OptimizerKind::Adam
           : kind == "adamw" ? OptimizerKind::AdamW
                             : OptimizerKind::LaProp;
  o.learning_rate = cfg.at("lr");
  o.momentum = cfg.value("momentum", 0.0);
  o.nesterov = cfg.value("nesterov", false);
  o.weight_decay = cfg.value("weight_decay", 0.0);
  o.clip_grad_norm = cfg.value("clip", 0.0);
  o.grad_accumulation = cfg.value("accumulation", 1);
  return o;
}

// |got - want| <= rtol · max(|want|, 1e-2 · the tensor's largest magnitude).
::testing::AssertionResult close(const std::vector<float>& got, const std::vector<double>& want,
                                 double rtol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= rtol * std::max(std::abs(want[i]), 1e-2 * scale)))
      return ::testing::AssertionFailure() << "[" << i << "]: gpu " << got[i] << ", torch " << want[i];
  return ::testing::AssertionSuccess();
}

}  // namespace

TEST_F(OptimizersTorch, TwentyUpdatesOfEveryRuleMatchTorch) {
  const json& doc = test::oracle().at("optimizers");
  const int64_t steps = doc.at("steps"), B = doc.at("batch"), IN = doc.at("in"), HID = doc.at("hidden");
  const int64_t OUT = doc.at("out");
  const std::vector<double> xs = doc.at("x").get<std::vector<double>>();
  const std::vector<double> ys = doc.at("labels").get<std::vector<double>>();
  KernelCache cache;
  std::shared_ptr<runtime::Device> dev(&test::gpu_device(), [](runtime::Device*) {});
  std::set<std::string> seen;
  for (const json& c : doc.at("cases")) {
    const std::string name = c.at("name");
    SCOPED_TRACE(name);
    seen.insert(name);
    const OptimizerConfig o = config_of(c);
    const int64_t k = o.grad_accumulation, rows = B / k;
    Graph g;
    const NodeId x = g.input("x", {rows, IN});
    const NodeId h = g.tanh(g.add(g.matmul(x, g.parameter("w1", {IN, HID})), g.parameter("b1", {HID})));
    const NodeId z = g.add(g.matmul(h, g.parameter("w2", {HID, OUT})), g.parameter("b2", {OUT}));
    g.set_outputs({g.cross_entropy_loss(z, g.input("labels", {rows, OUT}))});
    SessionConfig cfg = test::gpu_config();
    cfg.optimizer = o;
    cfg.dump_plan.clear();
    Session s = build_with(g, cfg, dev, {.cache = &cache});
    for (const auto& [p, v] : doc.at("init").items()) {
      const std::vector<double> d = v.at("data").get<std::vector<double>>();
      s.set_parameter(p, std::vector<float>(d.begin(), d.end()));
    }
    for (int64_t t = 0; t < steps; ++t) {
      for (int64_t part = 0; part < k; ++part) {
        const int64_t first = t * B + part * rows;
        std::vector<float> xb(xs.begin() + first * IN, xs.begin() + (first + rows) * IN),
            yb(size_t(rows * OUT), 0.0f);
        for (int64_t r = 0; r < rows; ++r) yb[size_t(r * OUT + int64_t(ys[size_t(first + r)]))] = 1.0f;
        s.set_input("x", xb);
        s.set_input("labels", yb);
        s.run();
      }
    }
    EXPECT_EQ(s.optimizer_step(), uint64_t(steps));
    if (o.clip_grad_norm > 0) {
      EXPECT_GT(c.at("clipped_steps").get<int>(), 0) << "the clip never binds";
    }
    for (const auto& [p, v] : c.at("final").items()) {
      const std::vector<double> want = v.get<std::vector<double>>();
      const std::vector<double> init = doc.at("init").at(p).at("data").get<std::vector<double>>();
      EXPECT_TRUE(close(s.read_parameter(p), want, 5e-5)) << p;
      EXPECT_FALSE(close(std::vector<float>(init.begin(), init.end()), want, 2e-4)) << p << " did not move";
    }
  }
  for (const char* name : {"sgd", "sgd_momentum_wd", "sgd_nesterov", "adam_wd", "adamw", "laprop_wd",
                           "sgd_clip", "adam_clip", "sgd_momentum_accumulation", "adamw_clip_accumulation"})
    EXPECT_TRUE(seen.count(name)) << name << " has no torch case";
}
