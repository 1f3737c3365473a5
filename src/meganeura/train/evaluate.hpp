#pragma once
// Classification metrics (loss, accuracy) from logits, and evaluation of an inference session on a loader.
#include <cstdint>
#include <span>
#include <string>

#include "meganeura/data/loader.hpp"
#include "meganeura/session/session.hpp"

namespace meganeura {

struct EvalResult {
  double loss = 0;      // mean softmax cross-entropy
  double accuracy = 0;  // fraction of rows whose argmax matches the label
  int64_t examples = 0;
};

// Sums over batches in float64 so that the mean does not depend on the batching.
class ClassificationMetrics {
 public:
  // logits [rows, classes]; labels f32 one-hot [rows, classes] or i32 indices [rows]. Only the first
  // `valid_rows` rows count (the rest pad a short batch).
  void add(std::span<const float> logits, int64_t classes, const DataTensor& labels, int64_t valid_rows);
  EvalResult result() const;

 private:
  double loss_sum_ = 0;
  int64_t correct_ = 0, count_ = 0;
};

struct EvalOptions {
  std::string logits_output;      // empty: output 0
  std::string labels = "labels";  // the batch column holding the labels
};

// Runs `inference` over one epoch of `test` (a short last batch is padded and its padding ignored).
EvalResult evaluate(Session& inference, DataLoader& test, const EvalOptions& options = {});

}  // namespace meganeura
