#include "meganeura/train/evaluate.hpp"

#include <cmath>

#include "meganeura/core/error.hpp"

namespace meganeura {

void ClassificationMetrics::add(std::span<const float> logits, int64_t classes, const DataTensor& labels,
                                int64_t valid_rows) {
  if (classes <= 0 || logits.size() < static_cast<size_t>(valid_rows * classes))
    throw SessionError("[ClassificationMetrics::add] expected at least " + std::to_string(valid_rows) + "x" +
                       std::to_string(classes) + " logits, got " + std::to_string(logits.size()));
  const bool index = labels.dtype == DType::I32;
  const size_t need = static_cast<size_t>(valid_rows * (index ? 1 : classes));
  if ((index ? labels.i32.size() : labels.f32.size()) < need)
    throw DataError("[ClassificationMetrics::add] expected labels for " + std::to_string(valid_rows) +
                    " rows of " + std::to_string(classes) + " classes, got " +
                    std::to_string(index ? labels.i32.size() : labels.f32.size()) + " values");
  for (int64_t r = 0; r < valid_rows; ++r) {
    const float* z = logits.data() + r * classes;
    int64_t arg = 0;
    double mx = z[0];
    for (int64_t c = 1; c < classes; ++c)
      if (z[c] > mx) mx = z[c], arg = c;
    double se = 0;
    for (int64_t c = 0; c < classes; ++c) se += std::exp(static_cast<double>(z[c]) - mx);
    const double lse = mx + std::log(se);
    if (index) {
      const int32_t y = labels.i32[static_cast<size_t>(r)];
      if (y < 0 || y >= classes)
        throw DataError("[ClassificationMetrics::add] expected a label in [0, " + std::to_string(classes) +
                        "), got " + std::to_string(y));
      loss_sum_ += lse - z[y];
      correct_ += arg == y;
    } else {
      const float* t = labels.f32.data() + r * classes;
      int64_t target = 0;
      for (int64_t c = 0; c < classes; ++c) {
        loss_sum_ -= t[c] * (static_cast<double>(z[c]) - lse);
        if (t[c] > t[target]) target = c;
      }
      correct_ += arg == target;
    }
    ++count_;
  }
}

EvalResult ClassificationMetrics::result() const {
  EvalResult r;
  r.examples = count_;
  if (count_ > 0) {
    r.loss = loss_sum_ / static_cast<double>(count_);
    r.accuracy = static_cast<double>(correct_) / static_cast<double>(count_);
  }
  return r;
}

}  // namespace meganeura
