// The device half of a session: buffers from the memory plan, shaders compiled and deduplicated by
// content hash, one command list recorded once and replayed by step().
#include "meganeura/session/session.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>

#include "meganeura/kernels/matmul.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/session/pipeline.hpp"
#include "meganeura/session/session_impl.hpp"
#include "meganeura/shader/coopmat_khr.hpp"
#include "meganeura/shader/shader.hpp"

namespace meganeura {

namespace {

// The buffer `other` holds for slot `sl` by name, if it shares one (checked to match), else an empty buffer.
runtime::Buffer shared_buffer(SessionImpl& s, const Slot& sl, const SessionImpl* other) {
  if (!other || (sl.kind != StorageKind::Parameter && sl.kind != StorageKind::State)) return {};
  const Node& nd = s.step.graph.node(sl.node);
  auto it = other->shared.find(nd.prov.name);
  if (it == other->shared.end()) return {};
  const SharedValue& v = it->second;
  if (v.shape != nd.shape || v.dtype != nd.dtype || v.state != (sl.kind == StorageKind::State))
    throw SessionError("[build] expected '" + nd.prov.name + "' to match the session it shares with (" +
                       (v.state ? "state " : "parameter ") + dtype_name(v.dtype) + shape_str(v.shape) +
                       "), got " + (sl.kind == StorageKind::State ? "state " : "parameter ") +
                       dtype_name(nd.dtype) + shape_str(nd.shape));
  s.shared[nd.prov.name] = v;
  return v.buffer;
}

void allocate(SessionImpl& s, const SessionImpl* share) {
  const MemoryPlan& plan = s.step.plan;
  runtime::Device& dev = *s.device;
  s.slot_buffer.resize(plan.slots.size());
  // The activation arena that the plan aliases: one buffer, or parts of plan.part_bytes where the device
  // binds less than the arena (no slot straddles two parts). Persistent values (zeroed once: parameters
  // default to zero and optimizer moments must start there) are allocated one by one, unless bound to the
  // buffer of a session this one shares with, and live as long as any session using them (PersistentArena).
  auto allocate_arena = [&](uint64_t bytes) {
    std::vector<runtime::Buffer> parts;
    const uint64_t part = plan.part_bytes ? plan.part_bytes : bytes;
    for (uint64_t at = 0; at < bytes; at += part) {
      parts.push_back(dev.alloc(std::min(part, bytes - at)));
      s.owned.push_back(parts.back());
    }
    return parts;
  };
  const std::vector<runtime::Buffer> arena = allocate_arena(plan.arena_bytes);
  std::vector<runtime::Buffer> own;
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    const Slot& sl = plan.slots[i];
    if (in_arena(sl.kind)) {
      const uint64_t part = plan.part_bytes ? plan.part_bytes : UINT64_MAX;
      s.slot_buffer[i] = runtime::slice(arena.at(size_t(sl.offset / part)), sl.offset % part, sl.bytes);
    } else if (const runtime::Buffer b = shared_buffer(s, sl, share); b.valid()) {
      s.slot_buffer[i] = b;
    } else {
      own.push_back(dev.alloc(std::max<uint64_t>(sl.bytes, 4)));
      dev.fill_zero(own.back());
      s.slot_buffer[i] = runtime::slice(own.back(), 0, sl.bytes);
    }
  }
  s.persistent = std::make_shared<PersistentArena>(s.device, std::move(own));
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    const Slot& sl = plan.slots[i];
    if (sl.kind != StorageKind::Parameter && sl.kind != StorageKind::State) continue;
    const Node& nd = s.step.graph.node(sl.node);
    if (!s.shared.count(nd.prov.name))
      s.shared[nd.prov.name] = {s.slot_buffer[i], nd.shape, nd.dtype, sl.kind == StorageKind::State,
                                s.persistent};
  }
  // Constants carry their data from the graph.
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    const Slot& sl = plan.slots[i];
    if (sl.kind != StorageKind::Constant) continue;
    const std::vector<float>& data = s.step.graph.constant_data(sl.node);
    if (!data.empty()) dev.upload(s.slot_buffer[i], data.data(), data.size() * 4);
  }
  if (plan.hyper) s.learning_rate = float(s.config.optimizer.learning_rate);
}

// Inputs and outputs larger than this skip the frames: such an input is uploaded when set (after every
// submitted step finished), such an output downloaded when read (only the latest step's). Copying them
// through staging on every step would cost more than queueing saves, and a value set once would be copied
// again every step.
constexpr uint64_t kFrameValueBytes = 16ull << 20;

