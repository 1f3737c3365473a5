#include "meganeura/train/trainer.hpp"

#include <chrono>
#include <cmath>
#include <cstring>

#include "meganeura/core/error.hpp"
#include "meganeura/train/progress.hpp"

namespace meganeura {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a: stable across runs and platforms
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

bool looks_like_norm_scale(const std::string& name) {
  for (const char* key : {"norm", "gamma", "scale", "ln"})
    if (name.find(key) != std::string::npos) return true;
  return false;
}

}  // namespace

Trainer::Trainer(std::unique_ptr<TrainTarget> target, TrainConfig config)
    : target_(std::move(target)), config_(std::move(config)) {
  if (!target_) throw ConfigError("[Trainer] expected a target, got null");
  if (config_.grad_accumulation < 1)
    throw ConfigError("[Trainer] expected grad_accumulation >= 1, got " + std::to_string(config_.grad_accumulation));
  if (config_.clip_grad_norm < 0)
    throw ConfigError("[Trainer] expected clip_grad_norm >= 0, got " + std::to_string(config_.clip_grad_norm));
  const OptimizerConfig fused = target_->fused_optimizer();
  if (fused.kind != OptimizerKind::None) {
    if (config_.optimizer && config_.optimizer->kind != fused.kind)
      throw ConfigError(std::string("[Trainer] expected TrainConfig.optimizer to match the session's fused ") +
                        optimizer_name(fused.kind) + ", got " + optimizer_name(config_.optimizer->kind) +
                        "; build the session with that optimizer, or with OptimizerKind::None for host updates");
    if (config_.clip_grad_norm > 0 || config_.grad_accumulation > 1)
      throw ConfigError("[Trainer] expected a session built with OptimizerKind::None for gradient clipping or "
                        "accumulation (they run on the host between steps), got a session with a fused " +
                        std::string(optimizer_name(fused.kind)) + " update");
    optimizer_ = config_.optimizer ? *config_.optimizer : fused;
  } else {
    if (!config_.optimizer)
      throw ConfigError("[Trainer] expected TrainConfig.optimizer for a session without a fused optimizer, got none");
    optimizer_ = *config_.optimizer;
    host_opt_ = std::make_unique<HostOptimizer>(optimizer_, target_->parameters());
  }
  lr_ = optimizer_.learning_rate;
}

Trainer::~Trainer() = default;

void Trainer::init_parameters() {
  for (const TensorInfo& p : target_->parameters()) {
    const size_t n = static_cast<size_t>(p.byte_size() / sizeof(float));
    std::vector<float> v(n, 0.0f);
    if (p.shape.size() <= 1) {
      if (looks_like_norm_scale(p.name)) std::fill(v.begin(), v.end(), 1.0f);
    } else {
      // x @ w with w [in, out]: fan-in is the first axis; conv weights [out, in, kh, kw]: all but the first.
      int64_t fan_in = p.shape[0];
      if (p.shape.size() > 2) {
        fan_in = 1;
        for (size_t i = 1; i < p.shape.size(); ++i) fan_in *= p.shape[i];
      }
      const double bound = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(1, fan_in)));
      uint64_t state = config_.seed ^ name_hash(p.name);
      for (float& x : v) {
        state += 0x9E3779B97F4A7C15ull;
        const double u = static_cast<double>(mix(state) >> 11) * 0x1.0p-53;  // [0, 1)
        x = static_cast<float>((2.0 * u - 1.0) * bound);
      }
    }
    target_->set_parameter(p.name, v);
  }
}

void Trainer::check_batch(const Batch& b) const {
  for (const TensorInfo& in : target_->inputs()) {
    const DataTensor& t = b.at(in.name);
    if (t.shape != in.shape || t.dtype != in.dtype)
      throw SessionError("[Trainer::train] input '" + in.name + "': expected " + describe(in) + " from the loader, got " +
                         describe(TensorInfo{in.name, in.role, t.dtype, t.shape}));
  }
}

void Trainer::set_inputs(const Batch& b) {
  for (const TensorInfo& in : target_->inputs()) target_->set_input(in.name, b.at(in.name));
}

void Trainer::host_accumulate_and_update(double lr) {
  const std::vector<TensorInfo> params = target_->parameters();
  for (const TensorInfo& p : params) {
    const std::vector<float> g = target_->read_gradient(p.name);
    std::vector<double>& sum = grad_sum_[p.name];
    if (sum.size() != g.size()) sum.assign(g.size(), 0.0);
    for (size_t i = 0; i < g.size(); ++i) sum[i] += g[i];
  }
  if (++micro_in_update_ < config_.grad_accumulation) return;
  // Each micro-batch's loss is a mean, so the mean of the micro-gradients is the big batch's gradient.
  const double inv = 1.0 / config_.grad_accumulation;
  double sq = 0;
  for (auto& [name, sum] : grad_sum_)
    for (double& x : sum) {
      x *= inv;
      sq += x * x;
    }
  double scale = 1.0;
  const double norm = std::sqrt(sq);
  if (config_.clip_grad_norm > 0 && norm > config_.clip_grad_norm) scale = config_.clip_grad_norm / (norm + 1e-6);
  host_opt_->begin_step();
  for (const TensorInfo& p : params) {
    std::vector<double>& sum = grad_sum_[p.name];
    std::vector<float> g(sum.size());
    for (size_t i = 0; i < sum.size(); ++i) g[i] = static_cast<float>(sum[i] * scale);
    std::vector<float> w = target_->read_parameter(p.name);
    host_opt_->update(p.name, w, g, lr);
    target_->set_parameter(p.name, w);
    std::fill(sum.begin(), sum.end(), 0.0);
  }
  micro_in_update_ = 0;
  ++update_step_;
}

