#pragma once
// The Session: a graph compiled into one recorded GPU step, and its entry points.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "meganeura/config/config.hpp"
#include "meganeura/config/report.hpp"
#include "meganeura/ir/graph.hpp"

namespace meganeura {

namespace runtime {
class Device;
struct DeviceCaps;
struct PipelineExecutable;
}  // namespace runtime

// Why Session::read_node_by_name cannot return a value.
enum class ReadFailure : uint8_t {
  UnknownName,   // no node has that name
  NotComputed,   // the step does not need the value (dead code, or removed by a rewrite)
  FusedAway,     // computed inside a kernel and never stored; kernel() is the dispatch label that absorbed it
  Inlined,       // a scalar or fill, written into the kernels that read it as a literal
  MemoryReused,  // stored, but a later dispatch (kernel()) reuses its bytes in the aliased activation arena
};
const char* read_failure_name(ReadFailure r);

class NodeReadError : public SessionError {
 public:
  NodeReadError(const std::string& message, ReadFailure reason, std::string node, std::string kernel)
      : SessionError(message), reason_(reason), node_(std::move(node)), kernel_(std::move(kernel)) {}
  ReadFailure reason() const { return reason_; }
  const std::string& node() const { return node_; }      // the name asked for
  const std::string& kernel() const { return kernel_; }  // the dispatch label involved, "" if none

