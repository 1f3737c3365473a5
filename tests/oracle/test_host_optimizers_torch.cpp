// The host optimizers against Debian's torch (CPU) for 20 steps, with gradients that depend on the
// parameters so that any difference in the update rule compounds along the trajectory.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "meganeura/train/host_optimizer.hpp"

using namespace meganeura;

namespace {

constexpr int kSteps = 20;
const std::vector<float> kInit = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f};

struct Case {
  const char* name;
  OptimizerConfig cfg;
};

std::vector<Case> cases() {
  auto make = [](OptimizerKind k, double lr, double momentum, bool nesterov, double wd) {
    OptimizerConfig c;
    c.kind = k;
    c.learning_rate = lr;
    c.momentum = momentum;
    c.nesterov = nesterov;
    c.weight_decay = wd;
    return c;
  };
  return {{"sgd", make(OptimizerKind::Sgd, 0.1, 0, false, 0)},
          {"sgd_momentum_wd", make(OptimizerKind::Sgd, 0.1, 0.9, false, 0.01)},
          {"sgd_nesterov", make(OptimizerKind::Sgd, 0.05, 0.9, true, 0)},
          {"adam_wd", make(OptimizerKind::Adam, 0.01, 0, false, 0.01)},
          {"adamw", make(OptimizerKind::AdamW, 0.01, 0, false, 0.1)},
          {"laprop", make(OptimizerKind::LaProp, 0.01, 0, false, 0)}};
}

// torch for SGD/Adam/AdamW; LaProp is not in torch, so the script writes the paper's update in torch ops.
const char* kScript = R"PY(
import json, math, torch
init = [0.5, -1.0, 0.25, 2.0, -0.75]
def grad(p, t): return torch.sin(3.0 * p + 0.1 * t)
def run(make):
    p = torch.tensor(init, dtype=torch.float32, requires_grad=True)
    opt = make([p])
    for t in range(1, 21):
        p.grad = grad(p.detach(), t)
        opt.step()
    return p.detach().tolist()
def laprop(lr, b1=0.9, b2=0.999, eps=1e-8):
    p = torch.tensor(init, dtype=torch.float32)
    m = torch.zeros_like(p); v = torch.zeros_like(p)
    for t in range(1, 21):
        g = grad(p, t)
        v = b2 * v + (1 - b2) * g * g
        m = b1 * m + (1 - b1) * g / ((v / (1 - b2 ** t)).sqrt() + eps)
        p = p - lr * m / (1 - b1 ** t)
    return p.tolist()
out = {
  "sgd": run(lambda ps: torch.optim.SGD(ps, lr=0.1)),
  "sgd_momentum_wd": run(lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01)),
  "sgd_nesterov": run(lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True)),
  "adam_wd": run(lambda ps: torch.optim.Adam(ps, lr=0.01, weight_decay=0.01)),
  "adamw": run(lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1)),
  "laprop": laprop(0.01),
}
print(json.dumps(out))
)PY";

nlohmann::json torch_results() {
  const auto script = std::filesystem::temp_directory_path() / ("meganeura-optim-" + std::to_string(::getpid()) + ".py");
  std::ofstream(script) << kScript;
  std::FILE* p = ::popen(("/usr/bin/python3 " + script.string() + " 2>&1").c_str(), "r");
  std::string text;
  char buf[4096];
  while (p && std::fgets(buf, sizeof buf, p)) text += buf;
  const int rc = p ? ::pclose(p) : -1;
  std::filesystem::remove(script);
  EXPECT_EQ(rc, 0) << text;
  return nlohmann::json::parse(text.substr(text.find('{')));
}

}  // namespace

TEST(HostOptimizerOracle, TwentyStepsMatchTorch) {
  const nlohmann::json ref = torch_results();
  const std::vector<TensorInfo> params = {{"p", TensorRole::Parameter, DType::F32, {5}}};
  for (const Case& c : cases()) {
    HostOptimizer opt(c.cfg, params);
    std::vector<float> p = kInit;
    for (int t = 1; t <= kSteps; ++t) {
      std::vector<float> g(p.size());
      for (size_t i = 0; i < p.size(); ++i) g[i] = std::sin(3.0f * p[i] + 0.1f * static_cast<float>(t));
      opt.begin_step();
      opt.update("p", p, g, c.cfg.learning_rate);
    }
    const std::vector<double> want = ref.at(c.name).get<std::vector<double>>();
    ASSERT_EQ(want.size(), p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      EXPECT_NEAR(p[i], want[i], 2e-5 * (1 + std::abs(want[i]))) << c.name << " element " << i;
      EXPECT_NE(p[i], kInit[i]) << c.name;  // the trajectory moved
    }
  }
}
