// How long compiling a graph takes (issue 7, item 6), with Google Benchmark, on whatever device
// SessionConfig::from_env() opens (lavapipe in CI):
//   BM_CompileStep/<graph>      the device-free half: verify, autodiff, rewrite, schedule, plan, codegen
//   BM_BuildSession/<graph>/cold  build(): compile_step + shaders (glslc + SPIR-V validation) + pipelines +
//                                allocation + recording, with an empty on-disk SPIR-V cache every iteration
//   BM_BuildSession/<graph>/warm  the same with the cache filled by an earlier build (pipelines are still
//                                created: the driver's JIT is not cached)
// Graphs: the README MLP (784-128-10, batch 32) and 12 nn::TransformerBlock layers (seq 64, width 128, 4
// heads, SwiGLU FFN 512, RMSNorm, RoPE, causal flash attention), the blocks a model is built from. Training
// sessions (autodiff + Adam).
//   bench_build --benchmark_min_time=0.5   (Google Benchmark 1.7: seconds)
#include <benchmark/benchmark.h>

#include <unistd.h>
#include <filesystem>
#include <string>

#include "meganeura/nn/nn.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/session/pipeline.hpp"

using namespace meganeura;

namespace {

Graph mlp() {
  Graph g;
  auto x = g.input("x", {32, 784});
  auto labels = g.input("labels", {32, 10});
  auto w1 = g.parameter("w1", {784, 128});
  auto w2 = g.parameter("w2", {128, 10});
  g.set_outputs({g.cross_entropy_loss(g.matmul(g.relu(g.matmul(x, w1)), w2), labels)});
  return g;
}

Graph transformer(int layers = 12, int64_t seq = 64, int64_t d = 128, int64_t heads = 4, int64_t ffn = 512) {
  Graph g;
  nn::Context ctx(g, 1);
  nn::AttentionConfig attn;
  attn.dim = d;
  attn.heads = heads;
  attn.kv_heads = heads;
  NodeId x = g.input("x", {1, seq, d});
  NodeId target = g.input("target", {1, seq, d});
  for (int l = 0; l < layers; ++l) x = nn::TransformerBlock(ctx, "blk" + std::to_string(l), attn, ffn)(x);
  g.set_outputs({g.mse_loss(x, target)});
  return g;
}

SessionConfig config() {
  SessionConfig c = SessionConfig::from_env();
  c.optimizer.kind = OptimizerKind::Adam;
  c.optimizer.learning_rate = 1e-3;
  c.dump_plan.clear();
  return c;
}

std::shared_ptr<runtime::Device> device() {
  static std::shared_ptr<runtime::Device> d = [] {
    const SessionConfig c = SessionConfig::from_env();
    runtime::DeviceOptions o;
    o.device_id = c.device_id;
    o.validation = c.validation;
    return std::shared_ptr<runtime::Device>(runtime::open_device(o));
  }();
  return d;
}

std::string temp_cache(const std::string& tag) {
  return (std::filesystem::temp_directory_path() /
          ("meganeura-bench-build-" + std::to_string(::getpid()) + "-" + tag))
      .string();
}

void BM_CompileStep(benchmark::State& state, Graph (*make)()) {
  const Graph g = make();
  const SessionConfig c = config();
  const runtime::DeviceCaps caps = device()->caps();
  size_t kernels = 0;
  for (auto _ : state) {
    CompiledStep s = compile_step(g, c, caps);
    kernels = s.code.size();
    benchmark::DoNotOptimize(s.code.data());
  }
  state.counters["dispatches"] = double(kernels);
}

void BM_BuildSession(benchmark::State& state, Graph (*make)(), bool warm) {
  const Graph g = make();
  SessionConfig c = config();
  c.cache_dir = temp_cache(warm ? "warm" : "cold");
  std::filesystem::remove_all(c.cache_dir);
  if (warm) build(g, c, device());  // fills the disk cache
  for (auto _ : state) {
    if (!warm) {
      state.PauseTiming();
      std::filesystem::remove_all(c.cache_dir);
      state.ResumeTiming();
    }
    Session s = build(g, c, device());
    benchmark::DoNotOptimize(&s);
  }
  std::filesystem::remove_all(c.cache_dir);
}

}  // namespace

BENCHMARK_CAPTURE(BM_CompileStep, mlp, &mlp)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(
    BM_CompileStep, transformer12, +[] { return transformer(); })
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_BuildSession, mlp_cold, &mlp, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_BuildSession, mlp_warm, &mlp, true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(
    BM_BuildSession, transformer12_cold, +[] { return transformer(); }, false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(
    BM_BuildSession, transformer12_warm, +[] { return transformer(); }, true)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
