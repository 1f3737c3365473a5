#include "meganeura/train/trainer.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>

#include "meganeura/core/error.hpp"
#include "meganeura/ir/init.hpp"
#include "meganeura/train/progress.hpp"

namespace meganeura {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Trainer::Trainer(std::unique_ptr<TrainTarget> target, TrainConfig config)
    : target_(std::move(target)), config_(std::move(config)) {
  if (!target_) throw ConfigError("[Trainer] expected a target, got null");
  optimizer_ = target_->fused_optimizer();
  if (optimizer_.kind == OptimizerKind::None)
    throw ConfigError(
        "[Trainer] expected a session built with an optimizer (SessionConfig::optimizer), got "
        "OptimizerKind::None, which only computes gradients");
  if (optimizer_.grad_accumulation < 1)
    throw ConfigError("[Trainer] expected grad_accumulation >= 1, got " +
                      std::to_string(optimizer_.grad_accumulation));
  lr_ = optimizer_.learning_rate;
}

Trainer::~Trainer() = default;

void Trainer::init_parameters() {
  for (const TensorInfo& p : target_->parameters())
    target_->set_parameter(p.name, initial_values(p.name, p.shape, ParamInit{}, config_.seed));
}

void Trainer::check_batch(const Batch& b) const {
  for (const TensorInfo& in : target_->inputs()) {
    const DataTensor& t = b.at(in.name);
    if (t.shape != in.shape || t.dtype != in.dtype)
      throw SessionError("[Trainer::train] input '" + in.name + "': expected " + describe(in) +
                         " from the loader, got " + describe(TensorInfo{in.name, in.role, t.dtype, t.shape}));
  }
}

void Trainer::set_inputs(const Batch& b) {
  for (const TensorInfo& in : target_->inputs()) target_->set_input(in.name, b.at(in.name));
}

const History& Trainer::train(DataLoader& loader, int epochs) {
  if (epochs <= 0) epochs = config_.epochs;
  if (loader.batch_size() != config_.batch_size)
    throw ConfigError("[Trainer::train] expected a loader with TrainConfig.batch_size=" +
                      std::to_string(config_.batch_size) + ", got batch size " +
                      std::to_string(loader.batch_size()));
  const dist::DistributedConfig dist = target_->distributed();
  if (dist.enabled() && loader.options().world != dist.size())
    throw ConfigError("[Trainer::train] expected a loader sharded over the " + std::to_string(dist.size()) +
                      " ranks (LoaderOptions::world, rank), got world " +
                      std::to_string(loader.options().world));
  if (dist.enabled() && !synced_) {
    target_->broadcast_parameters();
    synced_ = true;
  }
  const int64_t full_batches = loader.dataset().size() / (loader.batch_size() * loader.options().world);
  const int accumulation = optimizer_.grad_accumulation;
  if (full_batches < accumulation)
    throw ConfigError("[Trainer::train] expected at least one update per epoch, got " +
                      std::to_string(full_batches) +
                      " full batches for grad_accumulation=" + std::to_string(accumulation));
  // The schedule spans the planned run (config.epochs), so that a run resumed from a checkpoint follows
  // the same learning rates as one that was never interrupted. Accumulation carries over epoch ends.
  const int64_t total_updates = full_batches * std::max(config_.epochs, epochs_done_ + epochs) / accumulation;
  Progress progress(out_, dist.rank() == 0 ? config_.progress : ProgressMode::Off, config_.log_interval);
  stop_ = false;
  double applied_lr = -1;
  // Steps submitted but not yet accounted for, oldest first: the target runs up to steps_in_flight() of them
  // while the host prepares the next batch.
  struct Submitted {
    uint64_t id;
    int64_t micro_step, step_in_epoch;
    double lr;
  };
  std::deque<Submitted> in_flight;
  const size_t depth = static_cast<size_t>(std::max(1, target_->steps_in_flight()));
  for (int e = 0; e < epochs && !stop_; ++e) {
    const int epoch = epochs_done_;
    loader.start_epoch(static_cast<uint64_t>(epoch));
    progress.begin_epoch(epoch, epochs_done_ - e + epochs, full_batches);
    const double t0 = now_s();
    double epoch_loss = 0, interval_loss = 0;
    int64_t steps = 0, submitted = 0, interval_steps = 0;
    double interval_t0 = t0;
    // The oldest submitted step's loss, history, progress and callbacks.
    auto finish_oldest = [&] {
      const Submitted sub = in_flight.front();
      in_flight.pop_front();
      double loss = target_->step_loss(sub.id);
      if (dist.enabled()) loss = dist.comm->mean(loss, "the step's loss");
      ++steps;
      ++interval_steps;
      epoch_loss += loss;
      interval_loss += loss;
      const double now = now_s();
      const double rate = static_cast<double>(steps) / std::max(1e-9, now - t0);
      // A single step's loss is noisy: show the mean since the last history point.
      progress.step(steps, interval_loss / static_cast<double>(interval_steps), rate);
      if (interval_steps >= config_.log_interval) {
        history_.steps.push_back({sub.micro_step, epoch, interval_loss / static_cast<double>(interval_steps),
                                  sub.lr,
                                  static_cast<double>(interval_steps) / std::max(1e-9, now - interval_t0)});
        interval_loss = 0;
        interval_steps = 0;
        interval_t0 = now;
      }
      const StepEvent ev{sub.micro_step, epoch, sub.step_in_epoch, loss, sub.lr};
      for (auto& cb : step_callbacks_) cb(ev);
    };
    while (!stop_) {
      auto batch = loader.next();
      if (!batch) break;
      if (batch->rows < loader.batch_size()) continue;  // a compiled step has a fixed batch size
      check_batch(*batch);
      // The rate of the update this micro-batch contributes to; only the updating step reads it.
      lr_ = learning_rate_at(config_.schedule, optimizer_.learning_rate, update_step_, total_updates);
      if (lr_ != applied_lr) {
        target_->set_learning_rate(lr_);
        applied_lr = lr_;
      }
      set_inputs(*batch);
      in_flight.push_back({target_->submit_step(), ++micro_step_, ++submitted, lr_});
      if (++micro_in_update_ == accumulation) {
        micro_in_update_ = 0;
        ++update_step_;
      }
      if (in_flight.size() >= depth) finish_oldest();
    }
    while (!in_flight.empty()) finish_oldest();  // before the epoch's summary and evaluation
    if (interval_steps > 0)
      history_.steps.push_back({micro_step_, epoch, interval_loss / static_cast<double>(interval_steps), lr_,
                                static_cast<double>(interval_steps) / std::max(1e-9, now_s() - interval_t0)});
    EpochRecord rec;
    rec.epoch = epoch;
    rec.steps = steps;
    rec.train_loss = steps > 0 ? epoch_loss / static_cast<double>(steps) : NAN;
    rec.seconds = now_s() - t0;
    rec.steps_per_s = static_cast<double>(steps) / std::max(1e-9, rec.seconds);
    char summary[256];
    std::snprintf(summary, sizeof summary, "epoch %d: train loss %.4f, %lld steps in %.1f s (%.1f steps/s)",
                  epoch + 1, rec.train_loss, static_cast<long long>(steps), rec.seconds, rec.steps_per_s);
    std::string line = summary;
    if (evaluator_) {
      EvalResult r = evaluator_();
      if (dist.enabled()) {
        r.loss = dist.comm->mean(r.loss, "the evaluation loss");
        r.accuracy = dist.comm->mean(r.accuracy, "the evaluation accuracy");
      }
      rec.test_loss = r.loss;
      rec.test_accuracy = r.accuracy;
      std::snprintf(summary, sizeof summary, ", test loss %.4f, test accuracy %.4f", r.loss, r.accuracy);
      line += summary;
    }
    progress.end_epoch(line);
    history_.epochs.push_back(rec);
    ++epochs_done_;
    for (auto& cb : epoch_callbacks_) cb(rec);
  }
  return history_;
}

void Trainer::save(const std::string& path, const SaveOptions& options) {
  const dist::DistributedConfig dist = target_->distributed();
  if (dist.rank() == 0) save_checkpoint(path, *this, options);
  if (dist.enabled()) dist.comm->barrier("after rank 0 wrote the checkpoint");
}

std::vector<TensorInfo> Trainer::tensors() const {
  std::vector<TensorInfo> out = target_->parameters();
  for (TensorInfo& t : out) t.role = TensorRole::Parameter;
  const std::vector<TensorInfo> state = target_->optimizer_state();
  out.insert(out.end(), state.begin(), state.end());
  return out;
}

std::vector<std::byte> Trainer::read(const TensorInfo& t) {
  if (t.role == TensorRole::Parameter) return to_bytes(target_->read_parameter(t.name));
  return to_bytes(target_->read_optimizer_state(t.name));
}

void Trainer::write(const TensorInfo& t, std::span<const std::byte> bytes) {
  const std::vector<float> v = to_floats(bytes);
  if (t.role == TensorRole::Parameter)
    target_->set_parameter(t.name, v);
  else
    target_->set_optimizer_state(t.name, v);
}

std::map<std::string, std::string> Trainer::metadata() const {
  return {{"optimizer", optimizer_name(optimizer_.kind)},
          {"optimizer_step", std::to_string(target_->optimizer_step())},
          {"update_step", std::to_string(update_step_)},
          {"epochs_done", std::to_string(epochs_done_)}};
}

void Trainer::set_metadata(const std::map<std::string, std::string>& m) {
  auto get = [&](const char* key) -> std::optional<uint64_t> {
    auto it = m.find(key);
    if (it == m.end()) return std::nullopt;
    return std::stoull(it->second);
  };
  // Setting the step also drops a partly accumulated update on the target, so the count restarts here too.
  target_->set_optimizer_step(get("optimizer_step").value_or(target_->optimizer_step()));
  if (auto u = get("update_step")) update_step_ = static_cast<int64_t>(*u);
  if (auto e = get("epochs_done")) epochs_done_ = static_cast<int>(*e);
  micro_in_update_ = 0;
}

OptimizerKind parse_optimizer(const std::string& name) {
  if (name == "sgd") return OptimizerKind::Sgd;
  if (name == "adam") return OptimizerKind::Adam;
  if (name == "adamw") return OptimizerKind::AdamW;
  if (name == "laprop") return OptimizerKind::LaProp;
  throw ConfigError("[parse_optimizer] expected sgd, adam, adamw or laprop, got '" + name + "'");
}

const char* optimizer_name(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::None: return "none";
    case OptimizerKind::Sgd: return "sgd";
    case OptimizerKind::Adam: return "adam";
    case OptimizerKind::AdamW: return "adamw";
    case OptimizerKind::LaProp: return "laprop";
  }
  return "?";
}

}  // namespace meganeura
