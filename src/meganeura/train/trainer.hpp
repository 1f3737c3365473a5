#pragma once
// Trainer: runs epochs of a loader through a TrainTarget (usually a compiled Session), with learning-rate
// schedules, progress output, evaluation, callbacks, history and checkpoints. The update itself (clipping
// and gradient accumulation included) runs inside the target's step.
//
// Steps are pipelined: the Trainer keeps up to target().steps_in_flight() steps (a session's
// frames_in_flight) submitted and accounts for a step — its loss, history, progress, step callbacks — only
// when it has to wait for it, so a step callback for step k runs after later steps were submitted (with their
// inputs and learning rates already fixed), and update_step() / last_learning_rate() are those of the latest
// submitted step. The queue drains at every epoch end, before the summary and evaluation.
//
// Distributed (the target's distributed(), docs/distributed.md): the first train() copies rank 0's parameters
// to every rank; losses and evaluation results are averaged over the ranks; only rank 0 prints progress and
// writes checkpoints. Every rank must call train() and save() alike (they are collectives).
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
#include "meganeura/train/target.hpp"

namespace meganeura {

struct StepEvent {
  int64_t step = 0;  // steps (micro-batches) since the Trainer was made
  int epoch = 0;
  int64_t step_in_epoch = 0;
  double loss = 0;
  double lr = 0;
};

class Trainer : public TensorStore {
 public:
  // ConfigError for a target without an optimizer (a session built with OptimizerKind::None).
  Trainer(std::unique_ptr<TrainTarget> target, TrainConfig config);
  Trainer(Session session, TrainConfig config);  // a training session; see session_target.cpp
  ~Trainer() override;

  // Trains `epochs` epochs (config.epochs when <= 0). Successive calls continue the epoch count; the
  // schedule's horizon is max(config.epochs, epochs trained so far + epochs).
  const History& train(DataLoader& loader, int epochs = 0);
  // Every parameter by Init::Default (ir/init.hpp: uniform(+-1/sqrt(fan_in)) weights as torch.nn.Linear, zero
  // biases, ones for norm scales), whatever rule its layer chose; seeded by config.seed and the parameter's
  // name. Sessions start from their layers' rules already (SessionConfig::init); this re-draws them.
  void init_parameters();

  void set_evaluator(std::function<EvalResult()> evaluator) { evaluator_ = std::move(evaluator); }
  void on_step(std::function<void(const StepEvent&)> fn) { step_callbacks_.push_back(std::move(fn)); }
  void on_epoch_end(std::function<void(const EpochRecord&)> fn) { epoch_callbacks_.push_back(std::move(fn)); }
  // From a callback: submits no further step; train() returns once the steps already submitted have finished
  // (their losses, history and callbacks included).
  void request_stop() { stop_ = true; }
  void set_output(std::FILE* out) { out_ = out; }  // progress stream (stderr by default)

  const History& history() const { return history_; }
  const TrainConfig& config() const { return config_; }
  TrainTarget& target() { return *target_; }
  int64_t update_step() const { return update_step_; }  // updates applied (micro-batches / accumulation)
  double last_learning_rate() const { return lr_; }

  // Distributed training: rank 0 writes (the others wait for it), every rank reads the same file.
  void save(const std::string& path, const SaveOptions& options = {});
  RestoreReport restore(const std::string& path) { return restore_checkpoint(path, *this); }

  // TensorStore: parameters plus the optimizer's state.
  std::vector<TensorInfo> tensors() const override;
  std::vector<std::byte> read(const TensorInfo& t) override;
  void write(const TensorInfo& t, std::span<const std::byte> bytes) override;
  std::map<std::string, std::string> metadata() const override;
  void set_metadata(const std::map<std::string, std::string>& m) override;

 private:
  void check_batch(const Batch& b) const;
  void set_inputs(const Batch& b);

  std::unique_ptr<TrainTarget> target_;
  TrainConfig config_;
  OptimizerConfig optimizer_;  // the target's update rule
  int micro_in_update_ = 0;    // micro-batches accumulated towards the next update
  int64_t micro_step_ = 0, update_step_ = 0;
  int epochs_done_ = 0;
  double lr_ = 0;
  bool stop_ = false;
  bool synced_ = false;  // parameters broadcast from rank 0 (distributed)
  std::FILE* out_ = stderr;
  std::function<EvalResult()> evaluator_;
  std::vector<std::function<void(const StepEvent&)>> step_callbacks_;
  std::vector<std::function<void(const EpochRecord&)>> epoch_callbacks_;
  History history_;
};

}  // namespace meganeura
