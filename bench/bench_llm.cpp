// SmolLM2-135M's configuration built from nn layers (nn::CausalLm: vocabulary 49152 x 576 tied to the head,
// 30 blocks of 9 heads over 3 KV heads, SwiGLU 1536, RMSNorm; seeded random weights), the three Inferena
// figures, one JSON line each (the torch twin is scripts/device/llm_torch.py, both run by
// scripts/device/llm.sh):
//   forward   an inference session over [batch, seq] tokens, logits [batch, seq, 49152] out
//   token     the same with one token per sequence ([batch, 1]; no KV cache: the whole model on one position)
//   train     an Adam step (lr 1e-4) on [batch, seq] tokens with index labels, mean cross-entropy
// each at every --batches x --seqs x --precisions (f32, mixed16). Fields: wall_ms (run(): submit and wait,
// mean of --steps after --warmup), gpu_ms (two timestamps around the recorded step, median), dispatches and
// barriers per step, and, unless --no-profile, the per-family profile (Session::profile: each dispatch timed
// alone) as "families": [[family, dispatches, ms], ...] largest first.
//   bench_llm                                              the H200 defaults (4 configurations x 3 figures x
//   2) bench_llm --layers 1 --batches 1 --seqs 16 --steps 2 --warmup 1 --no-profile   smoke test (lavapipe)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meganeura/core/error.hpp"
#include "meganeura/nn/nn.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/session/session.hpp"
#include "profile_summary.hpp"

using namespace meganeura;

namespace {

struct Args {
  int64_t layers = 30;
  std::vector<int64_t> batches{1, 8}, seqs{128, 512};
  std::vector<std::string> precisions{"f32", "mixed16"}, modes{"forward", "token", "train"};
  int steps = 20, warmup = 5, gpu_steps = 20;
  bool profile = true;
};

std::vector<int64_t> int_list(const std::string& v) {
  std::vector<int64_t> out;
  std::stringstream ss(v);
  for (std::string x; std::getline(ss, x, ',');) out.push_back(std::stoll(x));
  return out;
}

std::vector<std::string> str_list(const std::string& v) {
  std::vector<std::string> out;
  std::stringstream ss(v);
  for (std::string x; std::getline(ss, x, ',');) out.push_back(x);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

void measure(const Args& args, const std::string& mode, int64_t batch, int64_t seq,
             const std::string& precision) {
  const bool train = mode == "train";
  const int64_t S = mode == "token" ? 1 : seq;
  Graph g;
  nn::Context ctx(g, 42);
  nn::CausalLmConfig cfg = nn::CausalLmConfig::smollm2_135m();
  cfg.layers = args.layers;
  nn::CausalLm lm(ctx, "", cfg);
  const NodeId logits = lm(g.input("tokens", {batch, S}, DType::I32));
  if (train) {
    const NodeId flat = g.reshape(logits, {batch * S, cfg.vocab});
    g.set_outputs(
        {g.named(g.cross_entropy_loss_index(flat, g.input("labels", {batch * S}, DType::I32)), "loss")});
  } else {
    g.set_outputs({logits});
  }
  SessionConfig c = SessionConfig::from_env();
  c.gpu_timing = true;
  c.training = train;
  c.precision = precision == "mixed16" ? Precision::Mixed16 : Precision::F32;
  c.optimizer.kind = train ? OptimizerKind::Adam : OptimizerKind::None;
  c.optimizer.learning_rate = 1e-4;
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  Session s = build(g, c);
  const double build_s = std::chrono::duration<double>(clock::now() - t0).count();
  for (const auto& [name, w] : ctx.weights()) s.set_parameter(name, w);
  std::mt19937 rng(1);
  std::vector<int32_t> tokens(size_t(batch * S));
  for (int32_t& t : tokens) t = int32_t(rng() % uint32_t(cfg.vocab));
  s.set_input("tokens", tokens);
  if (train) {
    std::vector<int32_t> labels(tokens.begin() + 1, tokens.end());
    labels.push_back(0);
    s.set_input("labels", labels);
  }
  for (int i = 0; i < args.warmup; ++i) s.run();
  t0 = clock::now();
  for (int i = 0; i < args.steps; ++i) s.run();
  const double wall_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count() / args.steps;
  std::vector<double> gpu;
  for (int i = 0; i < args.gpu_steps; ++i) {
    s.run();
    gpu.push_back(s.last_step_gpu_ms());
  }
  nlohmann::json line = {
      {"bench", "vk_llm"},       {"model", "smollm2-135m"},
      {"device", s.caps().name}, {"mode", mode},
      {"batch", batch},          {"seq", S},
      {"layers", args.layers},   {"precision", precision},
      {"wall_ms", wall_ms},      {"gpu_ms", median(gpu)},
      {"build_s", build_s},      {"memory_mib", double(s.memory_summary().total()) / (1 << 20)}};
  if (train) line["loss"] = s.read_output(0).at(0);
  // The profile's session block counts dispatches and barriers; its families are the per-kernel-family times.
  ProfileOptions po;
  po.warmup = 1;
  po.iterations = args.profile ? 5 : 1;
  const nlohmann::json p = nlohmann::json::parse(s.profile(po));
  line["dispatches"] = p["session"]["dispatches"];
  line["barriers"] = p["session"]["barriers"];
  if (args.profile) {
    bench::add_profile_summary(line, p);
  }
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  const char* usage =
      "usage: bench_llm [--layers 30] [--batches 1,8] [--seqs 128,512] [--precisions f32,mixed16]\n"
      "                 [--modes forward,token,train] [--steps 20] [--warmup 5] [--gpu-steps 20] "
      "[--no-profile]\n";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-profile") {
      args.profile = false;
      continue;
    }
    if (i + 1 >= argc) {
      std::fputs(usage, stderr);
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--layers")
      args.layers = std::stoll(v);
    else if (a == "--batches")
      args.batches = int_list(v);
    else if (a == "--seqs")
      args.seqs = int_list(v);
    else if (a == "--precisions")
      args.precisions = str_list(v);
    else if (a == "--modes")
      args.modes = str_list(v);
    else if (a == "--steps")
      args.steps = std::stoi(v);
    else if (a == "--warmup")
      args.warmup = std::stoi(v);
    else if (a == "--gpu-steps")
      args.gpu_steps = std::stoi(v);
    else {
      std::fputs(usage, stderr);
      return 2;
    }
  }
  for (const std::string& m : args.modes)
    if (m != "forward" && m != "token" && m != "train") {
      std::fprintf(stderr, "bench_llm: expected modes forward, token or train, got '%s'\n", m.c_str());
      return 2;
    }
  for (const std::string& p : args.precisions)
    if (p != "f32" && p != "mixed16") {
      std::fprintf(stderr, "bench_llm: expected precisions f32 or mixed16, got '%s'\n", p.c_str());
      return 2;
    }
  int failures = 0;
  for (const std::string& precision : args.precisions)
    for (int64_t batch : args.batches)
      for (const std::string& mode : args.modes)
        for (int64_t seq : args.seqs) {
          if (mode == "token" && seq != args.seqs.front())
            continue;  // one position: the sequence length is moot
          try {
            measure(args, mode, batch, seq, precision);
          } catch (const Error& e) {
            ++failures;
            nlohmann::json line = {{"bench", "vk_llm"}, {"mode", mode},           {"batch", batch},
                                   {"seq", seq},        {"precision", precision}, {"error", e.what()}};
            std::printf("%s\n", line.dump().c_str());
            std::fflush(stdout);
          }
        }
  return failures ? 1 : 0;
}
