#pragma once
// What a training run recorded, and its renderings (JSON, CSV, an SVG loss curve).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace meganeura {

struct StepRecord {
  int64_t step = 0;  // micro-steps (session steps) since the start of train()
  int epoch = 0;
  double loss = 0;  // mean over the steps since the previous record
  double lr = 0;
  double steps_per_s = 0;
};

struct EpochRecord {
  int epoch = 0;
  double train_loss = 0;  // mean over the epoch's steps
  int64_t steps = 0;
  double seconds = 0;
  double steps_per_s = 0;
  std::optional<double> test_loss, test_accuracy;
};

struct History {
  std::vector<StepRecord> steps;
  std::vector<EpochRecord> epochs;

  std::string to_json() const;
  std::string to_csv() const;  // one row per step record; epoch rows follow with kind=epoch
  std::string to_svg(int width = 640, int height = 360) const;  // training loss by step, test loss by epoch
  // Chooses the rendering by extension (.json, .csv, .svg); writes atomically-enough for a report file.
  void save(const std::string& path) const;
};

}  // namespace meganeura
