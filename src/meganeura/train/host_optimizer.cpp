#include "meganeura/train/host_optimizer.hpp"

#include <cmath>

#include "meganeura/core/error.hpp"

namespace meganeura {

HostOptimizer::HostOptimizer(OptimizerConfig config, const std::vector<TensorInfo>& parameters)
    : config_(config) {
  std::vector<std::string> slots;
  switch (config_.kind) {
    case OptimizerKind::None:
      throw ConfigError("[HostOptimizer] expected an optimizer kind, got None");
    case OptimizerKind::Sgd:
      if (config_.momentum != 0.0) slots = {"momentum"};
      else if (config_.nesterov) throw ConfigError("[HostOptimizer] expected momentum > 0 with nesterov, got 0");
      break;
    case OptimizerKind::Adam: case OptimizerKind::AdamW: case OptimizerKind::LaProp:
      slots = {"m", "v"};
      break;
  }
  for (const std::string& slot : slots) {
    for (const TensorInfo& p : parameters) {
      TensorInfo s{"optim." + slot + "/" + p.name, TensorRole::OptimizerState, DType::F32, p.shape};
      buffers_[s.name] = std::vector<float>(s.byte_size() / sizeof(float), 0.0f);
      state_.push_back(std::move(s));
    }
  }
}

std::vector<TensorInfo> HostOptimizer::state() const { return state_; }

std::vector<float>& HostOptimizer::state_buffer(const std::string& state_name) {
  auto it = buffers_.find(state_name);
  if (it == buffers_.end())
    throw SessionError("[HostOptimizer] expected an optimizer state named '" + state_name + "', got none");
  return it->second;
}

void HostOptimizer::update(const std::string& name, std::span<float> p, std::span<const float> g, double lr) {
  if (p.size() != g.size())
    throw SessionError("[HostOptimizer::update] '" + name + "': expected a gradient of " + std::to_string(p.size()) +
                       " values, got " + std::to_string(g.size()));
  const double wd = config_.weight_decay;
  const size_t n = p.size();
  if (config_.kind == OptimizerKind::Sgd) {
    float* buf = config_.momentum != 0.0 ? state_buffer("optim.momentum/" + name).data() : nullptr;
    for (size_t i = 0; i < n; ++i) {
      double d = g[i] + wd * p[i];
      if (buf) {
        // torch starts the buffer at the first gradient; from zeros, momentum*0 + d is the same value.
        buf[i] = static_cast<float>(config_.momentum * buf[i] + d);
        d = config_.nesterov ? d + config_.momentum * buf[i] : buf[i];
      }
      p[i] = static_cast<float>(p[i] - lr * d);
    }
    return;
  }
  float* m = state_buffer("optim.m/" + name).data();
  float* v = state_buffer("optim.v/" + name).data();
  const double b1 = config_.beta1, b2 = config_.beta2, eps = config_.eps;
  const double c1 = 1.0 - std::pow(b1, static_cast<double>(step_));
  const double c2 = 1.0 - std::pow(b2, static_cast<double>(step_));
  for (size_t i = 0; i < n; ++i) {
    double gi = g[i];
    double pi = p[i];
    if (config_.kind == OptimizerKind::Adam) gi += wd * pi;  // L2, as torch.optim.Adam
    else pi *= 1.0 - lr * wd;                                // decoupled, as AdamW
    if (config_.kind == OptimizerKind::LaProp) {
      // LaProp normalises the gradient by the second moment first, then takes momentum of that.
      v[i] = static_cast<float>(b2 * v[i] + (1.0 - b2) * gi * gi);
      const double denom = std::sqrt(v[i] / c2) + eps;
      m[i] = static_cast<float>(b1 * m[i] + (1.0 - b1) * gi / denom);
      pi -= lr * m[i] / c1;
    } else {
      m[i] = static_cast<float>(b1 * m[i] + (1.0 - b1) * gi);
      v[i] = static_cast<float>(b2 * v[i] + (1.0 - b2) * gi * gi);
      pi -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
    }
    p[i] = static_cast<float>(pi);
  }
}

}  // namespace meganeura
