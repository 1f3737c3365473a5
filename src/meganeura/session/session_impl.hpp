#pragma once
// Private to session/: the state behind a Session, shared by session.cpp (build, step, I/O), debug.cpp
// (read_node_by_name, step_debug), profile.cpp (GPU timing profiles) and trace.cpp (timelines).
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "meganeura/ir/storage.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/session/pipeline.hpp"
#include "meganeura/session/trace.hpp"

namespace meganeura {

// A session's persistent arena (parameters, states, optimizer state, ...), freed when the last session using
// it goes: sessions built with share_with hold the arenas whose values they bind.
struct PersistentArena {
  std::shared_ptr<runtime::Device> device;
  std::vector<runtime::Buffer> buffers;
  PersistentArena(std::shared_ptr<runtime::Device> d, std::vector<runtime::Buffer> b)
      : device(std::move(d)), buffers(std::move(b)) {}
  ~PersistentArena() {
    try {
      device->wait();
      for (const runtime::Buffer& b : buffers) device->free(b);
    } catch (...) {
    }
  }
  PersistentArena(const PersistentArena&) = delete;
  PersistentArena& operator=(const PersistentArena&) = delete;
};

// A parameter or state another session may bind by name.
struct SharedValue {
  runtime::Buffer buffer;
  Shape shape;
  DType dtype = DType::F32;
  bool state = false;
  std::shared_ptr<PersistentArena> arena;
};

class SessionImpl {
 public:
  SessionConfig config;
  CompiledStep step;
  std::shared_ptr<runtime::Device> device;
  std::vector<runtime::Buffer> owned;  // buffers to free
  std::shared_ptr<PersistentArena> persistent;
  std::map<std::string, SharedValue> shared;  // every parameter and state by name, own or bound
  std::vector<runtime::Buffer> slot_buffer;   // per plan slot
  std::vector<runtime::KernelId> kernel_of;   // per dispatch
  std::string matmul_tiers;  // the matmul self-test's report (Mixed16 sessions), for plan dumps
  std::string tune_report;   // SessionConfig::tune: what build's tuning changed, for plan dumps
  float learning_rate = 0.0f;
  uint64_t steps = 0;  // updates submitted; mirrors the GPU's step counter
  int phase = 0;       // micro-steps accumulated since the last update

  // Frames in flight (SessionConfig::frames_in_flight): step t (1, 2, ...) runs in frame (t-1) % frames. A
  // frame has host-visible staging for every input and the learning rate, a readback area for every output,
  // and its own recorded lists, which copy the staging in first and the outputs out last: the host fills the
  // next frame while earlier steps run, and waits only for a frame it reuses.
  struct Staged {  // an input, or the learning rate (the hyper block's first word)
    NodeId node;   // invalid for the learning rate
    runtime::Buffer dst;
    uint64_t offset = 0, bytes = 0;  // in every frame's staging
    uint64_t version = 0;            // bumped by each set_input / set_learning_rate
    size_t newest = 0;               // a frame whose staging holds that version
  };
  struct Frame {
    runtime::Buffer staging, readback;
    std::byte* staging_map = nullptr;
    const std::byte* readback_map = nullptr;
    std::vector<uint64_t> versions;  // per Staged: the version this frame's staging holds
    // The step that updates (every step without accumulation); with gradient accumulation the step that only
    // accumulates; with GPU timing the timed step (below).
    std::unique_ptr<runtime::CommandList> list, accumulate_list, timed_list;
    uint64_t step = 0, submission = 0;  // the frame's latest step and its device submission; 0: none
    double traced_us = -1;  // trace clock at a traced submission whose GPU spans are not collected
    // Distributed training: the updating step cut after each gradient bucket's last producer (each segment
    // ends by copying its bucket to host memory), then the last segment (averaged gradients copied back,
    // updates, outputs). distributed.cpp.
    std::vector<std::unique_ptr<runtime::CommandList>> segments;
  };
  std::vector<Staged> staged;
  std::vector<uint64_t> readback_offset;  // per output, in every frame's readback
  std::vector<Frame> frames;
  uint64_t last_step = 0;        // steps submitted
  size_t last_update_frame = 0;  // frame of the latest updating step
  enum class ListKind : uint8_t { Update, Accumulate, Timed };
  // Waits for the next frame's previous step, brings its staging up to date, submits its list of `kind` and
  // returns that list (session.cpp). Step bookkeeping (phase, optimizer steps) is the caller's.
  void wait_and_refresh_staging(Frame& f);  // waits for the frame, then copies stale staged values into it
  runtime::CommandList& submit_frame(ListKind kind);

