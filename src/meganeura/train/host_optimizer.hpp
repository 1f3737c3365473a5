#pragma once
// Update rules applied on the host, for sessions that only compute gradients (OptimizerKind::None): the
// path that makes gradient clipping and accumulation possible, and the reference the fused GPU updates
// are compared against. Formulas follow torch.optim (SGD, Adam, AdamW) and the LaProp paper.
#include <map>
#include <span>
#include <string>
#include <vector>

#include "meganeura/session/session.hpp"
#include "meganeura/train/tensor_store.hpp"

namespace meganeura {

class HostOptimizer {
 public:
  HostOptimizer(OptimizerConfig config, const std::vector<TensorInfo>& parameters);

  // One update of `param` by `grad` at learning rate `lr`. Call begin_step() once per update first.
  void begin_step() { ++step_; }
  void update(const std::string& name, std::span<float> param, std::span<const float> grad, double lr);

  const OptimizerConfig& config() const { return config_; }
  uint64_t step() const { return step_; }
  void set_step(uint64_t s) { step_ = s; }
  // Moment buffers as checkpoint tensors: "optim.momentum/<p>", "optim.m/<p>", "optim.v/<p>".
  std::vector<TensorInfo> state() const;
  std::vector<float>& state_buffer(const std::string& state_name);

 private:
  OptimizerConfig config_;
  uint64_t step_ = 0;
  std::vector<TensorInfo> state_;
  std::map<std::string, std::vector<float>> buffers_;
};

}  // namespace meganeura