 private:
  ReadFailure reason_;
  std::string node_, kernel_;
};

// The first non-finite value step_debug() found. Values are scanned in the order the step meets them:
// parameters and optimizer moments before the step, inputs, each dispatch's result (outputs and stored
// gradients in any session, every value in a debug session), then parameters and moments after the update.
// So `node` is the first value that holds a NaN/Inf — where to start looking, not a root-cause guarantee (a
// finite value can already be wrong, and values that are not materialised are not seen).
struct NanReport {
  bool found = false;
  std::string node;       // the value's name, or its provenance label ("grad/blk3.qkv"), or op#id
  std::string op;         // its op
  std::string builder;    // file:line of the builder call that made it (or its forward node, for gradients)
  std::string kernel;     // label of the dispatch that wrote it ("" for an input, parameter or moment)
  std::string stage;      // "before the step" / "after the update" for parameters and moments, else ""
  size_t dispatch = 0;    // index of that dispatch in the plan
  size_t index = 0;       // first non-finite element
  float value = 0.0f;     // its value (NaN or ±Inf)
  size_t non_finite = 0;  // non-finite elements in that value
  size_t values_scanned = 0;
  std::string to_text() const;
};

struct ProfileOptions {
  int warmup = 3;       // steps before measuring
  int iterations = 10;  // timed samples (each of the grouped and the instrumented step)
};

// Session::tune_with: a search over each kernel's variants (workgroup and tile sizes, matmul tiers; the
// search space is codegen/variant.hpp's tune_candidates), timed on the device.
struct TuneOptions {
  int warmup = 2;          // untimed runs of each candidate before its timed ones
  int iterations = 10;     // timed runs of each candidate; the median counts
  int max_candidates = 0;  // per kernel, the current variant included; 0: all
  double time_budget_s =
      0;  // stop starting new kernels after this many seconds (the rest keep theirs); 0: none
  std::vector<std::string>
      archetypes;  // archetype names to tune ("pointwise", "matmul", ...); empty: all tunable
  bool cache =
      true;  // reuse winners stored under SessionConfig::cache_dir (not timed again) and store new ones
};

struct TuneKernel {
  size_t dispatch = 0;  // index in the step's code as built (the plan dump's #N before tuning)
  std::string label, archetype;
  std::string old_variant,
      new_variant;                // KernelVariant::to_string(): "default", "wg=128 per=2", "tier=gemv", ...
  double old_us = 0, new_us = 0;  // median times (0: not timed)
  int candidates = 0;             // variants timed
  std::string note;  // why it was not timed: "not tunable", "cached", "not selected", "time budget",
                     // or a kernel's first pass (f16 copy, attention's parts: timed with the next row)
};

struct TuneReport {
  std::string device;
  std::string timer;                // "gpu timestamps" or "wall clock" (a device without timestamp queries)
  std::vector<TuneKernel> kernels;  // every dispatch of the step as built, in order
  size_t changed = 0;               // kernels whose variant changed
  double seconds = 0;               // wall time of the search
  std::string cache_path;           // the file read and written ("" with the cache off)
  std::string to_text() const;
};

// One distinct pipeline of a session and what the driver reports about it (include runtime/device.hpp to use
// `executables`).
struct PipelineReport {
  std::string label;               // of its first dispatch
  std::string variant;             // the template variant (profile "family")
  std::string kernel_hash;         // 16 hex digits, as in profiles
  std::vector<size_t> dispatches;  // indices (into the kernel graph's code) of the dispatches that run it
  std::vector<runtime::PipelineExecutable> executables;
};

// What the distributed step (SessionConfig::distributed) spent, summed over the steps since the session was
// built.
struct DistributedStats {
  uint64_t steps = 0;     // updating steps with all-reduces
  size_t buckets = 0;     // gradient buckets per step
  uint64_t bytes = 0;     // gradient bytes reduced per step
  double step_s = 0;      // host time inside step(): first submission to the update's submission
  double backward_s = 0;  // from the first submission until the GPU finished the last bucket
  double reduce_s = 0;    // time at least one bucket's all-reduce was in flight
  double exposed_s = 0;   // time step() waited for all-reduces after the GPU finished the last bucket
  double hidden_fraction() const { return reduce_s > 0 ? 1.0 - exposed_s / reduce_s : 0.0; }
  std::string to_text() const;
};

class SessionImpl;
class Session;
struct CompileOptions;
Session build_with(const Graph& g, const SessionConfig& config, std::shared_ptr<runtime::Device> device,
                   const CompileOptions& options);

class Session {
 public:
  Session(std::unique_ptr<SessionImpl> impl);
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  // Inputs and the learning rate go to the next step's staging, copied in by that step: they never wait for
  // running steps, only for the step that last used the same frame (frames_in_flight steps back).
  void set_input(const std::string& name, std::span<const float> data);
  void set_input(const std::string& name, std::span<const int32_t> data);
  // Parameters, optimizer state, gradients and debug reads wait for every submitted step first.
  // Values are rounded to the parameter's dtype (f16, bf16) on the way.
  void set_parameter(const std::string& name, std::span<const float> data);
  // The parameter's bytes as stored on the device (numel × dtype_size: f16/bf16 bits as a checkpoint holds
  // them), uploaded unchanged. SessionError for another size.
  void set_parameter_bytes(const std::string& name, std::span<const std::byte> data);
  std::vector<float> read_parameter(const std::string& name);
  // States (Graph::state): set, read, and zero one (or, with no name, every state of the session) from the
  // host; they wait for every submitted step. A state shared with other sessions changes for them too.
  // Truncating a KV cache needs no write: the step's valid-length input decides what attention sees.
  void set_state(const std::string& name, std::span<const float> data);
  void set_state(const std::string& name, std::span<const int32_t> data);  // an i32 state (token ids)
  std::vector<float> read_state(const std::string& name);
  void reset_state(const std::string& name = "");
  // The output of the latest step (waits for it).
  std::vector<float> read_output(size_t index);
  std::vector<float> read_output(const std::string& name);
  // The output of step `step` (an id from step()); waits for that step only. SessionError naming the step
  // once frames_in_flight later steps were submitted (its frame's readback was reused).
  std::vector<float> read_output(size_t index, uint64_t step);
  std::vector<float> read_output(const std::string& name, uint64_t step);
  // The value of a named node after step() and wait(): in a debug session (SessionConfig::debug()) every
  // value the step computes; otherwise only stored ones. Throws NodeReadError with the reason and the kernel
  // involved.
  std::vector<float> read_node_by_name(const std::string& name);
  void set_learning_rate(double lr);