// Each frame's staging (inputs, then the learning rate) and readback (outputs), 16-byte aligned entries.
void allocate_frames(SessionImpl& s) {
  const int frames = s.config.frames_in_flight;
  if (frames < 1 || frames > 16)
    throw ConfigError("[build] expected SessionConfig::frames_in_flight in 1..16, got " +
                      std::to_string(frames));
  const CompiledStep& st = s.step;
  auto align = [](uint64_t v) { return (v + 15) / 16 * 16; };
  uint64_t staging = 0, readback = 0;
  for (NodeId in : st.graph.inputs()) {
    if (!st.plan.slot_of.count(st.kernels.storage_of(in))) continue;  // nothing reads it
    const uint64_t bytes = s.stored_bytes(in);
    if (bytes > kFrameValueBytes) continue;
    s.staged.push_back({in, s.buffer_of(in), staging, bytes});
    staging = align(staging + bytes);
  }
  if (st.plan.hyper) {
    s.staged.push_back({NodeId{}, runtime::slice(s.slot_buffer[*st.plan.hyper], 0, 4), staging, 4});
    staging = align(staging + 4);
  }
  for (NodeId o : st.outputs) {
    const uint64_t bytes = s.stored_bytes(o);
    s.readback_offset.push_back(bytes > kFrameValueBytes ? UINT64_MAX : readback);
    if (bytes <= kFrameValueBytes) readback = align(readback + bytes);
  }
  runtime::Device& dev = *s.device;
  s.frames.resize(size_t(frames));
  for (SessionImpl::Frame& f : s.frames) {
    f.staging = dev.alloc_host(staging);
    s.owned.push_back(f.staging);
    f.readback = dev.alloc_host(readback);
    s.owned.push_back(f.readback);
    f.staging_map = dev.host_pointer(f.staging);
    f.readback_map = dev.host_pointer(f.readback);
    // Version 0 of every staged value: zero inputs (as the zeroed arena) and the configured learning rate.
    if (staging) std::memset(f.staging_map, 0, staging);
    if (st.plan.hyper) std::memcpy(f.staging_map + s.staged.back().offset, &s.learning_rate, 4);
    f.versions.assign(s.staged.size(), 0);
  }
}

}  // namespace

runtime::Buffer binding_buffer(const SessionImpl& s, const Binding& b) {
  switch (b.kind) {
    case Binding::Value: return s.buffer_of(b.node);
    case Binding::Moment: return s.slot_buffer.at(s.step.plan.moments.at({b.node, b.moment}));
    case Binding::Accumulator: return s.slot_buffer.at(s.step.plan.accumulators.at(b.node));
    case Binding::Hyper: return s.slot_buffer.at(*s.step.plan.hyper);
    case Binding::Scratch: {
      const runtime::Buffer whole = s.slot_buffer.at(s.step.plan.scratch.at(b.node));
      return b.offset ? runtime::slice(whole, b.offset, b.bytes) : whole;
    }
    case Binding::Tickets: return s.slot_buffer.at(s.step.plan.tickets.at(b.node));
  }
  return {};
}

// gpu_timing captures the driver's statistics of each pipeline (profile rows), pipeline_ir its code as well.
static runtime::PipelineCapture pipeline_capture(const SessionConfig& c) {
  return c.pipeline_ir  ? runtime::PipelineCapture::Representations
         : c.gpu_timing ? runtime::PipelineCapture::Statistics
                        : runtime::PipelineCapture::None;
}

runtime::KernelDesc kernel_desc(const SessionImpl& s, const GeneratedKernel& k) {
  shader::CompileOptions co;
  co.cache_dir = s.config.cache_dir;
  co.device_key = s.device->caps().fingerprint();
  shader::CompileResult r = shader::compile_glsl({k.label, k.glsl, {}}, co);
  runtime::KernelDesc d;
  d.label = k.label;
  d.spirv = std::move(r.spirv);
  if (k.rewrite_to_khr) d.spirv = shader::rewrite_coopmat_nv_to_khr(d.spirv, d.label);
  d.num_buffers = uint32_t(k.bindings.size());
  d.push_constant_bytes = uint32_t(k.push.size() * 4);
  d.spec_constants = k.spec_constants;
  d.required_subgroup_size = k.required_subgroup_size;
  d.capture = pipeline_capture(s.config);
  return d;
}

