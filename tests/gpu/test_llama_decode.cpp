// The inference spine on a small random Llama-style model (GQA, RoPE, RMSNorm, SwiGLU, tied embeddings):
// a bucketed prefill session and a decode session sharing weights and KV cache by name, against a full
// recomputation by the CPU reference interpreter (float64) of the whole sequence at every position.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "gpu_fixture.hpp"
#include "meganeura/meganeura.hpp"
#include "meganeura/models/llama.hpp"
#include "meganeura/reference/interpreter.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/session/pipeline.hpp"

using namespace meganeura;
using models::LlamaConfig;

namespace {

class LlamaDecode : public test::GpuTest {};

LlamaConfig tiny(DType weights = DType::F32, DType cache = DType::F32) {
  LlamaConfig c;
  c.vocab = 37;
  c.hidden = 32;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.intermediate = 48;
  c.rope_theta = 10000.0;
  c.rms_eps = 1e-5;
  c.max_context = 16;
  c.weight_dtype = weights;
  c.cache_dtype = cache;
  return c;
}

SessionConfig inference() {
  SessionConfig cfg = test::gpu_config();
  cfg.training = false;
  cfg.optimizer.kind = OptimizerKind::None;
  cfg.dump_plan.clear();
  return cfg;
}

// Logits of the last token of `tokens` (one sequence), recomputed from scratch in float64.
std::vector<double> reference_logits(const LlamaConfig& c, const std::map<std::string, std::vector<float>>& w,
                                     const std::vector<int32_t>& tokens) {
  const int64_t L = int64_t(tokens.size());
  const models::LlamaStep st = models::build_llama(c, 1, L);
  reference::Feeds f;
  for (const auto& [name, v] : w)
    f[name] = HostTensor(st.graph.node(*st.graph.find(name)).shape, std::vector<double>(v.begin(), v.end()));
  for (NodeId s : st.graph.states()) f[st.graph.node(s).prov.name] = HostTensor(st.graph.node(s).shape, 0.0);
  f["tokens"] = HostTensor({1, L}, std::vector<double>(tokens.begin(), tokens.end()));
  f["start"] = HostTensor({1}, 0.0);
  f["last"] = HostTensor({1}, double(L - 1));
  return reference::evaluate_outputs(st.graph, f)[0].data;
}

void expect_close(const std::vector<float>& got, const double* want, size_t n, double tol,
                  const std::string& what) {
  ASSERT_GE(got.size(), n) << what;
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i)
    if (!(std::fabs(double(got[i]) - want[i]) <= tol * (1.0 + std::fabs(want[i]))) && bad++ < 5)
      ADD_FAILURE() << what << " [" << i << "]: gpu " << got[i] << " vs reference " << want[i];
  EXPECT_EQ(bad, 0u) << what;
}

// Sequences of different lengths in one batch: a bucketed prefill (each prompt padded to `bucket`), then
// `steps` decode steps of one token each, every logit row against the reference of that sequence so far.
void run_batch(const LlamaConfig& c, const std::vector<int>& lengths, int64_t bucket, int steps, double tol,
               const runtime::DeviceCaps* caps = nullptr) {
  const int64_t B = int64_t(lengths.size());
  const auto w = models::llama_random_weights(c, 5);
  std::mt19937 rng(9);
  std::vector<std::vector<int32_t>> seqs(static_cast<size_t>(B));
  for (auto& s : seqs)
    for (int i = 0; i < 16; ++i) s.push_back(int32_t(rng() % uint32_t(c.vocab)));

  std::shared_ptr<runtime::Device> dev(&test::gpu_device(), [](runtime::Device*) {});
  Session prefill = build_with(models::build_llama(c, B, bucket).graph, inference(), dev, {.caps = caps});
  Session decode =
      build_with(models::build_llama(c, B, 1).graph, inference(), dev, {.share = &prefill, .caps = caps});
  for (const auto& [name, v] : w) prefill.set_parameter(name, v);

  std::vector<int32_t> tokens(size_t(B * bucket), 0), start(size_t(B), 0), last(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    for (int i = 0; i < lengths[size_t(b)]; ++i) tokens[size_t(b * bucket + i)] = seqs[size_t(b)][size_t(i)];
    last[size_t(b)] = lengths[size_t(b)] - 1;
  }
  prefill.set_input("tokens", tokens);
  prefill.set_input("start", start);
  prefill.set_input("last", last);
  prefill.run();
  std::vector<float> got = prefill.read_output("logits");
  for (int64_t b = 0; b < B; ++b) {
    const int len = lengths[size_t(b)];
    const auto want = reference_logits(c, w, {seqs[size_t(b)].begin(), seqs[size_t(b)].begin() + len});
    expect_close({got.begin() + b * c.vocab, got.end()}, want.data(), size_t(c.vocab), tol,
                 "prefill of sequence " + std::to_string(b) + " (" + std::to_string(len) + " tokens)");
  }
  for (int k = 0; k < steps; ++k) {
    std::vector<int32_t> tok(static_cast<size_t>(B)), pos(static_cast<size_t>(B)), zero(size_t(B), 0);
    for (int64_t b = 0; b < B; ++b) {
      pos[size_t(b)] = lengths[size_t(b)] + k;
      tok[size_t(b)] = seqs[size_t(b)][size_t(pos[size_t(b)])];
    }
    decode.set_input("tokens", tok);
    decode.set_input("start", pos);
    decode.set_input("last", zero);
    decode.run();
    got = decode.read_output("logits");
    for (int64_t b = 0; b < B; ++b) {
      const int len = pos[size_t(b)] + 1;
      const auto want = reference_logits(c, w, {seqs[size_t(b)].begin(), seqs[size_t(b)].begin() + len});
      expect_close({got.begin() + b * c.vocab, got.end()}, want.data(), size_t(c.vocab), tol,
                   "decode step " + std::to_string(k) + " of sequence " + std::to_string(b) + " (position " +
                       std::to_string(pos[size_t(b)]) + ")");
    }
  }
}

}  // namespace