const History& Trainer::train(DataLoader& loader, int epochs) {
  if (epochs <= 0) epochs = config_.epochs;
  if (loader.batch_size() != config_.batch_size)
    throw ConfigError("[Trainer::train] expected a loader with TrainConfig.batch_size=" +
                      std::to_string(config_.batch_size) + ", got batch size " + std::to_string(loader.batch_size()));
  const int64_t full_batches = loader.dataset().size() / loader.batch_size();
  const int64_t updates_per_epoch = full_batches / config_.grad_accumulation;
  if (updates_per_epoch <= 0)
    throw ConfigError("[Trainer::train] expected at least one update per epoch, got " + std::to_string(full_batches) +
                      " full batches for grad_accumulation=" + std::to_string(config_.grad_accumulation));
  // The schedule spans the planned run (config.epochs), so that a run resumed from a checkpoint follows
  // the same learning rates as one that was never interrupted.
  const int64_t total_updates = updates_per_epoch * std::max(config_.epochs, epochs_done_ + epochs);
  Progress progress(out_, config_.progress, config_.log_interval);
  stop_ = false;
  double applied_lr = -1;
  for (int e = 0; e < epochs && !stop_; ++e) {
    const int epoch = epochs_done_;
    loader.start_epoch(static_cast<uint64_t>(epoch));
    progress.begin_epoch(epoch, epochs_done_ - e + epochs, full_batches);
    const double t0 = now_s();
    double epoch_loss = 0, interval_loss = 0;
    int64_t steps = 0, interval_steps = 0;
    double interval_t0 = t0;
    while (auto batch = loader.next()) {
      if (batch->rows < loader.batch_size()) continue;  // a compiled step has a fixed batch size
      check_batch(*batch);
      lr_ = learning_rate_at(config_.schedule, optimizer_.learning_rate, update_step_, total_updates);
      if (!host_opt_ && lr_ != applied_lr) {
        target_->set_learning_rate(lr_);
        applied_lr = lr_;
      }
      set_inputs(*batch);
      const double loss = target_->run_step();
      if (host_opt_) host_accumulate_and_update(lr_);
      else ++update_step_;
      ++micro_step_;
      ++steps;
      ++interval_steps;
      epoch_loss += loss;
      interval_loss += loss;
      const double now = now_s();
      const double rate = static_cast<double>(steps) / std::max(1e-9, now - t0);
      // A single step's loss is noisy: show the mean since the last history point.
      progress.step(steps, interval_loss / static_cast<double>(interval_steps), rate);
      if (interval_steps >= config_.log_interval) {
        history_.steps.push_back({micro_step_, epoch, interval_loss / static_cast<double>(interval_steps), lr_,
                                  static_cast<double>(interval_steps) / std::max(1e-9, now - interval_t0)});
        interval_loss = 0;
        interval_steps = 0;
        interval_t0 = now;
      }
      const StepEvent ev{micro_step_, epoch, steps, loss, lr_};
      for (auto& cb : step_callbacks_) cb(ev);
      if (stop_) break;
    }
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
      const EvalResult r = evaluator_();
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

std::vector<TensorInfo> Trainer::tensors() const {
  std::vector<TensorInfo> out = target_->parameters();
  for (TensorInfo& t : out) t.role = TensorRole::Parameter;
  const std::vector<TensorInfo> state = host_opt_ ? host_opt_->state() : target_->optimizer_state();
  out.insert(out.end(), state.begin(), state.end());
  return out;
}

std::vector<std::byte> Trainer::read(const TensorInfo& t) {
  if (t.role == TensorRole::Parameter) return to_bytes(target_->read_parameter(t.name));
  if (host_opt_) return to_bytes(host_opt_->state_buffer(t.name));
  return to_bytes(target_->read_optimizer_state(t.name));
}

void Trainer::write(const TensorInfo& t, std::span<const std::byte> bytes) {
  const std::vector<float> v = to_floats(bytes);
  if (t.role == TensorRole::Parameter) target_->set_parameter(t.name, v);
  else if (host_opt_) host_opt_->state_buffer(t.name) = v;
  else target_->set_optimizer_state(t.name, v);
}

std::map<std::string, std::string> Trainer::metadata() const {
  return {{"optimizer", optimizer_name(optimizer_.kind)},
          {"optimizer_step", std::to_string(host_opt_ ? host_opt_->step() : target_->optimizer_step())},
          {"update_step", std::to_string(update_step_)},
          {"epochs_done", std::to_string(epochs_done_)}};
}

void Trainer::set_metadata(const std::map<std::string, std::string>& m) {
  auto get = [&](const char* key) -> std::optional<uint64_t> {
    auto it = m.find(key);
    if (it == m.end()) return std::nullopt;
    return std::stoull(it->second);
  };
  if (auto s = get("optimizer_step")) {
    if (host_opt_) host_opt_->set_step(*s);
    else if (target_->fused_optimizer().kind != OptimizerKind::None) target_->set_optimizer_step(*s);
  }
  if (auto u = get("update_step")) update_step_ = static_cast<int64_t>(*u);
  if (auto e = get("epochs_done")) epochs_done_ = static_cast<int>(*e);
  micro_in_update_ = 0;
  for (auto& [name, sum] : grad_sum_) std::fill(sum.begin(), sum.end(), 0.0);
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
