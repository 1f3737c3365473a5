#pragma once
// Training progress on a terminal (one redrawn bar) or in a log (a plain line every log_interval steps).
#include <cstdint>
#include <cstdio>
#include <string>

#include "meganeura/train/config.hpp"

namespace meganeura {

class Progress {
 public:
  Progress(std::FILE* out, ProgressMode mode, int log_interval);
  void begin_epoch(int epoch, int epochs, int64_t steps_in_epoch);
  void step(int64_t step_in_epoch, double loss, double steps_per_s);
  void end_epoch(const std::string& summary);  // printed on its own line in every mode but Off
  bool is_bar() const { return bar_; }

  static std::string format_duration(double seconds);  // "1:02:03", "4:05"
  static std::string bar_line(int epoch, int epochs, int64_t done, int64_t total, double loss,
                              double steps_per_s, int width);

 private:
  std::FILE* out_;
  bool bar_ = false, off_ = false;
  int log_interval_;
  int epoch_ = 0, epochs_ = 0;
  int64_t total_ = 0;
  double last_draw_ = -1;
};

}  // namespace meganeura
