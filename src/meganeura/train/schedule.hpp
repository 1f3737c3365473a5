#pragma once
// Learning-rate schedules, as a pure function of the update step.
#include <cstdint>
#include <string>

namespace meganeura {

enum class ScheduleKind : uint8_t { Constant, Step, Cosine };

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::Constant;
  int64_t warmup_steps = 0;  // linear ramp from base/warmup to base over the first updates (any kind)
  int64_t step_size = 1000;  // Step: multiply by gamma every step_size updates after warm-up
  double gamma = 0.1;
  double min_lr = 0.0;  // Cosine: the value reached at the last update
};

// The learning rate of update `step` (0-based) out of `total_steps`. ConfigError on nonsense settings.
double learning_rate_at(const LrSchedule& s, double base_lr, int64_t step, int64_t total_steps);
ScheduleKind parse_schedule(const std::string& name);  // "constant", "step", "cosine"

}  // namespace meganeura
