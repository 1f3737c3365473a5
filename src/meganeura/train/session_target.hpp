#pragma once
// Adapters from a compiled Session to the Trainer (TrainTarget) and to checkpoints (TensorStore).
#include "meganeura/session/session.hpp"
#include "meganeura/train/target.hpp"
#include "meganeura/train/tensor_store.hpp"

namespace meganeura {

// Drives a training session; the loss is output `loss_output` (0: the first).
class SessionTarget : public TrainTarget {
 public:
  explicit SessionTarget(Session session, size_t loss_output = 0);
  Session& session() { return session_; }

  std::vector<TensorInfo> inputs() const override;
  std::vector<TensorInfo> parameters() const override;
  void set_input(const std::string& name, const DataTensor& value) override;
  uint64_t submit_step() override { return session_.step(); }
  double step_loss(uint64_t id) override;
  int steps_in_flight() const override { return session_.config().frames_in_flight; }
  OptimizerConfig fused_optimizer() const override;
  void set_learning_rate(double lr) override { session_.set_learning_rate(lr); }
  std::vector<float> read_parameter(const std::string& name) override {
    return session_.read_parameter(name);
  }
  void set_parameter(const std::string& name, std::span<const float> v) override {
    session_.set_parameter(name, v);
  }
  std::vector<TensorInfo> optimizer_state() const override;
  std::vector<float> read_optimizer_state(const std::string& name) override {
    return session_.read_optimizer_state(name);
  }
  void set_optimizer_state(const std::string& name, std::span<const float> v) override {
    session_.set_optimizer_state(name, v);
  }
  uint64_t optimizer_step() const override { return session_.optimizer_step(); }
  void set_optimizer_step(uint64_t step) override { session_.set_optimizer_step(step); }
  std::string device_name() const override;
  dist::DistributedConfig distributed() const override {
    return session_.config().training ? session_.config().distributed : dist::DistributedConfig{};
  }
  void broadcast_parameters() override { session_.broadcast_parameters(0); }

 private:
  Session session_;
  size_t loss_output_;
  std::vector<TensorInfo> inputs_, parameters_;  // the compiled graph does not change
};

// A session's parameters (and, for a training session, its optimizer state) as a checkpoint store. An
// inference session lists parameters only, so a restore into it loads just those.
class SessionStore : public TensorStore {
 public:
  explicit SessionStore(Session& session) : session_(session) {}
  std::vector<TensorInfo> tensors() const override;
  std::vector<std::byte> read(const TensorInfo& t) override;
  void write(const TensorInfo& t, std::span<const std::byte> bytes) override;
  std::map<std::string, std::string> metadata() const override;
  void set_metadata(const std::map<std::string, std::string>& m) override;

 private:
  Session& session_;
};

// The graph's parameters (name, dtype, shape) in declaration order.
std::vector<TensorInfo> parameter_infos(const Graph& g);

}  // namespace meganeura
