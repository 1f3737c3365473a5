// The matmul variants a SmolLM2-135M step gets from the selection rule (kernels::choose_variant),
// device-free: compile_step on a device description with a given number of compute units (132: the H200's
// SMs; 0: unknown, 64 assumed, as on lavapipe), then one line per matmul dispatch family: variant,
// dispatches, workgroups and the shapes. Counts, not timings:
// scripts/device/matmul-shapes.sh times the variants.
//   llm_matmul_variants [--units 132] [--mode train|forward|token] [--batch 1] [--seq 128] [--layers 30]
//                       [--mixed16 (with --best coopmat-khr: the tier the H200's self-test passes)]
//                       [--glsl TEXT (print the GLSL, grid and push constants of kernels whose label has
//                       TEXT)]
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "meganeura/models/llama.hpp"
#include "meganeura/nn/nn.hpp"
#include "meganeura/session/pipeline.hpp"

using namespace meganeura;

int main(int argc, char** argv) {
  uint32_t units = 132;
  std::string mode = "train", best;
  int64_t batch = 1, seq = 128, layers = 30;
  bool mixed16 = false, labels = false;  // --labels: every dispatch's family and label ("--" after a barrier)
  std::string glsl;
  std::string
      llama;  // --llama DTYPE: bench_decode's prefill graph (models::build_llama) with weights of DTYPE
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool v = i + 1 < argc;
    if (a == "--units" && v)
      units = uint32_t(std::stoul(argv[++i]));
    else if (a == "--mode" && v)
      mode = argv[++i];
    else if (a == "--batch" && v)
      batch = std::stoll(argv[++i]);
    else if (a == "--seq" && v)
      seq = std::stoll(argv[++i]);
    else if (a == "--layers" && v)
      layers = std::stoll(argv[++i]);
    else if (a == "--best" && v)
      best = argv[++i];
    else if (a == "--llama" && v)
      llama = argv[++i];
    else if (a == "--glsl" && v)
      glsl = argv[++i];
    else if (a == "--labels")
      labels = true;
    else if (a == "--mixed16")
      mixed16 = true;
    else {
      std::fprintf(stderr,
                   "usage: llm_matmul_variants [--units N] [--mode train|forward|token] [--batch B] "
                   "[--seq S] [--layers L] [--mixed16] [--best coopmat-khr] [--llama f32|f16|q8_0|...]\n");
      return 2;
    }
  }
  if (mode == "token") seq = 1;
  Graph g;
  nn::Context ctx(g, 1);
  nn::CausalLmConfig cfg;
  cfg.layers = layers;
  SessionConfig c;
  c.precision = mixed16 ? Precision::Mixed16 : Precision::F32;
  if (!llama.empty()) {  // inference only: the prefill (or, with --seq 1, the decode step) of bench_decode
    models::LlamaConfig lc = models::LlamaConfig::smollm2_135m();
    lc.layers = layers;
    lc.max_context = 512;
    lc.weight_dtype = parse_dtype(llama);
    if (lc.weight_dtype != DType::F32 && lc.weight_dtype != DType::F16 && lc.weight_dtype != DType::BF16)
      for (const auto& [name, shape] : models::llama_parameters(lc))
        if (shape.size() == 1) lc.tensor_dtypes[name] = DType::F32;
    g = models::build_llama(lc, batch, seq).graph;
    c.training = false;
    c.optimizer.kind = OptimizerKind::None;
    mode = "llama-" + llama;
  } else {
    nn::CausalLm lm(ctx, "", cfg);
    NodeId tokens = g.input("tokens", {batch, seq}, DType::I32);
    NodeId logits = lm(tokens);
    if (mode == "train") {
      NodeId labels = g.input("labels", {batch, seq}, DType::I32);
      g.set_outputs({g.named(g.cross_entropy_loss_index(g.reshape(logits, {batch * seq, cfg.vocab}),
                                                        g.reshape(labels, {batch * seq})),
                             "loss")});
      c.optimizer.kind = OptimizerKind::Adam;
    } else {
      g.set_outputs({logits});
      c.training = false;
      c.optimizer.kind = OptimizerKind::None;
    }
  }
  // An H200-like description: 16-bit storage, 32-wide subgroups, 48 KiB of shared memory; cooperative
  // matrices only where --best names a cooperative tier.
  runtime::DeviceCaps caps;
  caps.name = "described";
  caps.subgroup_size = 32;
  caps.max_shared_memory = 49152;
  caps.max_workgroup_invocations = 1024;
  caps.min_storage_buffer_offset_alignment = 64;
  caps.max_workgroup_count[0] = caps.max_workgroup_count[1] = caps.max_workgroup_count[2] = 65535;
  caps.max_storage_buffer_range = uint64_t(1) << 32;
  caps.compute_units = units;
  caps.storage_16bit = caps.fp16_arithmetic = true;
  CompileOptions o;
  if (!best.empty()) {
    o.matmul_best = kernels::parse_tier(best);
    caps.coopmat_nv = caps.coopmat_khr = true;
    runtime::CoopMatShape s{16, 8, 16, "f16", "f16", "f32", "f32", "subgroup", 0};
    caps.coopmat_nv_shapes = caps.coopmat_khr_shapes = {s};
  }
  const CompiledStep step = compile_step(g, c, caps, o);
  struct Family {
    size_t dispatches = 0;
    uint64_t workgroups = 0;
    std::map<std::string, size_t> shapes;
  };
  std::map<std::string, Family> fam;
  size_t total = 0, matmuls = 0;
  // Barriers of the recorded step (the updating list): each costs the GPU a drain between levels.
  const std::vector<size_t> list = step_kernels(step, true);
  const std::vector<bool> barriers = plan_barriers(step, list);
  const size_t nbarriers = size_t(std::count(barriers.begin(), barriers.end(), true));
  if (labels)
    for (size_t i = 0; i < list.size(); ++i)
      std::printf("%s%s | %s\n", barriers[i] ? "-- " : "   ", step.code[list[i]].variant.c_str(),
                  step.code[list[i]].label.c_str());
  for (const GeneratedKernel& k : step.code) {
    if (!glsl.empty() && k.label.find(glsl) != std::string::npos) {
      std::printf("// %s | %s | grid %u %u %u | push", k.variant.c_str(), k.label.c_str(), k.grid[0],
                  k.grid[1], k.grid[2]);
      for (uint32_t x : k.push) std::printf(" %u", x);
      std::printf("\n%s\n", k.glsl.c_str());
    }
    ++total;
    if (k.variant.rfind("matmul.", 0) != 0) continue;
    ++matmuls;
    Family& f = fam[k.variant];
    ++f.dispatches;
    f.workgroups += uint64_t(k.grid[0]) * k.grid[1] * k.grid[2];
    if (k.push.size() >= 3)
      ++f.shapes[std::to_string(k.push[0]) + "x" + std::to_string(k.push[1]) + "x" +
                 std::to_string(k.push[2])];
  }
  std::printf(
      "mode %s, batch %lld, seq %lld, layers %lld, %s, compute units %u%s: %zu dispatches, %zu barriers, %zu "
      "matmul\n",
      mode.c_str(), (long long)batch, (long long)seq, (long long)layers, mixed16 ? "Mixed16" : "F32", units,
      best.empty() ? "" : (", best tier " + best).c_str(), total, nbarriers, matmuls);
  std::printf("| variant | dispatches | workgroups | shapes (M x N x K: dispatches) |\n|---|---|---|---|\n");
  for (const auto& [v, f] : fam) {
    std::string shapes;
    for (const auto& [s, n] : f.shapes) shapes += (shapes.empty() ? "" : ", ") + s + ": " + std::to_string(n);
    std::printf("| %s | %zu | %llu | %s |\n", v.c_str(), f.dispatches, (unsigned long long)f.workgroups,
                shapes.c_str());
  }
  return 0;
}
