#pragma once
// What the stages report back through the session: the rewrite's OptimizeReport, the memory plan's
// MemorySummary, the optimizer state's names. A leaf of the stage order (docs/architecture.md).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "meganeura/ir/graph.hpp"

namespace meganeura {

struct OptimizeReport {
  std::vector<std::pair<std::string, int>> rules_fired;  // rule name, times
  size_t nodes_before = 0, nodes_after = 0;
  std::string stop_reason;  // "fixed point", "budget: iterations", ...
  size_t kernels = 0;
  std::string to_text() const;
};

// One optimizer moment buffer, as a logical tensor (for checkpoints). Named "optim.<slot>/<parameter>" with
// slot "momentum" (SGD with momentum) or "m" and "v" (Adam, AdamW, LaProp).
struct OptimizerStateInfo {
  std::string name;
  Shape shape;
};

struct MemorySummary {
  uint64_t parameters = 0, gradients = 0, optimizer_state = 0, activations = 0, inputs = 0, outputs = 0;
  uint64_t state = 0;  // Graph::state values (KV caches)
  uint64_t total() const {
    return parameters + gradients + optimizer_state + activations + inputs + outputs + state;
  }
};

}  // namespace meganeura
