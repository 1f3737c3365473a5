// Soak: the README MLP (784-128-10, batch 32, Adam) trained for many steps while resident memory and GPU
// memory are sampled, to show that neither grows (issue 26). One JSON line per sample, then a summary:
//   {"step", "elapsed_s", "loss", "rss_bytes", "device_allocated_bytes", "heap_usage_bytes",
//   "heap_budget_bytes"}
//   {"summary": true, "steps", "samples", "rss_drift_pct", "device_drift_pct", "heap_drift_pct",
//   "steps_per_s"}
// Drifts are (max - min) / min over the samples after the first (the first follows warm-up allocations).
// rss from /proc/self/statm; device_allocated from the backend's own block counter (Device::allocated_bytes);
// heap usage and budget from VK_EXT_memory_budget (Device::memory_heaps, device-local heaps summed; the
// budget equals the heap size and usage stays 0 where the extension is absent).
//   soak                               1 000 000 steps, a sample every 10 000 (the H200 run)
//   soak --steps 2000 --every 500      smoke test (lavapipe)
// Inputs alternate between four batches set with set_input every step, so the staging path is soaked too;
// steps are queued with step() and a loss is read (waiting for its step) at every sample.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "meganeura/core/error.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/session/session.hpp"

using namespace meganeura;

namespace {

uint64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * uint64_t(::sysconf(_SC_PAGESIZE));
}

struct Sample {
  uint64_t rss = 0, device = 0, heap_usage = 0, heap_budget = 0;
};

Sample sample(const runtime::Device& dev) {
  Sample s;
  s.rss = rss_bytes();
  s.device = dev.allocated_bytes();
  for (const runtime::MemoryHeap& h : dev.memory_heaps())
    if (h.device_local) {
      s.heap_usage += h.usage;
      s.heap_budget += h.budget;
    }
  return s;
}

double drift_pct(const std::vector<uint64_t>& v) {
  if (v.size() < 2) return 0.0;
  uint64_t lo = v[1], hi = v[1];
  for (size_t i = 1; i < v.size(); ++i) {
    lo = std::min(lo, v[i]);
    hi = std::max(hi, v[i]);
  }
  return lo ? 100.0 * double(hi - lo) / double(lo) : 0.0;
}

int usage() {
  std::fprintf(stderr, "usage: soak [--steps N] [--every K] [--batch B]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t steps = 1'000'000, every = 10'000;
  int64_t batch = 32;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    const long long v = std::atoll(argv[++i]);
    if (v <= 0) return usage();
    if (a == "--steps")
      steps = uint64_t(v);
    else if (a == "--every")
      every = uint64_t(v);
    else if (a == "--batch")
      batch = int64_t(v);
    else
      return usage();
  }
  try {
    Graph g;
    auto x = g.input("x", {batch, 784});
    auto labels = g.input("labels", {batch, 10});
    auto w1 = g.parameter("w1", {784, 128});
    auto w2 = g.parameter("w2", {128, 10});
    g.set_outputs({g.cross_entropy_loss(g.matmul(g.relu(g.matmul(x, w1)), w2), labels)});
    SessionConfig c = SessionConfig::from_env();
    c.optimizer.kind = OptimizerKind::Adam;
    c.optimizer.learning_rate = 1e-3;
    runtime::DeviceOptions o;
    o.device_id = c.device_id;
    o.validation = c.validation;
    std::shared_ptr<runtime::Device> dev = runtime::open_device(o);
    Session s = build(g, c, dev);

    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<std::vector<float>> xs(4), ls(4);
    for (int b = 0; b < 4; ++b) {
      xs[b].resize(size_t(batch * 784));
      for (float& v : xs[b]) v = u(rng);
      ls[b].assign(size_t(batch * 10), 0.0f);
      for (int64_t r = 0; r < batch; ++r) ls[b][size_t(r * 10 + int64_t(rng() % 10))] = 1.0f;
    }
    std::vector<float> w1v(784 * 128), w2v(1280);
    for (float& v : w1v) v = 0.05f * u(rng);
    for (float& v : w2v) v = 0.1f * u(rng);
    s.set_parameter("w1", w1v);
    s.set_parameter("w2", w2v);

    std::vector<uint64_t> rss, device, heap;
    const auto t0 = std::chrono::steady_clock::now();
    auto seconds = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    for (uint64_t step = 1; step <= steps; ++step) {
      const size_t b = size_t(step % 4);
      s.set_input("x", xs[b]);
      s.set_input("labels", ls[b]);
      const uint64_t id = s.step();
      if (step % every == 0 || step == steps) {
        const float loss = s.read_output(0, id)[0];
        const Sample m = sample(*dev);
        rss.push_back(m.rss);
        device.push_back(m.device);
        heap.push_back(m.heap_usage);
        std::printf(
            "{\"step\": %llu, \"elapsed_s\": %.3f, \"loss\": %.6g, \"rss_bytes\": %llu, "
            "\"device_allocated_bytes\": %llu, \"heap_usage_bytes\": %llu, \"heap_budget_bytes\": %llu}\n",
            (unsigned long long)step, seconds(), double(loss), (unsigned long long)m.rss,
            (unsigned long long)m.device, (unsigned long long)m.heap_usage,
            (unsigned long long)m.heap_budget);
        std::fflush(stdout);
      }
    }
    s.wait();
    const double total = seconds();
    std::printf(
        "{\"summary\": true, \"steps\": %llu, \"samples\": %zu, \"rss_drift_pct\": %.3f, "
        "\"device_drift_pct\": %.3f, \"heap_drift_pct\": %.3f, \"steps_per_s\": %.1f, \"device\": \"%s\"}\n",
        (unsigned long long)steps, rss.size(), drift_pct(rss), drift_pct(device), drift_pct(heap),
        double(steps) / total, dev->caps().name.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "soak: %s\n", e.what());
    return 1;
  }
  return 0;
}
