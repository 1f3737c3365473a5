#pragma once
// MEGANEURA_TRACE: a CPU/GPU timeline in Chrome trace-event JSON (open it in https://ui.perfetto.dev or
// chrome://tracing). One Trace per file path for the whole process; every session built with that path adds
// to it, and the file is rewritten whole on each flush (session destruction, process exit).
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace meganeura {

class Trace {
 public:
  static Trace& at(const std::string& path);  // the process-wide trace writing to `path`

  static double now_us();  // the CPU clock of every span (steady clock, microseconds)
  // Track "cpu" (pid 1): build stages, submissions, waits. Track "gpu" (pid 2): dispatches from timestamps.
  void cpu_span(const std::string& name, const std::string& category, double begin_us, double end_us);
  void gpu_span(const std::string& name, const std::string& category, double begin_us, double duration_us,
                const std::map<std::string, std::string>& args);
  void flush();  // writes the whole file now; throws ConfigError naming the path when it cannot

  // A CPU span for a scope; a null trace records nothing.
  class Scope {
   public:
    Scope(Trace* t, std::string name, std::string category);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Trace* t_;
    std::string name_, category_;
    double begin_;
  };

  ~Trace();

 private:
  explicit Trace(std::string path);  // ConfigError when the file cannot be written
  struct Event {
    std::string name, category;
    int pid;
    double ts, dur;
    std::map<std::string, std::string> args;
  };
  static constexpr size_t kMaxEvents = 2'000'000;  // a long training run stops adding spans, never grows past
  std::string path_;
  std::mutex mu_;
  std::vector<Event> events_;
  void add(Event e);
};

}  // namespace meganeura
