#pragma once
// The compiler's device-free half: Graph -> (compiled Graph, KernelGraph, MemoryPlan, GLSL kernels).
// session/pipeline.cpp lists the passes in order; Session construction adds the device half.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "meganeura/codegen/codegen.hpp"
#include "meganeura/plan/plan.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/schedule/schedule.hpp"
#include "meganeura/session/session.hpp"

namespace meganeura {

class Trace;

struct CompiledStep {
  Graph graph;  // differentiated and rewritten
  OptimizeReport report;
  std::vector<NodeId> outputs;                         // the user's outputs in `graph`
  std::vector<std::pair<NodeId, NodeId>> param_grads;  // (parameter, gradient) in `graph`, training only
  KernelGraph kernels;
  MemoryPlan plan;
  std::vector<GeneratedKernel> code;  // one per kernel, same order, plus a clearing
                                      // dispatch before each scatter-add made with atomics
                                      // and an f16 copy before a large Mixed16 matmul
  bool fuse = true;
  CodegenOptions codegen;  // what codegen ran with (the tuner regenerates kernels)
};

// Kernels already created on one device, by content hash. Sessions that share a device may share one
// cache, so an identical kernel is compiled and turned into a pipeline once (lavapipe JIT-compiles every
// pipeline, which dominates building many small sessions).
struct KernelCache {
  const runtime::Device* device = nullptr;  // set on first use; a cache never crosses devices
  std::map<uint64_t, runtime::KernelId> kernels;
};

// Extra knobs for tests; sessions use the defaults.
struct CompileOptions {
  bool fuse = true;                    // off: one kernel per node (fused vs unfused parity)
  KernelCache* cache = nullptr;        // shared across sessions on the same device; null: per session
  bool deterministic_scatter = false;  // scatter-add without float atomics even where the device has them
  Trace* trace = nullptr;              // MEGANEURA_TRACE: a CPU span per pass
  // The best matmul tier that passed the device's self-test (the session probes). Unset: the tier
  // SessionConfig::matmul_tier names, else scalar.
  std::optional<kernels::MatmulTier> matmul_best = std::nullopt;
  // Parameters and states of the same name bind this session's buffers (meganeura::build(g, config,
  // share_with)).
  const Session* share = nullptr;
  // build_with compiles for these capabilities instead of the device's: a subset of what the device has
  // (never more), so that a path the test device would not take runs on it (kernels without subgroup
  // arithmetic, as on devices whose subgroups are 64 wide).
  const runtime::DeviceCaps* caps = nullptr;
};

// Runs every pass that needs no device. Throws GraphError for a malformed graph (no outputs, an output
// that depends on no input or parameter, an op no archetype runs), naming the node.
CompiledStep compile_step(const Graph& g, const SessionConfig& config, const runtime::DeviceCaps& caps,
                          const CompileOptions& options = {});

// Replaces each tunable kernel's code with the winner Session::tune_with cached for this device under
// `cache_dir` (session/tune.cpp); a cached variant that no longer generates is skipped with a warning.
void apply_tune_cache(CompiledStep& step, const std::string& cache_dir, const runtime::DeviceCaps& caps);

// The kernels one recorded command list runs, in order: the update step (every kernel but the
// accumulate-only ones) or, with gradient accumulation, the accumulate-only step.
std::vector<size_t> step_kernels(const CompiledStep& step, bool update);
bool accumulates(const CompiledStep& step);  // the session records an accumulate-only list too

// Whether kernels[i] needs a barrier before it, from the byte ranges each kernel reads and writes.
std::vector<bool> plan_barriers(const CompiledStep& step, const std::vector<size_t>& kernels);

// MEGANEURA_DUMP_PLAN's text: for each recorded list, each dispatch with label, archetype, grid, bindings
// with byte sizes, and the barriers between them; then the memory plan.
std::string plan_text(const CompiledStep& step);

// Build with compile options (tests).
Session build_with(const Graph& g, const SessionConfig& config, std::shared_ptr<runtime::Device> device,
                   const CompileOptions& options);

}  // namespace meganeura
