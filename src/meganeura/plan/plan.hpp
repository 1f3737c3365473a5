#pragma once
// The memory plan: which bytes every materialised value occupies. Parameters, gradients, optimizer
// moments, inputs, outputs and constants live in a persistent arena; intermediates share one activation
// arena, reusing bytes between values whose live ranges (in kernel levels) do not overlap. An arena larger
// than the device binds (maxStorageBufferRange) is split into parts of MemoryPlan::part_bytes, one buffer
// each, and no value straddles two parts.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "meganeura/config/report.hpp"
#include "meganeura/schedule/schedule.hpp"

namespace meganeura {

enum class StorageKind : uint8_t {
  Parameter,
  Gradient,
  Accumulator,
  OptimizerState,
  Activation,
  Input,
  Output,
  Constant,
  Hyper,
  State,    // Graph::state values (KV caches): persistent, updated in place by the step
  Scratch,  // bytes one kernel's dispatches pass between them (split-K's partial products); in the arena
  Tickets   // split-K's counters of one kernel: persistent, zeroed once, left zero by every dispatch
};
const char* storage_kind_name(StorageKind k);
// Activations and scratch share the activation arena; everything else is persistent.
inline bool in_arena(StorageKind k) { return k == StorageKind::Activation || k == StorageKind::Scratch; }

struct Slot {
  StorageKind kind = StorageKind::Activation;
  NodeId node;  // the value (the parameter, for optimizer state and accumulators; the kernel's root for
                // scratch)
  uint32_t moment = 0;      // optimizer state: which moment
  uint64_t bytes = 0;       // logical size
  uint64_t offset = 0;      // offset in its arena (persistent, or activation for activations and scratch)
  int first = 0, last = 0;  // activations and scratch: live kernel levels, inclusive
};

struct PlanOptions {
  bool alias = true;              // reuse activation bytes between values that are never live together
  uint64_t alignment = 256;       // offsets in the arena (the device's storage-buffer offset alignment)
  uint64_t max_buffer_bytes = 0;  // the most one buffer binding may span (maxStorageBufferRange); 0: no limit
  std::vector<NodeId> outputs;    // user outputs: persistent and readable
  std::vector<std::pair<NodeId, NodeId>> param_grads;  // gradients: persistent, next to their parameters
  uint32_t moments_per_parameter = 0;                  // 0 for plain SGD, 1 momentum, 2 Adam-family
  bool accumulators = false;  // a gradient-sized buffer per parameter (gradient accumulation)
  uint64_t hyper_bytes = 0;   // the hyper-parameter block (codegen::hyper_bytes); 0: none
  // Scratch of a kernel (codegen's Binding::Scratch): live only at that kernel's level.
  struct ScratchRequest {
    NodeId root;  // of the kernel
    uint64_t bytes = 0;
  };
  std::vector<ScratchRequest> scratch;
  // Tickets of a kernel (codegen's Binding::Tickets): persistent, so that the zeros survive other kernels.
  std::vector<ScratchRequest> tickets;
};

struct MemoryPlan {
  std::vector<Slot> slots;
  std::map<NodeId, size_t> slot_of;                       // storage node -> slot
  std::map<std::pair<NodeId, uint32_t>, size_t> moments;  // (parameter, moment) -> slot
  std::map<NodeId, size_t> accumulators;                  // parameter -> slot
  std::map<NodeId, size_t> scratch;                       // kernel root -> its scratch slot
  std::map<NodeId, size_t> tickets;                       // kernel root -> its tickets slot
  std::optional<size_t> hyper;
  uint64_t arena_bytes = 0;       // the activation arena
  uint64_t persistent_bytes = 0;  // the persistent arena
  // Both arenas are buffers of part_bytes (the last one shorter); 0: one buffer each. A slot lies in part
  // offset / part_bytes at offset % part_bytes.
  uint64_t part_bytes = 0;
  static size_t parts(uint64_t arena, uint64_t part) {
    return part && arena ? size_t((arena + part - 1) / part) : 1;
  }

  size_t slot(const KernelGraph& kg, NodeId n) const;  // through Reshape aliases; throws if unplanned
  MemorySummary summary() const;                       // accumulators count as gradients
  std::string to_text(const Graph& g) const;
};

MemoryPlan plan_memory(const Graph& g, const KernelGraph& kg, const PlanOptions& options);

// Byte size of a value as stored on the device (at least 4 so that every binding is non-empty).
uint64_t storage_bytes(const Node& n);

}  // namespace meganeura
