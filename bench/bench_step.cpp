// Whole compiled steps on a GPU, one JSON line per measurement (issue 7; the torch twin is
// scripts/device/bench_torch.py, the table scripts/device/bench_table.py):
//   * the README MLP (784-128-10, batch 32, no biases, one-hot cross-entropy) training step with SGD (lr 0.1)
//     and Adam (lr 1e-3), F32 and Mixed16: wall time per step synchronised each step (run(): submit + fence
//     wait; wall_ms_mean, the mean of --steps steps after warm-up) and pipelined (step() --steps times, then
//     one wait; wall_ms_pipelined: up to frames_in_flight steps queued), and GPU time (two timestamps around
//     the recorded step, its input and output copies included; median of --gpu-steps);
//   * a fused pointwise kernel, out = x·1.5 + y over N floats (inference session, one dispatch): GPU time and
//     bandwidth, bytes = 3·4·N (two reads, one write).
//   bench_step                                   defaults for the H200
//   bench_step --steps 20 --gpu-steps 5 --mib 4  smoke test (lavapipe)
//   bench_step --tune                            also Session::tune_with between two measurements:
//   gpu_ms_untuned,
//                                                gpu_ms_tuned (and wall_ms_*), the report on stderr
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "flags.hpp"
#include "meganeura/core/error.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/session/session.hpp"

using namespace meganeura;