void record_dispatch(SessionImpl& s, runtime::CommandList& list, size_t kernel) {
  const GeneratedKernel& k = s.step.code[kernel];
  std::vector<runtime::Buffer> bufs;
  for (const Binding& b : k.bindings) bufs.push_back(binding_buffer(s, b));
  list.begin_label(k.label);  // the provenance label in Vulkan debug tools (RenderDoc, Nsight)
  list.dispatch(s.kernel_of[kernel], bufs, std::as_bytes(std::span(k.push)), k.grid[0], k.grid[1], k.grid[2]);
  list.end_label();
}

// A frame's inputs and learning rate, copied from its staging before the first dispatch.
// The barrier after them also orders the step after earlier submissions (of this session or one sharing its
// parameters and states).
void copy_in(const SessionImpl& s, const SessionImpl::Frame& f, runtime::CommandList& list) {
  for (const SessionImpl::Staged& v : s.staged)
    if (v.bytes) list.copy(runtime::slice(f.staging, v.offset, v.bytes), v.dst, v.bytes);
  list.barrier();
}

// The outputs, copied to the frame's readback after the last dispatch (and its barrier).
void copy_out(const SessionImpl& s, const SessionImpl::Frame& f, runtime::CommandList& list) {
  for (size_t i = 0; i < s.step.outputs.size(); ++i) {
    const NodeId o = s.step.outputs[i];
    const uint64_t bytes = s.stored_bytes(o);
    if (bytes && s.readback_offset[i] != UINT64_MAX)
      list.copy(s.buffer_of(o), runtime::slice(f.readback, s.readback_offset[i], bytes), bytes);
  }
}

namespace {

void compile_kernels(SessionImpl& s, KernelCache* shared) {
  KernelCache local;
  KernelCache& cache = shared ? *shared : local;
  if (!cache.device) cache.device = s.device.get();
  if (cache.device != s.device.get())
    throw SessionError(
        "[build] expected a kernel cache made for this session's device, got one of another device");
  std::map<uint64_t, runtime::KernelId>& by_hash = cache.kernels;
  const uint64_t salt =
      uint64_t(pipeline_capture(s.config)) * 0x9E3779B97F4A7C15ull;  // a capture is another pipeline
  for (const GeneratedKernel& k : s.step.code) {
    const uint64_t key = k.hash ^ salt;
    auto it = by_hash.find(key);
    if (it != by_hash.end()) {
      s.kernel_of.push_back(it->second);
      continue;
    }
    runtime::KernelId id = s.device->create_kernel(kernel_desc(s, k));
    by_hash[key] = id;
    s.kernel_of.push_back(id);
  }
}

bool timing(const SessionImpl& s) {
  return (s.config.gpu_timing || s.trace) && s.device->caps().timestamps && !s.step.code.empty();
}

// With `timestamps`, query 0 before the first command and 1 after the last (the grouped step's GPU time).
std::unique_ptr<runtime::CommandList> record_list(SessionImpl& s, const SessionImpl::Frame& f,
                                                  const std::vector<size_t>& kernels, bool timestamps) {
  const std::vector<bool> barrier_before = plan_barriers(s.step, kernels);
  std::unique_ptr<runtime::CommandList> list = s.device->record(timestamps ? 2 : 0);
  if (timestamps) list->timestamp(0);
  copy_in(s, f, *list);
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (barrier_before[i]) list->barrier();
    record_dispatch(s, *list, kernels[i]);
  }
  // The readback copies, host reads after wait() and the next step's first kernel see every write of this
  // one.
  list->barrier();
  copy_out(s, f, *list);
  if (timestamps) list->timestamp(1);
  list->finish();
  return list;
}

}  // namespace

void record(SessionImpl& s) {
  s.timed_kernels = step_kernels(s.step, true);
  s.barrier_before = plan_barriers(s.step, s.timed_kernels);
  for (SessionImpl::Frame& f : s.frames) {
    f.list = record_list(s, f, s.timed_kernels, timing(s));
    if (accumulates(s.step)) f.accumulate_list = record_list(s, f, step_kernels(s.step, false), false);
    if (s.distributed()) record_segments(s, f);
    if (!timing(s)) continue;
    // The timed list: the updating step with every dispatch alone between two timestamps, so each one's time
    // is its own.
    const std::vector<size_t>& ks = s.timed_kernels;
    f.timed_list = s.device->record(uint32_t(2 * ks.size()));
    copy_in(s, f, *f.timed_list);
    for (size_t i = 0; i < ks.size(); ++i) {
      f.timed_list->barrier();
      f.timed_list->timestamp(uint32_t(2 * i));
      record_dispatch(s, *f.timed_list, ks[i]);
      f.timed_list->timestamp(uint32_t(2 * i + 1));
    }
    f.timed_list->barrier();
    copy_out(s, f, *f.timed_list);
    f.timed_list->finish();
  }
}

