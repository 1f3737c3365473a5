#include "meganeura/train/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "meganeura/core/error.hpp"

namespace meganeura {

double learning_rate_at(const LrSchedule& s, double base_lr, int64_t step, int64_t total_steps) {
  if (s.warmup_steps < 0 || (s.kind == ScheduleKind::Step && s.step_size <= 0))
    throw ConfigError("[learning_rate_at] expected warmup_steps >= 0 and step_size > 0, got " +
                      std::to_string(s.warmup_steps) + " and " + std::to_string(s.step_size));
  if (step < s.warmup_steps)
    return base_lr * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps);
  const int64_t t = step - s.warmup_steps;
  switch (s.kind) {
    case ScheduleKind::Constant: return base_lr;
    case ScheduleKind::Step: return base_lr * std::pow(s.gamma, static_cast<double>(t / s.step_size));
    case ScheduleKind::Cosine: {
      const int64_t span = std::max<int64_t>(1, total_steps - s.warmup_steps - 1);
      const double frac = std::min(1.0, static_cast<double>(t) / static_cast<double>(span));
      return s.min_lr + (base_lr - s.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * frac));
    }
  }
  return base_lr;
}

ScheduleKind parse_schedule(const std::string& name) {
  if (name == "constant") return ScheduleKind::Constant;
  if (name == "step") return ScheduleKind::Step;
  if (name == "cosine") return ScheduleKind::Cosine;
  throw ConfigError("[parse_schedule] expected constant, step or cosine, got '" + name + "'");
}

}  // namespace meganeura
