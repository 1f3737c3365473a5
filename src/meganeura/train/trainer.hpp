#pragma once
// Trainer: runs epochs of a loader through a TrainTarget (usually a compiled Session), with learning-rate
// schedules, optional host-side clipping and accumulation, progress output, evaluation, callbacks, history
// and checkpoints.
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "meganeura/data/loader.hpp"
#include "meganeura/train/checkpoint.hpp"
#include "meganeura/train/config.hpp"
#include "meganeura/train/evaluate.hpp"
#include "meganeura/train/history.hpp"
#include "meganeura/train/host_optimizer.hpp"
#include "meganeura/train/target.hpp"

namespace meganeura {

struct StepEvent {
  int64_t step = 0;           // micro-steps since the Trainer was made
  int epoch = 0;
  int64_t step_in_epoch = 0;
  double loss = 0;
  double lr = 0;
};

class Trainer : public TensorStore {
 public:
  // ConfigError when the config cannot be honoured by the target (clipping or accumulation with a fused
  // optimizer, an optimizer kind different from the session's, no optimizer anywhere).
  Trainer(std::unique_ptr<TrainTarget> target, TrainConfig config);
  Trainer(Session session, TrainConfig config);  // a training session; see session_target.cpp
  ~Trainer() override;

  // Trains `epochs` epochs (config.epochs when <= 0). Successive calls continue the epoch count; the
  // schedule's horizon is max(config.epochs, epochs trained so far + epochs).
  const History& train(DataLoader& loader, int epochs = 0);
  // Uniform(+-1/sqrt(fan_in)) weights as torch.nn.Linear, zero biases, ones for norm scales; seeded by
  // config.seed and the parameter's name.
  void init_parameters();

  void set_evaluator(std::function<EvalResult()> evaluator) { evaluator_ = std::move(evaluator); }
  void on_step(std::function<void(const StepEvent&)> fn) { step_callbacks_.push_back(std::move(fn)); }
  void on_epoch_end(std::function<void(const EpochRecord&)> fn) { epoch_callbacks_.push_back(std::move(fn)); }
  void request_stop() { stop_ = true; }  // from a callback: ends train() after the current step
  void set_output(std::FILE* out) { out_ = out; }  // progress stream (stderr by default)

  const History& history() const { return history_; }
  const TrainConfig& config() const { return config_; }
  TrainTarget& target() { return *target_; }
  bool host_update() const { return host_opt_ != nullptr; }
  int64_t update_step() const { return update_step_; }
  double last_learning_rate() const { return lr_; }

  void save(const std::string& path, const SaveOptions& options = {}) { save_checkpoint(path, *this, options); }
  RestoreReport restore(const std::string& path) { return restore_checkpoint(path, *this); }

  // TensorStore: parameters plus the optimizer's state (fused on the device, or the host optimizer's).
  std::vector<TensorInfo> tensors() const override;
  std::vector<std::byte> read(const TensorInfo& t) override;
  void write(const TensorInfo& t, std::span<const std::byte> bytes) override;
  std::map<std::string, std::string> metadata() const override;
  void set_metadata(const std::map<std::string, std::string>& m) override;

 private:
  void check_batch(const Batch& b) const;
  void set_inputs(const Batch& b);
  void host_accumulate_and_update(double lr);

  std::unique_ptr<TrainTarget> target_;
  TrainConfig config_;
  OptimizerConfig optimizer_;  // the effective rule (fused or host)
  std::unique_ptr<HostOptimizer> host_opt_;
  std::map<std::string, std::vector<double>> grad_sum_;
  int micro_in_update_ = 0;
  int64_t micro_step_ = 0, update_step_ = 0;
  int epochs_done_ = 0;
  double lr_ = 0;
  bool stop_ = false;
  std::FILE* out_ = stderr;
  std::function<EvalResult()> evaluator_;
  std::vector<std::function<void(const StepEvent&)>> step_callbacks_;
  std::vector<std::function<void(const EpochRecord&)>> epoch_callbacks_;
  History history_;
};

}  // namespace meganeura
