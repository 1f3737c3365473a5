#pragma once
// Everything that shapes a training run besides the graph and the data.
#include <cstdint>
#include <optional>
#include <string>

#include "meganeura/session/session.hpp"
#include "meganeura/train/schedule.hpp"

namespace meganeura {

enum class ProgressMode : uint8_t { Auto, Bar, Lines, Off };  // Auto: a bar on a terminal, else lines

struct TrainConfig {
  int epochs = 10;
  int64_t batch_size = 32;  // checked against the loader and the graph's inputs
  // The update rule and its base learning rate; weight decay is optimizer->weight_decay. Unset: the
  // session's own fused optimizer. Set on a session built with OptimizerKind::None: applied on the host.
  std::optional<OptimizerConfig> optimizer;
  LrSchedule schedule;
  double clip_grad_norm = 0.0;  // > 0: scale gradients so their global L2 norm is at most this
  int grad_accumulation = 1;    // micro-batches summed (averaged) into one update
  uint64_t seed = 0;            // drives Trainer::init_parameters (the loader has its own shuffle seed)
  int log_interval = 100;       // steps between history points and plain progress lines
  ProgressMode progress = ProgressMode::Auto;
};

OptimizerKind parse_optimizer(const std::string& name);  // sgd, adam, adamw, laprop
const char* optimizer_name(OptimizerKind k);

}  // namespace meganeura