namespace {

struct Args {
  int steps = 2000, gpu_steps = 200, warmup = 100;
  bool tune = false;  // --tune: measure, Session::tune_with, measure again (the *_untuned / *_tuned fields)
  std::vector<uint64_t> mib = {256, 1024};  // bytes of each pointwise operand
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::vector<float> random_vec(size_t n, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// The winners are not written to the cache, so every run starts untuned.
TuneOptions tune_options() {
  TuneOptions o;
  o.warmup = 3;
  o.iterations = 20;
  o.cache = false;
  return o;
}

void mlp(const Args& args, OptimizerKind kind, Precision precision) {
  Graph g;
  auto x = g.input("x", {32, 784});
  auto labels = g.input("labels", {32, 10});
  auto w1 = g.parameter("w1", {784, 128});
  auto w2 = g.parameter("w2", {128, 10});
  g.set_outputs({g.cross_entropy_loss(g.matmul(g.relu(g.matmul(x, w1)), w2), labels)});
  SessionConfig c = SessionConfig::from_env();
  c.gpu_timing = true;
  c.precision = precision;
  c.optimizer.kind = kind;
  c.optimizer.learning_rate = kind == OptimizerKind::Sgd ? 0.1 : 1e-3;
  Session s = build(g, c);
  std::mt19937 rng(1);
  std::vector<float> lab(320, 0.0f);
  for (int r = 0; r < 32; ++r) lab[size_t(r * 10 + int(rng() % 10))] = 1.0f;
  s.set_input("x", random_vec(32 * 784, rng, 1.0f));
  s.set_input("labels", lab);
  s.set_parameter("w1", random_vec(784 * 128, rng, 0.05f));
  s.set_parameter("w2", random_vec(1280, rng, 0.1f));
  for (int i = 0; i < args.warmup; ++i) s.run();
  double pipelined_ms = 0;
  auto measure = [&](double& wall_ms, std::vector<double>& gpu) {
    using clock = std::chrono::steady_clock;
    auto t0 = clock::now();
    for (int i = 0; i < args.steps; ++i) s.run();
    wall_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count() / args.steps;
    t0 = clock::now();
    for (int i = 0; i < args.steps; ++i) s.step();
    s.wait();
    pipelined_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count() / args.steps;
    gpu.clear();
    for (int i = 0; i < args.gpu_steps; ++i) {
      s.run();
      gpu.push_back(s.last_step_gpu_ms());
    }
  };
  double wall_ms = 0, wall_untuned = 0;
  std::vector<double> gpu, gpu_untuned;
  measure(wall_ms, gpu);
  std::string tuned;
  if (args.tune) {
    wall_untuned = wall_ms;
    gpu_untuned = gpu;
    const TuneReport r = s.tune_with(tune_options());
    std::fputs(r.to_text().c_str(), stderr);
    measure(wall_ms, gpu);
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  ",\"gpu_ms_untuned\":%.5f,\"gpu_ms_tuned\":%.5f,\"wall_ms_untuned\":%.5f,"
                  "\"wall_ms_tuned\":%.5f,\"tune_s\":%.2f,\"tune_changed\":%zu",
                  median(gpu_untuned), median(gpu), wall_untuned, wall_ms, r.seconds, r.changed);
    tuned = buf;
  }
  const float loss = s.read_output(0).at(0);
  std::printf(
      "{\"bench\":\"vk_mlp_step\",\"device\":\"%s\",\"optimizer\":\"%s\",\"precision\":\"%s\",\"steps\":%d,"
      "\"wall_ms_mean\":%.5f,\"wall_ms_pipelined\":%.5f,\"frames_in_flight\":%d,\"gpu_ms_median\":%.5f,"
      "\"gpu_ms_best\":%.5f,\"final_loss\":%.5f%s}\n",
      s.caps().name.c_str(), kind == OptimizerKind::Sgd ? "sgd" : "adam", precision_name(precision),
      args.steps, wall_ms, pipelined_ms, s.config().frames_in_flight, median(gpu),
      *std::min_element(gpu.begin(), gpu.end()), loss, tuned.c_str());
  std::fflush(stdout);
}

void pointwise(const Args& args, uint64_t mib) {
  const int64_t n = int64_t(mib << 20) / 4;
  Graph g;
  auto x = g.input("x", {n});
  auto y = g.input("y", {n});
  g.set_outputs({g.add(g.mul(x, g.scalar(1.5)), y)});
  SessionConfig c = SessionConfig::from_env();
  c.gpu_timing = true;
  c.training = false;
  c.optimizer.kind = OptimizerKind::None;
  Session s = build(g, c);
  std::vector<float> v(size_t(n), 0.5f);
  s.set_input("x", v);
  s.set_input("y", v);
  auto measure = [&] {
    for (int i = 0; i < 5; ++i) s.run();
    std::vector<double> gpu;
    for (int i = 0; i < 30; ++i) {
      s.run();
      gpu.push_back(s.last_step_gpu_ms());
    }
    return gpu;
  };
  std::vector<double> gpu = measure();
  const double bytes = 3.0 * 4.0 * double(n);
  std::string tuned;
  if (args.tune) {
    const double untuned = median(gpu);
    const TuneReport r = s.tune_with(tune_options());
    std::fputs(r.to_text().c_str(), stderr);
    gpu = measure();
    char buf[256];
    std::snprintf(
        buf, sizeof buf,
        ",\"gpu_ms_untuned\":%.4f,\"gpu_ms_tuned\":%.4f,\"gbps_untuned\":%.1f,\"tuned_variant\":\"%s\"",
        untuned, median(gpu), bytes / (untuned * 1e-3) / 1e9,
        r.kernels.empty() ? "" : r.kernels[0].new_variant.c_str());
    tuned = buf;
  }
  const float check = s.read_output(0).at(size_t(n - 1));
  const double t = median(gpu);
  std::printf(
      "{\"bench\":\"vk_pointwise\",\"device\":\"%s\",\"mib\":%llu,\"kernels\":%zu,\"gpu_ms_median\":%.4f,"
      "\"gpu_ms_best\":%.4f,\"gbps_median\":%.1f,\"correct\":%s%s}\n",
      s.caps().name.c_str(), static_cast<unsigned long long>(mib), s.report().kernels, t,
      *std::min_element(gpu.begin(), gpu.end()), bytes / (t * 1e-3) / 1e9, check == 1.25f ? "true" : "false",
      tuned.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  cli::Flags f("bench_step",
               "The README MLP's training step (SGD and Adam, F32 and Mixed16): wall and GPU time per "
               "step, and\nthe fused pointwise kernels' bandwidth over --mib buffers; JSON lines.");
  f.option("--steps", args.steps, "timed steps (wall clock)");
  f.option("--gpu-steps", args.gpu_steps, "timed steps (GPU timestamps)");
  f.option("--warmup", args.warmup, "untimed steps first");
  f.custom(
      "--mib",
      [&](const std::string& v) {
        args.mib.clear();
        for (size_t p = 0; p <= v.size();) {
          size_t q = v.find(',', p);
          if (q == std::string::npos) q = v.size();
          const std::string item = v.substr(p, q - p);
          if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos)
            throw cli::UsageError("[bench_step] expected --mib as comma-separated whole numbers, got '" + v +
                                  "'");
          args.mib.push_back(std::stoull(item));
          p = q + 1;
        }
      },
      "pointwise buffer sizes in MiB, comma-separated", "LIST");
  f.flag("--tune", args.tune, "also time the step after Session::tune_with");
  return cli::run(f, argc, argv, [&] {
    for (Precision p : {Precision::F32, Precision::Mixed16})
      for (OptimizerKind k : {OptimizerKind::Sgd, OptimizerKind::Adam}) mlp(args, k, p);
    for (uint64_t mib : args.mib) pointwise(args, mib);
    return 0;
  });
}
