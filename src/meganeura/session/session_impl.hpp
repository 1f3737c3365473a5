#pragma once
// Private to session/: the state behind a Session, shared by session.cpp (build, step, I/O), debug.cpp
// (read_node_by_name, step_debug), profile.cpp (GPU timing profiles) and trace.cpp (timelines).
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "meganeura/runtime/device.hpp"
#include "meganeura/session/pipeline.hpp"
#include "meganeura/session/trace.hpp"

namespace meganeura {

class SessionImpl {
 public:
  SessionConfig config;
  CompiledStep step;
  std::shared_ptr<runtime::Device> device;
  std::vector<runtime::Buffer> owned;       // buffers to free
  std::vector<runtime::Buffer> slot_buffer; // per plan slot
  std::vector<runtime::KernelId> kernel_of; // per dispatch
  std::unique_ptr<runtime::CommandList> list;             // the step that updates (every step without accumulation)
  std::unique_ptr<runtime::CommandList> accumulate_list;  // gradient accumulation: the step that only accumulates
  std::string matmul_tiers;  // the matmul self-test's report (Mixed16 sessions), for plan dumps
  std::string tune_report;   // SessionConfig::tune: what build's tuning changed, for plan dumps
  float learning_rate = 0.0f;
  uint64_t steps = 0;  // updates submitted; mirrors the GPU's step counter
  int phase = 0;       // micro-steps accumulated since the last update

  // GPU timing (SessionConfig::gpu_timing, or a trace): a second recording of the step with a barrier and two
  // timestamps around every dispatch (query 2i before dispatch i, 2i+1 after it); the normal list then carries
  // two timestamps around the whole step (grouped execution, the baseline of the overhead figure).
  std::unique_ptr<runtime::CommandList> timed_list;
  std::vector<size_t> timed_kernels;  // kernel index of each dispatch of `list` and `timed_list`
  std::vector<bool> barrier_before;   // of `list`
  // MEGANEURA_TRACE: the process-wide trace for that path; steps then submit the timed list.
  Trace* trace = nullptr;
  double submit_us = 0;            // trace clock at the last traced submission
  bool gpu_spans_pending = false;  // a traced submission whose timestamps are not in the trace yet
  void collect_gpu_spans();        // trace.cpp

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
    timed_list.reset();
    list.reset();
    accumulate_list.reset();
    for (const runtime::Buffer& b : owned) device->free(b);
  }

  const Node& find_leaf(const std::string& fn, const std::string& name, Op op) const {
    const Graph& g = step.graph;
    const std::vector<NodeId>& leaves = op == Op::Input ? g.inputs() : g.parameters();
    for (NodeId n : leaves)
      if (g.node(n).prov.name == name) return g.node(n);
    std::string known;
    for (NodeId n : leaves) known += (known.empty() ? "" : ", ") + g.node(n).prov.name;
    throw SessionError("[Session::" + fn + "] expected the name of " + (op == Op::Input ? "an input" : "a parameter") +
                       " (" + (known.empty() ? "none" : known) + "), got '" + name + "'");
  }
  NodeId leaf_id(const std::string& fn, const std::string& name, Op op) const {
    const Graph& g = step.graph;
    const Node& n = find_leaf(fn, name, op);
    for (NodeId id : op == Op::Input ? g.inputs() : g.parameters())
      if (&g.node(id) == &n) return id;
    throw SessionError("[Session::" + fn + "] internal: leaf lost");
  }

  const runtime::Buffer& buffer_of(NodeId n) const { return slot_buffer.at(step.plan.slot(step.kernels, n)); }

  void upload_value(const std::string& fn, NodeId n, const void* data, size_t count, DType given) {
    const Node& nd = step.graph.node(n);
    size_t want = size_t(numel(nd.shape));
    if (count != want)
      throw SessionError("[Session::" + fn + "] expected " + std::to_string(want) + " values for '" + nd.prov.name +
                         "' of shape " + shape_str(nd.shape) + ", got " + std::to_string(count));
    bool int_node = nd.dtype == DType::I32 || nd.dtype == DType::U32;
    if (int_node != (given == DType::I32))
      throw SessionError("[Session::" + fn + "] expected " + dtype_name(nd.dtype) + " data for '" + nd.prov.name +
                         "', got " + dtype_name(given));
    device->upload(buffer_of(n), data, count * 4);
  }

  std::vector<float> download_value(NodeId n) {
    const Node& nd = step.graph.node(kernels_storage(n));
    size_t count = size_t(numel(step.graph.node(n).shape));
    device->wait();
    if (nd.dtype == DType::F32) {
      std::vector<float> out(count);
      if (count) device->download(buffer_of(n), out.data(), count * 4);
      return out;
    }
    std::vector<int32_t> raw(count);
    if (count) device->download(buffer_of(n), raw.data(), count * 4);
    std::vector<float> out(count);
    for (size_t i = 0; i < count; ++i)
      out[i] = nd.dtype == DType::U32 ? float(uint32_t(raw[i])) : float(raw[i]);
    return out;
  }
  NodeId kernels_storage(NodeId n) const { return step.kernels.storage_of(n); }
};


// Device-half helpers of session.cpp that the tuner (tune.cpp) reuses.
runtime::Buffer binding_buffer(const SessionImpl& s, const Binding& b);
runtime::KernelDesc kernel_desc(const SessionImpl& s, const GeneratedKernel& k);  // compiled through the cache
void record(SessionImpl& s);  // (re-)records every list of the step from s.step.code and s.kernel_of
TuneReport tune(SessionImpl& s, const TuneOptions& options);  // Session::tune_with (tune.cpp)

}  // namespace meganeura