TEST_F(LlamaDecode, CachedDecodeEqualsFullRecomputationAtEveryPosition) {
  run_batch(tiny(), {5}, 8, 10, 1e-4);  // positions 5..14 of a 16-position cache
}

// The same on kernels compiled as for a device without subgroup arithmetic (AMD's 64-wide subgroups, or
// none): the GEMV sums every K-slice partial (and a fused RMSNorm's squares) through one shared slot, the
// decode attention reduces by a shared-memory tree and sums its scores' lanes in shared memory. lavapipe has
// 8-wide subgroups with arithmetic, so only these capabilities make it run those paths.
TEST_F(LlamaDecode, KernelsWithoutSubgroupArithmeticMatchTheReference) {
  runtime::DeviceCaps caps = test::gpu_device().caps();
  caps.subgroup_arithmetic = false;
  caps.subgroup_shuffle = false;  // the attention scores' lane sums through shared memory too
  const CompiledStep st = compile_step(models::build_llama(tiny(), 1, 1).graph, inference(), caps);
  size_t gemv = 0;
  for (const GeneratedKernel& k : st.code) {
    if (k.variant.find("gemv") == std::string::npos) continue;
    ++gemv;
    EXPECT_EQ(k.variant.find(".sg"), std::string::npos) << k.variant;
  }
  EXPECT_GE(gemv, 4u) << plan_text(st);
  run_batch(tiny(), {5}, 8, 4, 1e-4, &caps);
  run_batch(tiny(), {3, 6}, 8, 3, 1e-4, &caps);
}

TEST_F(LlamaDecode, BatchedDecodeOfDifferentLengthsEqualsSingleSequences) {
  run_batch(tiny(), {2, 7, 4}, 8, 4, 1e-4);
}

// f16 weights and KV cache: the reference rounds the same values to f16 (weights, cache rows); the GPU
// computes in f32 where the reference uses float64, so a value near an f16 rounding boundary may round the
// other way and move logits by about one f16 unit of the values it feeds (bound: 2e-3 relative).
TEST_F(LlamaDecode, HalfWeightsAndCacheMatchTheReference) {
  run_batch(tiny(DType::F16, DType::F16), {3, 6}, 8, 3, 2e-3);
  run_batch(tiny(DType::BF16, DType::BF16), {4}, 8, 2, 1.6e-2);
}