  // Training state beyond the parameters, for checkpoints and host-side updates (used by train/).
  // Training sessions, after wait(). With an optimizer, only sessions that keep gradients (keep_gradients,
  // debug sessions, clipping or accumulation); otherwise a SessionError.
  std::vector<float> read_gradient(const std::string& parameter);
  std::vector<OptimizerStateInfo> optimizer_state() const;  // empty when the optimizer keeps none
  std::vector<float> read_optimizer_state(const std::string& name);
  void set_optimizer_state(const std::string& name, std::span<const float> data);
  uint64_t optimizer_step() const;         // updates applied so far (Adam's bias-correction count)
  void set_optimizer_step(uint64_t step);  // also drops a partly accumulated update

  // Submits the recorded step and returns its id (1, 2, ...) at once; up to frames_in_flight steps queue on
  // the GPU (a step waits only for the one frames_in_flight steps before it). With grad_accumulation k, every
  // k-th call updates and the others only accumulate gradients.
  uint64_t step();
  void wait();  // blocks until every submitted step finished
  void run() {
    step();
    wait();
  }
  // step() + wait(), then scans the outputs (and gradients) for NaN/Inf — in a debug session every stored
  // value — and reports the first offending one. Not a root-cause guarantee: see NanReport.
  NanReport step_debug();

  // A per-dispatch GPU timing profile as JSON (schema in docs/debugging.md). Needs a session built with
  // gpu_timing (MEGANEURA_GPU_TIMING=1) on a device with timestamps. Runs warmup + 2·iterations real steps (a
  // training session updates its parameters).
  std::string profile(const ProfileOptions& options = {});

  // GPU time of the last submitted updating step (with grad_accumulation: the last one that updated) in ms,
  // from two timestamps around the whole recorded step
  // (sessions built with gpu_timing on a device with timestamps; otherwise SessionError). Waits for the step.
  double last_step_gpu_ms();

  // Times every candidate variant of each kernel of the step on the device, keeps the fastest, re-records the
  // step with the winners and (TuneOptions::cache) stores them on disk for later builds of the same kernels
  // on this device. Candidates run alone on the session's own buffers; every buffer the step keeps between
  // steps (parameters, optimizer state, inputs, outputs, gradients, the step counter) is saved first and
  // restored afterwards, so training continues as if tune_with had not run. Throws ConfigError for bad
  // options.
  TuneReport tune_with(const TuneOptions& options = {});

  // Every distinct pipeline with the driver's statistics (sessions built with gpu_timing or pipeline_ir) and
  // internal representations (pipeline_ir), on devices with VK_KHR_pipeline_executable_properties; otherwise
  // the executables are empty.
  std::vector<PipelineReport> pipelines() const;

  // Distributed training (SessionConfig::distributed): rank `root`'s parameters copied to every rank (call it
  // on every rank after initialising or loading them; a collective). A session without distribution returns
  // at once.
  void broadcast_parameters(int root = 0);
  DistributedStats distributed_stats() const;

  MemorySummary memory_summary() const;
  const OptimizeReport& report() const;
  const Graph& graph() const;  // the compiled (differentiated, rewritten) graph
  const runtime::DeviceCaps& caps() const;
  const SessionConfig& config() const;

 private:
  friend Session build_with(const Graph&, const SessionConfig&, std::shared_ptr<runtime::Device>,
                            const CompileOptions&);
  std::unique_ptr<SessionImpl> impl_;
};

Session build(const Graph& g, const SessionConfig& config);
// The same on a device the caller opened (tests share one device among many sessions).
Session build(const Graph& g, const SessionConfig& config, std::shared_ptr<runtime::Device> device);
// A session over `share_with`'s device whose parameters and states of the same name use share_with's buffers
// (no copy): prefill and decode graphs of one model, or training and evaluation. Equal names must have equal
// shapes and dtypes (SessionError otherwise); the buffers live as long as any session using them.
Session build(const Graph& g, const SessionConfig& config, const Session& share_with);
Session build_session(const Graph& g);            // training, config from the environment
Session build_inference_session(const Graph& g);  // no gradients, no optimizer buffers

}  // namespace meganeura
