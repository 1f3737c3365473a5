// Session::profile(): per-dispatch GPU times from the timed list (each dispatch alone between two timestamps)
// next to the grouped step's GPU and wall time, as one JSON document. The schema is in docs/debugging.md.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "meganeura/runtime/statistic_json.hpp"
#include "meganeura/session/session_impl.hpp"

namespace meganeura {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2.0;
}

nlohmann::json stats(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return {{"samples_ns", v},
          {"median_ns", median(v)},
          {"mean_ns", v.empty() ? 0.0 : sum / double(v.size())},
          {"min_ns", v.empty() ? 0.0 : *std::min_element(v.begin(), v.end())},
          {"max_ns", v.empty() ? 0.0 : *std::max_element(v.begin(), v.end())}};
}

double wall_ns(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return double(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

const char* rewrite_name(RewriteMode m) {
  switch (m) {
    case RewriteMode::Greedy: return "greedy";
    case RewriteMode::Saturate: return "saturate";
    case RewriteMode::Off: return "off";
  }
  return "?";
}

// The driver's statistics of one pipeline: {name: {value, format, description}}; with several executables
// the names are prefixed "<executable>/".
nlohmann::json pipeline_stats(const std::vector<runtime::PipelineExecutable>& exes) {
  nlohmann::json out = nlohmann::json::object();
  for (const runtime::PipelineExecutable& e : exes) {
    for (const runtime::PipelineStatistic& st : e.statistics) {
      const nlohmann::json v = runtime::statistic_value(st);
      out[exes.size() > 1 ? e.name + "/" + st.name : st.name] = {
          {"value", v}, {"format", st.format}, {"description", st.description}};
    }
  }
  return out;
}

}  // namespace

std::string Session::profile(const ProfileOptions& options) {
  SessionImpl& s = *impl_;
  const runtime::DeviceCaps& caps = s.device->caps();
  if (!s.timed())
    throw SessionError(
        std::string("[Session::profile] expected a session built with gpu_timing (MEGANEURA_GPU_TIMING=1) "
                    "on a device with timestamp queries, got ") +
        (s.config.gpu_timing ? caps.name + " without timestamps" : "gpu_timing off"));
  if (options.iterations < 1 || options.warmup < 0)
    throw SessionError("[Session::profile] expected iterations >= 1 and warmup >= 0, got " +
                       std::to_string(options.iterations) + " and " + std::to_string(options.warmup));
  const CompiledStep& st = s.step;
  const size_t n = s.timed_kernels.size();  // dispatches of the updating step
  s.collect_gpu_spans();
  s.device->wait();
  using Kind = SessionImpl::ListKind;
  for (int i = 0; i < options.warmup; ++i) {
    s.submit_frame(Kind::Update);
    s.device->wait();
  }
  std::vector<double> grouped_gpu, grouped_wall, timed_gpu, timed_wall;
  std::vector<std::vector<double>> per(n);
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < options.iterations; ++i) {
    auto a = clock::now();
    runtime::CommandList& list = s.submit_frame(Kind::Update);
    s.device->wait();
    grouped_wall.push_back(wall_ns(a, clock::now()));
    std::vector<double> ts = s.device->timestamps(list);
    grouped_gpu.push_back(ts[1] - ts[0]);
  }
  for (int i = 0; i < options.iterations; ++i) {
    auto a = clock::now();
    runtime::CommandList& list = s.submit_frame(Kind::Timed);
    s.device->wait();
    timed_wall.push_back(wall_ns(a, clock::now()));
    std::vector<double> ts = s.device->timestamps(list);
    timed_gpu.push_back(ts[2 * n - 1] - ts[0]);
    for (size_t k = 0; k < n; ++k) per[k].push_back(ts[2 * k + 1] - ts[2 * k]);
  }
  if (st.plan.hyper) s.steps += uint64_t(options.warmup + 2 * options.iterations);

  nlohmann::json dispatches = nlohmann::json::array();
  std::map<std::string, std::pair<size_t, double>> families;  // variant -> (dispatches, sum of medians)
  std::map<std::string, std::pair<size_t, double>> phases;
  double total = 0;
  std::set<uint64_t> distinct;
  size_t barriers = 0;
  for (size_t k = 0; k < n; ++k) {
    const GeneratedKernel& code = st.code[s.timed_kernels[k]];
    const Kernel& kern = st.kernels.kernels[code.kernel];
    const std::string phase = phase_name(kernel_phase(st.graph, kern));
    nlohmann::json d = stats(per[k]);
    const double med = d["median_ns"].get<double>();
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(code.hash));
    uint64_t threads = 1;
    for (int a = 0; a < 3; ++a) threads *= uint64_t(code.grid[size_t(a)]) * code.workgroup[size_t(a)];
    d["index"] = k;
    d["kernel"] = s.timed_kernels[k];
    d["label"] = code.label;
    d["archetype"] = archetype_name(code.arch);
    d["variant"] = code.variant;
    d["family"] = code.variant;
    d["tuned"] = code.tuned.to_string();
    d["phase"] = phase;
    d["kernel_hash"] = hash;
    d["spec_constants"] = code.spec_constants;
    d["grid"] = code.grid;
    d["workgroup"] = code.workgroup;
    d["invocations"] = threads;
    d["barrier_before"] = bool(s.barrier_before[k]);
    d["builder"] = kern.root.valid() ? where(st.graph.node(kern.root).prov.loc) : "";
    if (caps.pipeline_executable_info)
      d["pipeline_stats"] = pipeline_stats(s.device->pipeline_executables(s.kernel_of[s.timed_kernels[k]]));
    dispatches.push_back(std::move(d));
    families[code.variant].first++;
    families[code.variant].second += med;
    phases[phase].first++;
    phases[phase].second += med;
    total += med;
    distinct.insert(code.hash);
    barriers += s.barrier_before[k] ? 1 : 0;
  }
  auto aggregate = [&](const std::map<std::string, std::pair<size_t, double>>& m, const char* key) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [name, v] : m)
      out.push_back({{key, name},
                     {"dispatches", v.first},
                     {"median_ns_total", v.second},
                     {"share", total > 0 ? v.second / total : 0.0}});
    std::sort(out.begin(), out.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
      return a["median_ns_total"].get<double>() > b["median_ns_total"].get<double>();
    });
    return out;
  };

  nlohmann::json heaps = nlohmann::json::array();
  for (const runtime::MemoryHeap& h : s.device->memory_heaps())
    heaps.push_back(
        {{"size", h.size}, {"budget", h.budget}, {"usage", h.usage}, {"device_local", h.device_local}});
  const MemorySummary m = st.plan.summary();
  const double grouped = median(grouped_gpu), instrumented = median(timed_gpu);

  nlohmann::json doc = {
      {"schema", "meganeura.profile.v1"},
      {"device",
       {{"name", caps.name},
        {"backend", caps.backend},
        {"device_type", caps.device_type},
        {"vendor_id", caps.vendor_id},
        {"device_id", caps.device_id},
        {"driver_name", caps.driver_name},
        {"driver_info", caps.driver_info},
        {"api_version", caps.api_version},
        {"timestamp_period_ns", caps.timestamp_period_ns},
        {"subgroup_size", caps.subgroup_size},
        {"pipeline_executable_info", caps.pipeline_executable_info}}},
      {"memory",
       {{"parameters", m.parameters},
        {"gradients", m.gradients},
        {"optimizer_state", m.optimizer_state},
        {"activations", m.activations},
        {"inputs", m.inputs},
        {"outputs", m.outputs},
        {"total", m.total()},
        {"device_allocated_bytes", s.device->allocated_bytes()},
        {"heaps", heaps}}},
      {"session",
       {{"training", s.config.training},
        {"rewrite", rewrite_name(s.config.rewrite)},
        {"dispatches", n},
        {"distinct_kernels", distinct.size()},
        {"barriers", barriers},
        {"warmup", options.warmup},
        {"iterations", options.iterations}}},
      {"dispatches", dispatches},
      {"families", aggregate(families, "family")},
      {"phases", aggregate(phases, "phase")},
      {"overhead",
       {{"grouped_gpu", stats(grouped_gpu)},
        {"instrumented_gpu", stats(timed_gpu)},
        {"grouped_wall", stats(grouped_wall)},
        {"instrumented_wall", stats(timed_wall)},
        {"sum_of_dispatch_medians_ns", total},
        {"ratio", grouped > 0 ? instrumented / grouped : 0.0}}},
  };
  return doc.dump(1);
}

}  // namespace meganeura
