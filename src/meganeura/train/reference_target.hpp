#pragma once
// A TrainTarget on the CPU reference interpreter (float64, autodiff by graph transformation): slow and
// exact, no device needed. It lets the Trainer be tested end to end at the CPU tier, and it is an oracle
// for training on a GPU.
#include <map>

#include "meganeura/reference/interpreter.hpp"
#include "meganeura/train/target.hpp"

namespace meganeura {

class ReferenceTarget : public TrainTarget {
 public:
  explicit ReferenceTarget(const Graph& g);  // loss: g.outputs()[0]; parameters start at zero

  std::vector<TensorInfo> inputs() const override { return inputs_; }
  std::vector<TensorInfo> parameters() const override { return parameters_; }
  void set_input(const std::string& name, const DataTensor& value) override;
  double run_step() override;
  OptimizerConfig fused_optimizer() const override;
  void set_learning_rate(double) override {}
  std::vector<float> read_parameter(const std::string& name) override;
  void set_parameter(const std::string& name, std::span<const float> values) override;
  std::vector<float> read_gradient(const std::string& name) override;
  std::vector<TensorInfo> optimizer_state() const override { return {}; }
  std::vector<float> read_optimizer_state(const std::string& name) override;
  void set_optimizer_state(const std::string& name, std::span<const float> values) override;
  uint64_t optimizer_step() const override { return 0; }
  void set_optimizer_step(uint64_t) override {}
  std::string device_name() const override { return "cpu reference (float64)"; }

 private:
  HostTensor& feed(const std::string& name, const char* where);
  Graph graph_;
  NodeId loss_;
  std::vector<TensorInfo> inputs_, parameters_;
  std::vector<NodeId> gradients_;  // by parameter order
  reference::Feeds feeds_;
  std::map<std::string, std::vector<float>> last_gradients_;
};

}  // namespace meganeura