namespace {

void dump_plan(const SessionImpl& s) {
  if (s.config.dump_plan.empty()) return;
  std::string text = plan_text(s.step) + s.matmul_tiers + s.tune_report;
  if (s.config.dump_plan == "-" || s.config.dump_plan == "1") {  // README: =1 prints
    std::fputs(text.c_str(), stderr);
    return;
  }
  std::ofstream f(s.config.dump_plan, std::ios::app);
  if (!f)
    throw ConfigError("[build] expected MEGANEURA_DUMP_PLAN to name a writable file, got '" +
                      s.config.dump_plan + "'");
  f << text;
}

// The best matmul tier for this device: the start-up self-test (kernels::probe_matmul_tiers), run once per
// device and forced tier. Only Mixed16 sessions can use a cooperative tier (f16 inputs), so F32 sessions and
// devices without cooperative matrices skip the probe. A forced cooperative tier that fails is an error.
kernels::MatmulTier matmul_best(SessionImpl& s) {
  const SessionConfig& c = s.config;
  if (c.matmul_tier == MatmulTier::Scalar) return MatmulTier::Scalar;
  const runtime::DeviceCaps& caps = s.device->caps();
  const bool coop = !c.matmul_tier ? (caps.coopmat_nv || caps.coopmat_khr) : true;
  if (c.precision != Precision::Mixed16 || !coop) {
    if (c.matmul_tier)
      throw ConfigError(
          std::string("[build] expected MEGANEURA_MATMUL=") + tier_name(*c.matmul_tier) +
          " only with SessionConfig::precision Mixed16 (cooperative tiers take f16 inputs), got F32");
    return kernels::MatmulTier::Scalar;
  }
  struct Entry {
    std::string fingerprint;
    kernels::MatmulTierChoice choice;
  };
  static std::mutex mutex;
  static std::map<std::pair<const runtime::Device*, std::optional<MatmulTier>>, Entry> probed;
  std::lock_guard<std::mutex> lock(mutex);
  Entry& e = probed[{s.device.get(), c.matmul_tier}];
  if (e.fingerprint != caps.fingerprint()) {
    shader::CompileOptions co;
    co.cache_dir = c.cache_dir;
    co.device_key = caps.fingerprint();
    e.choice = kernels::probe_matmul_tiers(*s.device, co, c.matmul_tier);
    e.fingerprint = caps.fingerprint();
  }
  s.matmul_tiers = e.choice.to_text();
  if (c.matmul_tier && e.choice.best != *c.matmul_tier)
    throw ConfigError(std::string("[build] expected MEGANEURA_MATMUL=") + tier_name(*c.matmul_tier) +
                      " to pass the start-up self-test, got:\n" + e.choice.to_text());
  return e.choice.best;
}

// The disk cache only saves time: a directory that cannot be created or written turns it off with one
// warning per directory and process, instead of failing every write silently.
bool cache_dir_usable(const std::string& dir) {
  if (dir.empty()) return true;
  static std::mutex mu;
  static std::map<std::string, bool> known;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = known.find(dir); it != known.end()) return it->second;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string why = ec ? ec.message() : "";
  if (why.empty()) {
    const std::filesystem::path probe = std::filesystem::path(dir) / (".probe-" + std::to_string(::getpid()) +
                                                                      "-" + std::to_string(known.size()));
    std::ofstream f(probe);
    if (!f) why = "cannot create files in it";
    f.close();
    std::filesystem::remove(probe, ec);
  }
  if (!why.empty())
    std::fprintf(
        stderr,
        "meganeura: warning: the cache directory '%s' (MEGANEURA_CACHE_DIR / SessionConfig::cache_dir) is "
        "unusable (%s); shaders and tuning results are not cached\n",
        dir.c_str(), why.c_str());
  return known[dir] = why.empty();
}

// SessionConfig::init: each parameter of the user's graph the step stores gets its layer's rule
// (Graph::init_of), except those bound to the buffers of the session `share` (they hold that session's values
// already).
void initialise_parameters(SessionImpl& s, const Graph& g, const SessionImpl* share) {
  if (s.config.init != ParameterInit::Seeded) return;
  std::unordered_map<std::string, NodeId> user;
  for (NodeId p : g.parameters()) user.emplace(g.node(p).prov.name, p);
  for (NodeId n : s.step.graph.parameters()) {
    const Node& nd = s.step.graph.node(n);
    if (s.step.graph.is_state(n) || (share && share->shared.count(nd.prov.name))) continue;
    if (nd.dtype == DType::I32 || nd.dtype == DType::U32) continue;  // integer parameters start at zero
    if (!s.step.plan.slot_of.count(s.kernels_storage(n))) continue;  // not read by the step
    auto it = user.find(nd.prov.name);
    const ParamInit rule = it == user.end() ? ParamInit{} : g.init_of(it->second);
    const std::vector<float> v = initial_values(nd.prov.name, nd.shape, rule, s.config.seed);
    s.upload_value("build", n, v.data(), v.size(), DType::F32);
  }
}

}  // namespace