// Prefill and decode sessions share weights and cache: a parameter or state set through one is what the other
// reads, and a reset through one clears the other's cache. f16 weights take two bytes an element.
TEST_F(LlamaDecode, SessionsShareParametersAndStateByName) {
  const LlamaConfig c = tiny(DType::F16);
  std::shared_ptr<runtime::Device> dev(&test::gpu_device(), [](runtime::Device*) {});
  Session prefill = build(models::build_llama(c, 2, 8).graph, inference(), dev);
  Session decode = build(models::build_llama(c, 2, 1).graph, inference(), prefill);
  uint64_t params = 0;
  for (const auto& [name, shape] : models::llama_parameters(c)) params += uint64_t(numel(shape)) * 2;
  EXPECT_EQ(prefill.memory_summary().parameters, params);
  EXPECT_EQ(prefill.memory_summary().state,
            uint64_t(c.layers) * 2 * 2 * 2 * 16 * 8 * 4);  // k and v, f32 cache
  std::vector<float> v(size_t(c.hidden), 0.75f);
  prefill.set_parameter("output_norm.weight", v);
  EXPECT_EQ(decode.read_parameter("output_norm.weight"), v);
  std::vector<float> cache(2 * 2 * 16 * 8, 0.5f);
  decode.set_state("blk.1.k_cache", cache);
  EXPECT_EQ(prefill.read_state("blk.1.k_cache"), cache);
  prefill.reset_state();
  EXPECT_EQ(decode.read_state("blk.1.k_cache"), std::vector<float>(cache.size(), 0.0f));
  EXPECT_THROW(prefill.reset_state("no_such_cache"), SessionError);
}

// Qwen2's q/k/v biases (attn_bias): the biased projections through prefill and cached decode, against the
// reference; the biases are drawn at 0.02 like the weights, so a dropped bias moves logits well beyond 1e-4.
TEST_F(LlamaDecode, QkvBiasesMatchTheReference) {
  LlamaConfig c = tiny();
  c.attn_bias = true;
  const auto params = models::llama_parameters(c);
  EXPECT_TRUE(std::any_of(params.begin(), params.end(),
                          [](const auto& p) { return p.first == "blk.1.attn_k.bias"; }));
  run_batch(c, {3, 6}, 8, 3, 1e-4);
}

// The cache writes are taken into the attention kernel (schedule.cpp fold_cache_writes) whichever attention
// kernel runs: here the tiled forward, which a device with 8 KiB of shared memory gets for this model (the
// rows kernel's scores and P·V parts do not fit), against the reference at every position; the default
// capabilities give the rows kernel. Neither step has a copy kernel left.
TEST_F(LlamaDecode, CacheWritesInsideTheTiledAttentionMatchTheReference) {
  runtime::DeviceCaps caps = test::gpu_device().caps();
  caps.max_shared_memory = 8192;
  auto variants = [&](const runtime::DeviceCaps& cp) {
    const CompiledStep st = compile_step(models::build_llama(tiny(), 1, 1).graph, inference(), cp);
    std::map<std::string, int> n;
    for (const GeneratedKernel& k : st.code) n[k.variant] += 1;
    for (const Kernel& k : st.kernels.kernels)
      if (k.arch == Archetype::Copy) n["copy kernels"] += 1;
    return n;
  };
  auto small = variants(caps), full = variants(test::gpu_device().caps());
  EXPECT_EQ(small["attention.rows"], 0);
  EXPECT_EQ(full["attention.rows"], 2);
  EXPECT_EQ(small["copy kernels"], 0);
  EXPECT_EQ(full["copy kernels"], 0);
  run_batch(tiny(), {5}, 8, 4, 1e-4, &caps);
  run_batch(tiny(), {3, 6}, 8, 3, 1e-4, &caps);
}

// Dispatches a layer of the decode step (one token, batch 1), counted from the device-free compiler as the
// difference between 3 and 2 layers: Q, K and V in one GEMV pass with the attention RMSNorm as its prologue;
// attention with RoPE of the queries and keys and both cache writes inside; the output projection with the
// residual; gate and up in one GEMV pass with the FFN RMSNorm and SwiGLU; down with the residual. 18 before
// these fusions, 7 with the cache writes apart, 6 with them in a copy kernel of their own
// (docs/performance.md).
TEST_F(LlamaDecode, DecodeStepTakesFiveDispatchesALayer) {
  auto dispatches = [&](int64_t layers, int64_t batch) {
    LlamaConfig c = tiny();
    c.layers = layers;
    const CompiledStep st =
        compile_step(models::build_llama(c, batch, 1).graph, inference(), test::gpu_device().caps());
    return int64_t(step_kernels(st, true).size());
  };
  EXPECT_EQ(dispatches(3, 1) - dispatches(2, 1), 5);
  // Batch 16 is past the GEMV bound (8 rows): Q/K/V and gate/up stay separate products, the norms their own.
  EXPECT_EQ(dispatches(3, 16) - dispatches(2, 16), 10);
}
