#include "meganeura/train/progress.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>

namespace meganeura {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Progress::Progress(std::FILE* out, ProgressMode mode, int log_interval)
    : out_(out), log_interval_(log_interval > 0 ? log_interval : 100) {
  off_ = mode == ProgressMode::Off || out_ == nullptr;
  bar_ = !off_ && (mode == ProgressMode::Bar || (mode == ProgressMode::Auto && ::isatty(::fileno(out_))));
}

std::string Progress::format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  char b[32];
  if (s >= 3600)
    std::snprintf(b, sizeof b, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  else
    std::snprintf(b, sizeof b, "%lld:%02lld", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  return b;
}

std::string Progress::bar_line(int epoch, int epochs, int64_t done, int64_t total, double loss,
                               double steps_per_s, int width) {
  const double frac = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 0.0;
  const int filled = static_cast<int>(frac * width);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(static_cast<size_t>(width), '.');
  const double eta = steps_per_s > 0 ? static_cast<double>(total - done) / steps_per_s : NAN;
  char b[256];
  std::snprintf(b, sizeof b, "epoch %d/%d [%s] %lld/%lld %.1f steps/s loss %.4f ETA %s", epoch + 1, epochs,
                bar.c_str(), static_cast<long long>(done), static_cast<long long>(total), steps_per_s, loss,
                format_duration(eta).c_str());
  return b;
}

void Progress::begin_epoch(int epoch, int epochs, int64_t steps_in_epoch) {
  epoch_ = epoch;
  epochs_ = epochs;
  total_ = steps_in_epoch;
  last_draw_ = -1;
}

void Progress::step(int64_t step_in_epoch, double loss, double steps_per_s) {
  if (off_) return;
  if (bar_) {
    // Redrawing costs a write syscall; ten times a second is smooth enough.
    const double t = now_s();
    if (last_draw_ >= 0 && t - last_draw_ < 0.1 && step_in_epoch != total_) return;
    last_draw_ = t;
    std::fprintf(out_, "\r%s\033[K",
                 bar_line(epoch_, epochs_, step_in_epoch, total_, loss, steps_per_s, 30).c_str());
    std::fflush(out_);
    return;
  }
  if (step_in_epoch % log_interval_ != 0 && step_in_epoch != total_) return;
  const double eta = steps_per_s > 0 ? static_cast<double>(total_ - step_in_epoch) / steps_per_s : NAN;
  std::fprintf(out_, "epoch %d/%d step %lld/%lld loss %.4f %.1f steps/s ETA %s\n", epoch_ + 1, epochs_,
               static_cast<long long>(step_in_epoch), static_cast<long long>(total_), loss, steps_per_s,
               format_duration(eta).c_str());
  std::fflush(out_);
}

void Progress::end_epoch(const std::string& summary) {
  if (off_) return;
  if (bar_) std::fprintf(out_, "\r\033[K");
  std::fprintf(out_, "%s\n", summary.c_str());
  std::fflush(out_);
}

}  // namespace meganeura