Session build_with(const Graph& g, const SessionConfig& config, std::shared_ptr<runtime::Device> device,
                   const CompileOptions& options) {
  // Checked before a device is opened: a bad combination costs nothing and is testable without a GPU.
  if (config.training && (config.precision == Precision::F16 || config.precision == Precision::BF16))
    throw ConfigError(std::string("[build] expected precision f32 or mixed16 for a training session (f16 and "
                                  "bf16 store weights in 16 bits for inference; mixed16 trains with f16 "
                                  "matmul inputs), got ") +
                      precision_name(config.precision));
  auto impl = std::make_unique<SessionImpl>();
  impl->config = config;
  if (!config.training) impl->config.optimizer.kind = OptimizerKind::None;
  if (!device && options.share) device = options.share->impl_->device;
  if (!device) {
    runtime::DeviceOptions o;
    o.device_id = config.device_id;
    if (config.distributed.comm)
      o.slot = uint32_t(config.distributed.comm->local_rank());  // a GPU per local rank
    o.validation = config.validation;
    o.host_visible = config.host_visible;
    device = runtime::open_device(o);
  }
  if (!config.trace_path.empty()) impl->trace = &Trace::at(config.trace_path);
  if (!cache_dir_usable(config.cache_dir)) impl->config.cache_dir.clear();
  Trace::Scope whole(impl->trace, "build", "build");
  impl->device = std::move(device);
  CompileOptions co = options;
  co.trace = impl->trace;
  if (!co.matmul_best) co.matmul_best = matmul_best(*impl);
  impl->step = compile_step(g, impl->config, options.caps ? *options.caps : impl->device->caps(), co);
  {
    Trace::Scope t(impl->trace, "allocate", "build");
    allocate(*impl, options.share ? options.share->impl_.get() : nullptr);
    allocate_frames(*impl);
    setup_distributed(*impl);
  }
  {
    Trace::Scope t(impl->trace, "initialise parameters", "build");
    initialise_parameters(*impl, g, options.share ? options.share->impl_.get() : nullptr);
  }
  {
    Trace::Scope t(impl->trace, "compile shaders", "build");
    compile_kernels(*impl, options.cache);
  }
  {
    Trace::Scope t(impl->trace, "record", "build");
    record(*impl);
  }
  if (impl->config.tune) {  // MEGANEURA_TUNE; the report goes with the plan dump
    Trace::Scope t(impl->trace, "tune", "build");
    const TuneReport r = tune(*impl, {});
    impl->tune_report = r.to_text();
  }
  dump_plan(*impl);
  return Session(std::move(impl));
}

Session build(const Graph& g, const SessionConfig& config, std::shared_ptr<runtime::Device> device) {
  return build_with(g, config, std::move(device), {});
}
Session build(const Graph& g, const SessionConfig& config) { return build_with(g, config, nullptr, {}); }
Session build(const Graph& g, const SessionConfig& config, const Session& share_with) {
  CompileOptions o;
  o.share = &share_with;
  return build_with(g, config, nullptr, o);
}

Session build_session(const Graph& g) { return build(g, SessionConfig::from_env()); }

Session build_inference_session(const Graph& g) {
  SessionConfig c = SessionConfig::from_env();
  c.training = false;
  c.optimizer.kind = OptimizerKind::None;
  return build(g, c);
}

