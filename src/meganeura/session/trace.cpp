// The trace file: Chrome trace-event JSON ("X" complete events in microseconds, "M" metadata naming the two
// tracks), which Perfetto and chrome://tracing open directly.
#include "meganeura/session/trace.hpp"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "meganeura/core/error.hpp"
#include "meganeura/session/session_impl.hpp"

namespace meganeura {

namespace {
constexpr int kCpuPid = 1, kGpuPid = 2;
}

// Checked when the first session names the file, so a bad path is an error at build and not lost at exit.
Trace::Trace(std::string path) : path_(std::move(path)) {
  std::ofstream f(path_, std::ios::app);
  if (!f)
    throw ConfigError(
        "[build] expected MEGANEURA_TRACE (SessionConfig::trace_path) to name a writable file, got '" +
        path_ + "'");
}

Trace& Trace::at(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Trace>> traces;  // destroyed (and so flushed) at exit
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<Trace>& t = traces[path];
  if (!t) t.reset(new Trace(path));
  return *t;
}

double Trace::now_us() {
  using namespace std::chrono;
  return double(duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count()) / 1000.0;
}

void Trace::add(Event e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.size() < kMaxEvents) events_.push_back(std::move(e));
}

void Trace::cpu_span(const std::string& name, const std::string& category, double begin_us, double end_us) {
  add({name, category, kCpuPid, begin_us, end_us - begin_us, {}});
}

void Trace::gpu_span(const std::string& name, const std::string& category, double begin_us,
                     double duration_us, const std::map<std::string, std::string>& args) {
  add({name, category, kGpuPid, begin_us, duration_us, args});
}

void Trace::flush() {
  nlohmann::json events = nlohmann::json::array();
  auto meta = [&](int pid, const char* name) {
    events.push_back(
        {{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 1}, {"args", {{"name", name}}}});
    events.push_back(
        {{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 1}, {"args", {{"name", name}}}});
  };
  meta(kCpuPid, "cpu");
  meta(kGpuPid, "gpu");
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Event& e : events_) {
      nlohmann::json j = {{"name", e.name}, {"cat", e.category}, {"ph", "X"},   {"pid", e.pid},
                          {"tid", 1},       {"ts", e.ts},        {"dur", e.dur}};
      if (!e.args.empty()) j["args"] = e.args;
      events.push_back(std::move(j));
    }
  }
  nlohmann::json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  std::ofstream f(path_);
  if (!f)
    throw ConfigError("[Trace::flush] expected MEGANEURA_TRACE to name a writable file, got '" + path_ + "'");
  f << doc.dump() << "\n";
}

Trace::~Trace() {
  // The file was writable at build; if it no longer is, say so (a destructor at exit cannot throw).
  try {
    flush();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "meganeura: warning: %s\n", e.what());
  }
}

Trace::Scope::Scope(Trace* t, std::string name, std::string category)
    : t_(t), name_(std::move(name)), category_(std::move(category)), begin_(t ? now_us() : 0.0) {}

Trace::Scope::~Scope() {
  if (t_) t_->cpu_span(name_, category_, begin_, now_us());
}

void SessionImpl::collect_gpu_spans(Frame& f) {
  if (!trace || f.traced_us < 0 || !f.timed_list) return;
  const double submit_us = f.traced_us;
  f.traced_us = -1;
  std::vector<double> ts = device->timestamps(*f.timed_list);
  if (ts.empty()) return;
  // The GPU clock is not the CPU's: dispatches are placed relative to the submission's CPU time.
  const double t0 = ts[0];
  for (size_t i = 0; i < timed_kernels.size(); ++i) {
    const GeneratedKernel& k = step.code[timed_kernels[i]];
    double b = ts[2 * i], e = ts[2 * i + 1];
    if (!(e >= b)) continue;  // NaN: never written
    trace->gpu_span(
        k.label, phase_name(kernel_phase(step.graph, step.kernels.kernels[k.kernel])),
        submit_us + (b - t0) / 1000.0, (e - b) / 1000.0,
        {{"archetype", archetype_name(k.arch)}, {"variant", k.variant}, {"dispatch", std::to_string(i)}});
  }
}

}  // namespace meganeura
