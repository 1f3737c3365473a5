#pragma once
// Everything that shapes a training run besides the graph, the data and the update rule. The update rule
// (optimizer, learning rate, weight decay, clipping by global gradient norm, gradient accumulation) is
// compiled into the step: SessionConfig::optimizer. Its learning rate is the schedule's base.
#include <cstdint>
#include <string>

#include "meganeura/session/session.hpp"
#include "meganeura/train/schedule.hpp"

namespace meganeura {

enum class ProgressMode : uint8_t { Auto, Bar, Lines, Off };  // Auto: a bar on a terminal, else lines

struct TrainConfig {
  int epochs = 10;
  int64_t batch_size = 32;  // checked against the loader and the graph's inputs
  LrSchedule schedule;
  uint64_t seed = 0;       // drives Trainer::init_parameters (the loader has its own shuffle seed)
  int log_interval = 100;  // steps between history points and plain progress lines
  ProgressMode progress = ProgressMode::Auto;
};

OptimizerKind parse_optimizer(const std::string& name);  // sgd, adam, adamw, laprop
const char* optimizer_name(OptimizerKind k);

}  // namespace meganeura