Session::Session(std::unique_ptr<SessionImpl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

namespace {

// Writes staged value `i` into the next frame's staging, once the step that last used that frame finished.
void stage(SessionImpl& s, size_t i, const void* data) {
  SessionImpl::Staged& v = s.staged[i];
  const size_t next = size_t(s.last_step % s.frames.size());
  SessionImpl::Frame& f = s.frames[next];
  s.device->wait(f.submission);
  std::memcpy(f.staging_map + v.offset, data, v.bytes);
  f.versions[i] = ++v.version;
  v.newest = next;
}

void stage_input(SessionImpl& s, const std::string& name, const void* data, size_t count, DType given) {
  const NodeId n = s.leaf_id("set_input", name, Op::Input);
  s.check_value("set_input", n, count, given);
  const std::vector<std::byte> bytes = s.to_device(n, data, count, given);
  for (size_t i = 0; i < s.staged.size(); ++i)
    if (s.staged[i].node == n) return stage(s, i, bytes.data());
  if (s.step.plan.slot_of.count(s.kernels_storage(n)))
    s.device->upload(s.buffer_of(n), bytes.data(), bytes.size());
}

}  // namespace

void SessionImpl::wait_and_refresh_staging(Frame& f) {
  device->wait(f.submission);
  // A frame's staging copy of each host-written value (inputs, scalars) is brought up to the newest version
  // only where it is stale: values a step did not rewrite cost nothing.
  for (size_t i = 0; i < staged.size(); ++i) {
    const Staged& v = staged[i];
    if (f.versions[i] == v.version) continue;
    std::memcpy(f.staging_map + v.offset, frames[v.newest].staging_map + v.offset, v.bytes);
    f.versions[i] = v.version;
  }
}

runtime::CommandList& SessionImpl::submit_frame(ListKind kind) {
  const size_t next = size_t(last_step % frames.size());
  Frame& f = frames[next];
  collect_gpu_spans(f);  // before its queries are reused
  wait_and_refresh_staging(f);
  runtime::CommandList& list = kind == ListKind::Timed    ? *f.timed_list
                               : kind == ListKind::Update ? *f.list
                                                          : *f.accumulate_list;
  if (kind == ListKind::Timed && trace) f.traced_us = Trace::now_us();
  f.submission = device->submit(list);
  f.step = ++last_step;
  if (kind != ListKind::Accumulate) last_update_frame = next;
  return list;
}

void Session::set_input(const std::string& name, std::span<const float> data) {
  stage_input(*impl_, name, data.data(), data.size(), DType::F32);
}
void Session::set_input(const std::string& name, std::span<const int32_t> data) {
  stage_input(*impl_, name, data.data(), data.size(), DType::I32);
}
void Session::set_parameter(const std::string& name, std::span<const float> data) {
  NodeId n = impl_->leaf_id("set_parameter", name, Op::Parameter);
  impl_->upload_value("set_parameter", n, data.data(), data.size(), DType::F32);
}
void Session::set_parameter_bytes(const std::string& name, std::span<const std::byte> data) {
  SessionImpl& s = *impl_;
  const NodeId n = s.leaf_id("set_parameter_bytes", name, Op::Parameter);
  const Node& nd = s.step.graph.node(n);
  if (data.size() != s.stored_bytes(n))
    throw SessionError("[Session::set_parameter_bytes] expected " + std::to_string(s.stored_bytes(n)) +
                       " bytes for '" + name + "' (" + dtype_name(nd.dtype) + shape_str(nd.shape) +
                       "), got " + std::to_string(data.size()));
  s.device->wait();
  if (!data.empty()) s.device->upload(s.buffer_of(n), data.data(), data.size());
}
void Session::set_state(const std::string& name, std::span<const float> data) {
  NodeId n = impl_->leaf_id("set_state", name, Op::WriteSlice);
  impl_->upload_value("set_state", n, data.data(), data.size(), DType::F32);
}
void Session::set_state(const std::string& name, std::span<const int32_t> data) {
  NodeId n = impl_->leaf_id("set_state", name, Op::WriteSlice);
  impl_->upload_value("set_state", n, data.data(), data.size(), DType::I32);
}
std::vector<float> Session::read_state(const std::string& name) {
  return impl_->download_value(impl_->leaf_id("read_state", name, Op::WriteSlice));
}
void Session::reset_state(const std::string& name) {
  SessionImpl& s = *impl_;
  s.device->wait();
  for (NodeId n : s.step.graph.states())
    if ((name.empty() || s.step.graph.node(n).prov.name == name) &&
        s.step.plan.slot_of.count(s.kernels_storage(n)))
      s.device->fill_zero(s.buffer_of(n));
  if (!name.empty()) s.leaf_id("reset_state", name, Op::WriteSlice);  // an unknown name is an error
}
std::vector<float> Session::read_parameter(const std::string& name) {
  return impl_->download_value(impl_->leaf_id("read_parameter", name, Op::Parameter));
}
namespace {

size_t output_index(const SessionImpl& s, const std::string& name) {
  const Graph& g = s.step.graph;
  std::string known;
  for (size_t i = 0; i < s.step.outputs.size(); ++i) {
    if (g.node(s.step.outputs[i]).prov.name == name) return i;
    known += (known.empty() ? "" : ", ") + node_label(g, s.step.outputs[i]);
  }
  throw SessionError("[Session::read_output] expected the name of an output (" + known + "), got '" + name +
                     "'");
}

size_t check_output_index(const SessionImpl& s, size_t index) {
  if (index >= s.step.outputs.size())
    throw SessionError("[Session::read_output] expected an output index below " +
                       std::to_string(s.step.outputs.size()) + ", got " + std::to_string(index));
  return index;
}

// Output `index` of step `step` from its frame's readback.
std::vector<float> read_step_output(SessionImpl& s, size_t index, uint64_t step) {
  if (step == 0 || step > s.last_step)
    throw SessionError("[Session::read_output] expected the id of a submitted step (1.." +
                       std::to_string(s.last_step) + "), got step " + std::to_string(step));
  const size_t frame = size_t((step - 1) % s.frames.size());
  SessionImpl::Frame& f = s.frames[frame];
  if (f.step != step)
    throw SessionError("[Session::read_output] expected a step whose outputs are still held, got step " +
                       std::to_string(step) + ": its frame " + std::to_string(frame) + " now holds step " +
                       std::to_string(f.step) + " (frames_in_flight " + std::to_string(s.frames.size()) +
                       "; read a step's outputs before that many later steps are submitted)");
  if (s.readback_offset[index] == UINT64_MAX) {  // a large output: on the device, the latest step's only
    if (step != s.last_step)
      throw SessionError("[Session::read_output] expected the latest step (" + std::to_string(s.last_step) +
                         ") for output " + std::to_string(index) +
                         ", larger than a frame's readback holds, got step " + std::to_string(step));
    return s.download_value(s.step.outputs[index]);
  }
  s.device->wait(f.submission);
  return s.to_floats(s.step.outputs[index], f.readback_map + s.readback_offset[index]);
}

// The latest step's output; before any step, what the output buffer holds.
std::vector<float> read_latest_output(SessionImpl& s, size_t index) {
  if (s.last_step == 0) return s.download_value(s.step.outputs[index]);
  return read_step_output(s, index, s.last_step);
}

}  // namespace

std::vector<float> Session::read_output(size_t index) {
  return read_latest_output(*impl_, check_output_index(*impl_, index));
}
std::vector<float> Session::read_output(const std::string& name) {
  return read_latest_output(*impl_, output_index(*impl_, name));
}
std::vector<float> Session::read_output(size_t index, uint64_t step) {
  return read_step_output(*impl_, check_output_index(*impl_, index), step);
}
std::vector<float> Session::read_output(const std::string& name, uint64_t step) {
  return read_step_output(*impl_, output_index(*impl_, name), step);
}
void Session::set_learning_rate(double lr) {
  if (!impl_->step.plan.hyper)
    throw SessionError(
        "[Session::set_learning_rate] expected a training session with an optimizer, got one without");
  impl_->learning_rate = float(lr);
  stage(*impl_, impl_->staged.size() - 1, &impl_->learning_rate);
}

std::vector<float> Session::read_gradient(const std::string& parameter) {
  NodeId p = impl_->leaf_id("read_gradient", parameter, Op::Parameter);
  for (auto [param, grad] : impl_->step.param_grads) {
    if (param != p) continue;
    if (!impl_->step.plan.slot_of.count(impl_->step.kernels.storage_of(grad)))
      throw SessionError("[Session::read_gradient] expected a session that keeps gradients, got '" +
                         parameter +
                         "' updated inside the kernel computing its gradient, which is not stored (set "
                         "SessionConfig::keep_gradients, or use SessionConfig::debug())");
    return impl_->download_value(grad);
  }
  throw SessionError("[Session::read_gradient] expected a training session, got one without gradients");
}

namespace {
const char* moment_slot_name(OptimizerKind k, uint32_t m) {
  if (k == OptimizerKind::Sgd) return "momentum";
  return m == 0 ? "m" : "v";
}
}  // namespace

std::vector<OptimizerStateInfo> Session::optimizer_state() const {
  std::vector<OptimizerStateInfo> out;
  const CompiledStep& s = impl_->step;
  for (const auto& [key, slot] : s.plan.moments) {
    (void)slot;
    const Node& p = s.graph.node(key.first);
    out.push_back({std::string("optim.") + moment_slot_name(impl_->config.optimizer.kind, key.second) + "/" +
                       p.prov.name,
                   p.shape});
  }
  return out;
}

namespace {
size_t moment_slot(const SessionImpl& impl, const std::string& fn, const std::string& name) {
  const CompiledStep& s = impl.step;
  std::string known;
  for (const auto& [key, slot] : s.plan.moments) {
    std::string n = std::string("optim.") + moment_slot_name(impl.config.optimizer.kind, key.second) + "/" +
                    s.graph.node(key.first).prov.name;
    if (n == name) return slot;
    known += (known.empty() ? "" : ", ") + n;
  }
  throw SessionError("[Session::" + fn + "] expected an optimizer state name (" +
                     (known.empty() ? "none" : known) + "), got '" + name + "'");
}
}  // namespace

std::vector<float> Session::read_optimizer_state(const std::string& name) {
  size_t slot = moment_slot(*impl_, "read_optimizer_state", name);
  size_t count = impl_->step.plan.slots[slot].bytes / 4;
  std::vector<float> out(count);
  impl_->device->wait();
  impl_->device->download(impl_->slot_buffer[slot], out.data(), count * 4);
  return out;
}

void Session::set_optimizer_state(const std::string& name, std::span<const float> data) {
  size_t slot = moment_slot(*impl_, "set_optimizer_state", name);
  size_t count = impl_->step.plan.slots[slot].bytes / 4;
  if (data.size() != count)
    throw SessionError("[Session::set_optimizer_state] expected " + std::to_string(count) + " values for '" +
                       name + "', got " + std::to_string(data.size()));
  impl_->device->upload(impl_->slot_buffer[slot], data.data(), count * 4);
}

uint64_t Session::optimizer_step() const { return impl_->steps; }

void Session::set_optimizer_step(uint64_t step) {
  if (step > UINT32_MAX)
    throw SessionError("[Session::set_optimizer_step] expected a step count below 2^32, got " +
                       std::to_string(step));
  impl_->steps = step;
  impl_->phase = 0;
  for (const auto& [param, slot] : impl_->step.plan.accumulators) {
    (void)param;
    impl_->device->fill_zero(impl_->slot_buffer[slot]);
  }
  if (!impl_->step.plan.hyper) return;
  const runtime::Buffer& hyper = impl_->slot_buffer[*impl_->step.plan.hyper];
  uint32_t v = uint32_t(step);
  impl_->device->upload(hyper, &v, 4, 4);
  // The bias corrections 1 - beta^step that the update kernels continue by recurrence (codegen.hpp).
  const OptimizerConfig& o = impl_->config.optimizer;
  const float c[2] = {float(1.0 - std::pow(o.beta1, double(step))),
                      float(1.0 - std::pow(o.beta2, double(step)))};
  impl_->device->upload(hyper, c, sizeof c, 12);
}

uint64_t Session::step() {
  SessionImpl& s = *impl_;
  const bool update = !s.frames[0].accumulate_list || s.phase + 1 >= s.config.optimizer.grad_accumulation;
  using Kind = SessionImpl::ListKind;
  if (s.distributed()) {  // no accumulation (refused at build): every step updates
    Trace::Scope t(s.trace, "distributed step", "step");
    s.submit_distributed();
    ++s.steps;
    return s.last_step;
  }
  {
    Trace::Scope t(s.trace, "submit", "step");
    s.submit_frame(!update ? Kind::Accumulate : s.trace && s.timed() ? Kind::Timed : Kind::Update);
  }
  s.phase = update ? 0 : s.phase + 1;
  if (update && s.step.plan.hyper) ++s.steps;
  return s.last_step;
}
void Session::wait() {
  {
    Trace::Scope t(impl_->trace, "wait", "step");
    impl_->device->wait();
  }
  impl_->collect_gpu_spans();
}

double Session::last_step_gpu_ms() {
  if (!impl_->config.gpu_timing || !impl_->device->caps().timestamps)
    throw SessionError(
        "[Session::last_step_gpu_ms] expected a session built with gpu_timing (MEGANEURA_GPU_TIMING=1) "
        "on a device with timestamp queries, got gpu_timing " +
        std::string(impl_->config.gpu_timing ? "on" : "off") + " on " + impl_->device->caps().name);
  const std::vector<double> t = impl_->device->timestamps(*impl_->frames[impl_->last_update_frame].list);
  return (t.at(1) - t.at(0)) * 1e-6;
}

MemorySummary Session::memory_summary() const { return impl_->step.plan.summary(); }
const OptimizeReport& Session::report() const { return impl_->step.report; }
const Graph& Session::graph() const { return impl_->step.graph; }
const runtime::DeviceCaps& Session::caps() const { return impl_->device->caps(); }
const SessionConfig& Session::config() const { return impl_->config; }

}  // namespace meganeura