  // Distributed training (SessionConfig::distributed with more than one rank; distributed.cpp).
  struct GradientCopy {
    runtime::Buffer grad;  // the gradient's device buffer
    uint64_t offset = 0;   // bytes into the host buckets
    uint64_t bytes = 0;
  };
  struct Bucket {
    std::vector<GradientCopy> grads;
    uint64_t offset = 0, bytes = 0;  // its range of the host buckets
    size_t end = 0;                  // dispatches of the step (timed_kernels) before its cut
    std::string names;               // the parameters, for errors
  };
  std::vector<Bucket> buckets;  // in the order backward completes them
  runtime::Buffer bucket_host;  // host-visible: every bucket, back to back (f32)
  float* bucket_map = nullptr;
  std::vector<float> gather_scratch;  // ReduceOrder::Ranked: every rank's copy of the buckets
  DistributedStats dist_stats;
  bool distributed() const { return !buckets.empty(); }
  void submit_distributed();  // the updating step with its all-reduces; returns once the update is queued

  // GPU timing (SessionConfig::gpu_timing, or a trace): a second recording of the step with a barrier and two
  // timestamps around every dispatch (query 2i before dispatch i, 2i+1 after it); the normal list then
  // carries two timestamps around the whole step (grouped execution, the baseline of the overhead figure).
  std::vector<size_t> timed_kernels;  // kernel index of each dispatch of `list` and `timed_list`
  std::vector<bool> barrier_before;   // of `list`
  bool timed() const { return !frames.empty() && frames[0].timed_list != nullptr; }
  // MEGANEURA_TRACE: the process-wide trace for that path; steps then submit the timed list.
  Trace* trace = nullptr;
  void collect_gpu_spans(Frame& f);  // trace.cpp; waits for the frame's traced step
  void collect_gpu_spans() {         // every frame's
    for (Frame& f : frames) collect_gpu_spans(f);
  }

  ~SessionImpl() {
    if (!device) return;
    try {
      collect_gpu_spans();
      if (trace) trace->flush();
    } catch (...) {
    }
    try {
      device->wait();
    } catch (...) {
    }
    frames.clear();
    for (const runtime::Buffer& b : owned) device->free(b);
  }

  const Node& find_leaf(const std::string& fn, const std::string& name, Op op) const {
    const Graph& g = step.graph;
    const std::vector<NodeId>& leaves = leaves_of(op);
    for (NodeId n : leaves)
      if (g.node(n).prov.name == name) return g.node(n);
    std::string known;
    for (NodeId n : leaves) known += (known.empty() ? "" : ", ") + g.node(n).prov.name;
    throw SessionError("[Session::" + fn + "] expected the name of " +
                       (op == Op::Input       ? "an input"
                        : op == Op::Parameter ? "a parameter"
                                              : "a state") +
                       " (" + (known.empty() ? "none" : known) + "), got '" + name + "'");
  }
  // Op::Input, Op::Parameter, or Op::WriteSlice standing for the graph's states.
  const std::vector<NodeId>& leaves_of(Op op) const {
    const Graph& g = step.graph;
    return op == Op::Input ? g.inputs() : op == Op::Parameter ? g.parameters() : g.states();
  }
  NodeId leaf_id(const std::string& fn, const std::string& name, Op op) const {
    const Graph& g = step.graph;
    const Node& n = find_leaf(fn, name, op);
    for (NodeId id : leaves_of(op))
      if (&g.node(id) == &n) return id;
    throw SessionError("[Session::" + fn + "] internal: leaf lost");
  }

