// LLM inference on the SmolLM2-135M configuration with random weights: prefill latency of a 128-token prompt
// and decode tokens/s at batch 1 and 16 (prefill and decode sessions sharing weights and KV cache), plus the
// dispatches and barriers of one decode step. One JSON line per figure. The PyTorch twin is
// scripts/device/decode_torch.py (transformers LlamaForCausalLM, same config).
//   bench_decode [--dtype f32|f16|bf16|q8_0|q4_1|q4_0] [--context 512] [--prompt 128] [--steps 64] [--batches
//   1,16] bench_decode --tiny   (a small config: the lavapipe smoke test); --profile adds per-family times
//   of a prefill and of a decode step (prefill_profile, decode_profile lines)
// Decode steps feed a fixed token each (no sampling on the host): the figure is the step's own cost.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "meganeura/models/llama.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/session/pipeline.hpp"
#include "meganeura/session/session.hpp"
#include "profile_summary.hpp"

using namespace meganeura;

namespace {

// Wall time each session runs before it is timed (prefill; decode half of it).
constexpr double kWarmupMs = 300.0;

struct Args {
  DType dtype = DType::F32;
  int64_t context = 512, prompt = 128;
  int steps = 64;
  std::vector<int64_t> batches = {1, 16};
  bool tiny = false;
  bool profile = false;  // --profile: the per-family times of one decode step
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw ConfigError("[bench_decode] expected a value after " + k);
      return argv[++i];
    };
    if (k == "--dtype") {
      const std::string v = next();
      a.dtype = v == "f16"    ? DType::F16
                : v == "bf16" ? DType::BF16
                : v == "q8_0" ? DType::Q8_0
                : v == "q4_1" ? DType::Q4_1
                : v == "q4_0" ? DType::Q4_0
                : v == "f32"
                    ? DType::F32
                    : throw ConfigError(
                          "[bench_decode] expected --dtype f32, f16, bf16, q8_0, q4_1 or q4_0, got " + v);
    } else if (k == "--context")
      a.context = std::stoll(next());
    else if (k == "--prompt")
      a.prompt = std::stoll(next());
    else if (k == "--steps")
      a.steps = std::stoi(next());
    else if (k == "--batches") {
      a.batches.clear();
      std::stringstream ss(next());
      for (std::string t; std::getline(ss, t, ',');) a.batches.push_back(std::stoll(t));
    } else if (k == "--tiny")
      a.tiny = true;
    else if (k == "--profile")
      a.profile = true;
    else
      throw ConfigError("[bench_decode] unknown option " + k);
  }
  return a;
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int main(int argc, char** argv) try {
  const Args a = parse(argc, argv);
  models::LlamaConfig c = models::LlamaConfig::smollm2_135m();
  if (a.tiny) {
    c.vocab = 512;
    c.hidden = 64;
    c.layers = 2;
    c.heads = 4;
    c.kv_heads = 2;
    c.intermediate = 128;
  }
  c.max_context = a.context;
  c.weight_dtype = a.dtype;
  // Block-quantized runs store every matrix (embedding and tied head included) in the block type, quantized
  // on the host by the project's quantizers (Session::set_parameter); norm weights stay f32, as GGUF files
  // keep them.
  if (a.dtype != DType::F32 && a.dtype != DType::F16 && a.dtype != DType::BF16)
    for (const auto& [name, shape] : models::llama_parameters(c))
      if (shape.size() == 1) c.tensor_dtypes[name] = DType::F32;
  SessionConfig cfg = SessionConfig::from_env();
  cfg.training = false;
  cfg.optimizer.kind = OptimizerKind::None;
  cfg.gpu_timing = true;
  cfg.frames_in_flight = 1;
  // Mixed16 runs are labelled "f16/mixed16" etc., so that one table holds both policies.
  const std::string label =
      std::string(dtype_name(a.dtype)) + (cfg.precision == Precision::Mixed16 ? "/mixed16" : "");
  const char* dt = label.c_str();
  const auto weights = models::llama_random_weights(c, 1);

  for (int64_t B : a.batches) {
    const int64_t prompt = std::min(a.prompt, c.max_context - a.steps);
    Session prefill = build(models::build_llama(c, B, prompt).graph, cfg);
    Session decode = build(models::build_llama(c, B, 1).graph, cfg, prefill);
    for (const auto& [name, v] : weights) prefill.set_parameter(name, v);
    {  // dispatches and barriers of one decode step, from the device-free compiler
      const CompiledStep st = compile_step(models::build_llama(c, B, 1).graph, cfg, decode.caps());
      const std::vector<size_t> ks = step_kernels(st, true);
      const std::vector<bool> bar = plan_barriers(st, ks);
      size_t barriers = 0;
      for (bool b : bar) barriers += b;
      std::printf(
          "{\"bench\":\"decode_plan\",\"dtype\":\"%s\",\"batch\":%lld,\"dispatches\":%zu,\"barriers\":%zu,"
          "\"layers\":%lld,\"weights_bytes\":%llu}\n",
          dt, (long long)B, ks.size(), barriers, (long long)c.layers,
          (unsigned long long)prefill.memory_summary().parameters);
    }
    std::vector<int32_t> tokens(static_cast<size_t>(B * prompt)), start(size_t(B), 0),
        last(size_t(B), int32_t(prompt - 1));
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 7919) % size_t(c.vocab));
    prefill.set_input("tokens", tokens);
    prefill.set_input("start", start);
    prefill.set_input("last", last);
    // Warm-up by time, not count: the GPU idles its clock between bursts, and two warm-up runs left the first
    // configuration of a cold H200 at 3x its time (prefill batch 1 28.9 ms, then 9.1 warm; 2026-12-06).
    for (const double w0 = now_ms(); w0 + kWarmupMs > now_ms();) prefill.run();
    std::vector<double> gpu, wall;
    for (int r = 0; r < 5; ++r) {
      const double t0 = now_ms();
      prefill.run();
      wall.push_back(now_ms() - t0);
      gpu.push_back(prefill.last_step_gpu_ms());
    }
    std::sort(gpu.begin(), gpu.end());
    std::sort(wall.begin(), wall.end());
    std::printf(
        "{\"bench\":\"prefill\",\"dtype\":\"%s\",\"batch\":%lld,\"tokens\":%lld,\"gpu_ms\":%.4f,\"wall_ms\":%"
        ".4f}\n",
        dt, (long long)B, (long long)prompt, gpu[2], wall[2]);

    std::vector<int32_t> tok(size_t(B), 1), pos(static_cast<size_t>(B)), zero(size_t(B), 0);
    decode.set_input("tokens", tok);
    decode.set_input("last", zero);
    std::fill(pos.begin(), pos.end(), int32_t(prompt));  // warm-up steps write the first step's position
    decode.set_input("start", pos);
    for (const double w0 = now_ms(); w0 + kWarmupMs / 2 > now_ms();) decode.run();
    double gpu_sum = 0;
    const double t0 = now_ms();
    for (int k = 0; k < a.steps; ++k) {
      std::fill(pos.begin(), pos.end(), int32_t(prompt + k));
      decode.set_input("start", pos);
      decode.run();
      gpu_sum += decode.last_step_gpu_ms();
    }
    const double wall_ms = (now_ms() - t0) / a.steps, gpu_ms = gpu_sum / a.steps;
    std::printf(
        "{\"bench\":\"decode\",\"dtype\":\"%s\",\"batch\":%lld,\"context\":%lld,\"gpu_ms_per_step\":%.4f,"
        "\"wall_ms_per_step\":%.4f,\"tokens_per_s\":%.1f}\n",
        dt, (long long)B, (long long)c.max_context, gpu_ms, wall_ms, double(B) * 1000.0 / wall_ms);
    if (a.profile) {
      // Each dispatch of one prefill and of one decode step timed alone (Session::profile), summed per kernel
      // family.
      ProfileOptions po;
      po.warmup = 1;
      po.iterations = 5;
      for (Session* s : {&prefill, &decode}) {
        const nlohmann::json p = nlohmann::json::parse(s->profile(po));
        nlohmann::json line = {
            {"bench", s == &prefill ? "prefill_profile" : "decode_profile"}, {"dtype", dt}, {"batch", B}};
        bench::add_profile_summary(line, p);
        std::printf("%s\n", line.dump().c_str());
      }
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