  const runtime::Buffer& buffer_of(NodeId n) const { return slot_buffer.at(step.plan.slot(step.kernels, n)); }

  void check_value(const std::string& fn, NodeId n, size_t count, DType given) const {
    const Node& nd = step.graph.node(n);
    size_t want = size_t(numel(nd.shape));
    if (count != want)
      throw SessionError("[Session::" + fn + "] expected " + std::to_string(want) + " values for '" +
                         nd.prov.name + "' of shape " + shape_str(nd.shape) + ", got " +
                         std::to_string(count));
    bool int_node = nd.dtype == DType::I32 || nd.dtype == DType::U32;
    if (int_node != (given == DType::I32))
      throw SessionError("[Session::" + fn + "] expected " + dtype_name(nd.dtype) + " data for '" +
                         nd.prov.name + "', got " + dtype_name(given));
  }
  DType stored_dtype(NodeId n) const { return step.graph.node(kernels_storage(n)).dtype; }
  uint64_t stored_bytes(NodeId n) const {
    return storage_bytes(stored_dtype(n), numel(step.graph.node(n).shape));
  }
  // `count` values (f32, or i32 for integer values) as n's stored dtype: f16/bf16 values are rounded to it.
  std::vector<std::byte> to_device(NodeId n, const void* data, size_t count, DType given) const {
    const DType dt = stored_dtype(n);
    if (dt == DType::F32 || (given == DType::I32 && dt != DType::F16 && dt != DType::BF16)) {
      const auto* p = static_cast<const std::byte*>(data);
      return std::vector<std::byte>(p, p + count * 4);
    }
    return to_storage(std::span(static_cast<const float*>(data), count), dt);
  }
  void upload_value(const std::string& fn, NodeId n, const void* data, size_t count, DType given) {
    check_value(fn, n, count, given);
    const std::vector<std::byte> bytes = to_device(n, data, count, given);
    device->upload(buffer_of(n), bytes.data(), bytes.size());
  }

  // n's value from its stored bytes (f32, f16 and bf16 widened, integers shown as floats).
  std::vector<float> to_floats(NodeId n, const void* bytes) const {
    return from_storage(bytes, size_t(numel(step.graph.node(n).shape)), stored_dtype(n));
  }

  std::vector<float> download_value(NodeId n) {
    device->wait();
    std::vector<std::byte> raw(stored_bytes(n));
    if (!raw.empty()) device->download(buffer_of(n), raw.data(), raw.size());
    return to_floats(n, raw.data());
  }
  NodeId kernels_storage(NodeId n) const { return step.kernels.storage_of(n); }
};

// Device-half helpers of session.cpp that the tuner (tune.cpp) reuses.
runtime::Buffer binding_buffer(const SessionImpl& s, const Binding& b);
runtime::KernelDesc kernel_desc(const SessionImpl& s,
                                const GeneratedKernel& k);  // compiled through the cache
void record_dispatch(SessionImpl& s, runtime::CommandList& list, size_t kernel);
// A frame's inputs and learning rate copied in from its staging, then a barrier (also ordering the list after
// earlier submissions); the outputs copied to its readback.
void copy_in(const SessionImpl& s, const SessionImpl::Frame& f, runtime::CommandList& list);
void copy_out(const SessionImpl& s, const SessionImpl::Frame& f, runtime::CommandList& list);
void setup_distributed(
    SessionImpl& s);  // distributed.cpp: buckets and host memory (nothing without distribution)
void record_segments(SessionImpl& s, SessionImpl::Frame& f);  // distributed.cpp
void record(SessionImpl& s);  // (re-)records every list of the step from s.step.code and s.kernel_of
TuneReport tune(SessionImpl& s, const TuneOptions& options);  // Session::tune_with (tune.cpp)

}  // namespace meganeura
