// models::Generator on a tiny random Llama-style model (GQA, RoPE, RMSNorm, SwiGLU, tied embeddings): greedy
// tokens against the argmax of the CPU reference's logits recomputed from scratch (float64) for the whole
// sequence at every step; stop tokens, max_tokens, the context limit and the streaming callback; seeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>

#include "gpu_fixture.hpp"
#include "meganeura/meganeura.hpp"
#include "meganeura/models/generate.hpp"
#include "meganeura/reference/interpreter.hpp"
#include "meganeura/session/pipeline.hpp"

using namespace meganeura;
using models::GenerationOptions;
using models::Generator;
using models::GeneratorOptions;
using models::LlamaConfig;

namespace {

class Generate : public test::GpuTest {};

LlamaConfig tiny() {
  LlamaConfig c;
  c.vocab = 37;
  c.hidden = 32;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.intermediate = 48;
  c.rope_theta = 10000.0;
  c.max_context = 16;
  return c;
}

// Larger weights than llama_random_weights' (std 0.02) so logits differ clearly and greedy choices are not
// decided by rounding: every weight scaled by 20.
models::LanguageModel model(uint64_t seed = 5) {
  models::LanguageModel lm = models::random_language_model(tiny(), seed);
  auto scaled =
      std::make_shared<std::map<std::string, std::vector<float>>>(models::llama_random_weights(tiny(), seed));
  for (auto& [name, v] : *scaled)
    if (name.find("norm") == std::string::npos)
      for (float& x : v) x *= 20.0f;
  for (models::WeightView& w : lm.weights)
    w.bytes = std::as_bytes(std::span<const float>(scaled->at(w.name)));
  lm.storage = scaled;
  lm.eos_ids = {};
  return lm;
}

std::map<std::string, std::vector<float>> weights_of(const models::LanguageModel& lm) {
  std::map<std::string, std::vector<float>> w;
  for (const models::WeightView& v : lm.weights) {
    const float* f = reinterpret_cast<const float*>(v.bytes.data());
    w[v.name].assign(f, f + v.bytes.size() / 4);
  }
  return w;
}

GeneratorOptions options(std::vector<int64_t> buckets = {8}, int64_t batch = 1) {
  GeneratorOptions o;
  o.batch = batch;
  o.prefill_buckets = std::move(buckets);
  SessionConfig cfg = test::gpu_config();
  cfg.dump_plan.clear();
  o.session = cfg;
  return o;
}

std::shared_ptr<runtime::Device> shared_device() {
  return {&test::gpu_device(), [](runtime::Device*) {}};
}

// The greedy continuation by the reference: argmax (first maximum) of the logits of the whole sequence so
// far, after the repetition penalty on every token of it (logit < 0 ? logit·r : logit / r; r = 1: none).
std::vector<int32_t> reference_greedy(const LlamaConfig& c,
                                      const std::map<std::string, std::vector<float>>& w,
                                      std::vector<int32_t> seq, int64_t steps, double penalty = 1.0) {
  std::vector<int32_t> out;
  for (int64_t k = 0; k < steps && int64_t(seq.size()) <= c.max_context; ++k) {
    const int64_t L = int64_t(seq.size());
    const models::LlamaStep st = models::build_llama(c, 1, L);
    reference::Feeds f;
    for (const auto& [name, v] : w)
      f[name] =
          HostTensor(st.graph.node(*st.graph.find(name)).shape, std::vector<double>(v.begin(), v.end()));
    for (NodeId s : st.graph.states())
      f[st.graph.node(s).prov.name] = HostTensor(st.graph.node(s).shape, 0.0);
    f["tokens"] = HostTensor({1, L}, std::vector<double>(seq.begin(), seq.end()));
    f["start"] = HostTensor({1}, 0.0);
    f["last"] = HostTensor({1}, double(L - 1));
    std::vector<double> logits = reference::evaluate_outputs(st.graph, f)[0].data;
    if (penalty != 1.0)
      for (size_t v = 0; v < logits.size(); ++v)
        if (std::find(seq.begin(), seq.end(), int32_t(v)) != seq.end())
          logits[v] = logits[v] < 0 ? logits[v] * penalty : logits[v] / penalty;
    const int32_t t = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(t);
    seq.push_back(t);
  }
  return out;
}

GenerationOptions greedy(int64_t max_tokens) {
  GenerationOptions o;
  o.max_tokens = max_tokens;
  o.sampling = models::SamplingParams::greedy();
  return o;
}

}  // namespace

// A 5-token prompt through an 8-token bucket, and a 10-token prompt through two chunks of the 8-token bucket
// (the second padded): every generated token is the reference's argmax for the sequence so far, up to the
// end of the 16-position context.
TEST_F(Generate, GreedyTokensAreTheArgmaxOfReferenceLogitsAtEveryStep) {
  models::LanguageModel lm = model();
  const auto w = weights_of(lm);
  Generator gen(std::move(lm), options({8}), shared_device());
  const std::vector<int32_t> p1 = {3, 17, 1, 30, 8};
  const models::GenerationResult r1 = gen.generate(std::span<const int32_t>(p1), greedy(6));
  EXPECT_EQ(r1.tokens, reference_greedy(tiny(), w, p1, 6));
  EXPECT_EQ(r1.finish, models::FinishReason::Length);
  EXPECT_EQ(r1.decode_steps, 5);
  EXPECT_GT(r1.prompt_tokens_per_s, 0);
  EXPECT_GT(r1.generation_tokens_per_s, 0);
  const std::vector<int32_t> p2 = {9, 2, 2, 36, 0, 14, 5, 21, 11, 7};
  const models::GenerationResult r2 = gen.generate(std::span<const int32_t>(p2), greedy(100));
  EXPECT_EQ(r2.tokens, reference_greedy(tiny(), w, p2, 6));  // 16 - 10 positions
  EXPECT_EQ(r2.finish, models::FinishReason::Context);
  // the first call again: sessions and cache reused, same tokens
  EXPECT_EQ(gen.generate(std::span<const int32_t>(p1), greedy(6)).tokens, r1.tokens);
}

// The repetition penalty over the prompt and the generated tokens: the decode steps mark each fed token in
// the seen set on the GPU (the token the step before drew), so the penalised greedy tokens are the
// reference's.
TEST_F(Generate, RepetitionPenaltyCoversThePromptAndEveryGeneratedToken) {
  models::LanguageModel lm = model();
  const auto w = weights_of(lm);
  Generator gen(std::move(lm), options({8}), shared_device());
  const std::vector<int32_t> p = {3, 17, 1, 30, 8};
  GenerationOptions o = greedy(9);
  o.sampling.repetition_penalty = 3.0;
  const std::vector<int32_t> plain = reference_greedy(tiny(), w, p, 9);
  const std::vector<int32_t> penalised = reference_greedy(tiny(), w, p, 9, 3.0);
  ASSERT_NE(plain, penalised);  // the penalty changes this continuation, so the test sees it applied
  EXPECT_EQ(gen.generate(std::span<const int32_t>(p), o).tokens, penalised);
  EXPECT_EQ(gen.generate(std::span<const int32_t>(p), greedy(9)).tokens, plain);  // and is gone again
}

// Steps queued ahead of the host's reads give the tokens of one step at a time: a batch of two prompts of
// different lengths, sampled with temperature, top-k and the penalty (the draws depend on each step's start,
// step counter and seen set), one sequence ending at a stop token while later steps are queued.
TEST_F(Generate, QueuedStepsGiveTheTokensOfOneStepAtATime) {
  auto run = [&](int frames, std::optional<int32_t> stop) {
    GeneratorOptions go = options({8}, 2);
    go.session->frames_in_flight = frames;
    Generator gen(model(), go, shared_device());
    GenerationOptions o;
    o.max_tokens = 9;
    o.sampling.temperature = 1.5;
    o.sampling.top_k = 20;
    o.sampling.repetition_penalty = 1.3;
    o.seed = 77;
    o.stop_ids = stop ? std::vector<int32_t>{*stop} : std::vector<int32_t>{};
    std::vector<std::vector<int32_t>> out;
    for (const auto& r : gen.generate_batch({{5, 9, 2}, {11, 3, 3, 8, 20, 1}}, o)) out.push_back(r.tokens);
    return out;
  };
  const auto one = run(1, std::nullopt);
  ASSERT_EQ(one.size(), 2u);
  ASSERT_EQ(one[0].size(), 9u);
  EXPECT_EQ(run(3, std::nullopt), one);
  // a stop at the first sequence's fourth token: it ends there, the other runs on (unless it draws it too)
  const int32_t stop = one[0][3];
  const auto stopped1 = run(1, stop), stopped3 = run(3, stop);
  EXPECT_EQ(stopped3, stopped1);
  EXPECT_LE(stopped1[0].size(), 3u);
}

// The decode graph is the Llama step plus three kernels: the seen mark, the sampler and the write of the
// drawn tokens into sample.token (the output is that state, read back without a kernel of its own).
TEST_F(Generate, DecodeStepIsTheLlamaStepAndThreeKernels) {
  SessionConfig cfg = options().session.value();
  cfg.training = false;
  cfg.optimizer.kind = OptimizerKind::None;
  auto dispatches = [&](const Graph& g) {
    return int64_t(step_kernels(compile_step(g, cfg, test::gpu_device().caps()), true).size());
  };
  for (int64_t batch : {1, 3})
    EXPECT_EQ(dispatches(models::build_llama_decode(tiny(), batch).graph) -
                  dispatches(models::build_llama(tiny(), batch, 1).graph),
              3)
        << "batch " << batch;
}

// A batch of prompts of different lengths gives each sequence the tokens it gets alone.
TEST_F(Generate, BatchedGenerationEqualsSingleSequences) {
  Generator one(model(), options({4, 8}), shared_device());
  Generator three(model(), options({4, 8}, 3), shared_device());
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3}, {30, 31, 32, 33, 34, 35, 36}, {5}};
  const std::vector<models::GenerationResult> rs = three.generate_batch(prompts, greedy(5));
  ASSERT_EQ(rs.size(), 3u);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(rs[i].tokens, one.generate(std::span<const int32_t>(prompts[i]), greedy(5)).tokens)
        << "sequence " << i;
}

TEST_F(Generate, StopTokensMaxTokensAndTheCallbackEndGeneration) {
  Generator gen(model(), options({8}), shared_device());
  const std::vector<int32_t> p = {4, 4, 19};
  const std::vector<int32_t> all = gen.generate(std::span<const int32_t>(p), greedy(8)).tokens;
  ASSERT_EQ(all.size(), 8u);
  // a stop token ends generation before it; the first occurrence counts
  GenerationOptions o = greedy(8);
  o.stop_ids = std::vector<int32_t>{all[3]};
  const models::GenerationResult stopped = gen.generate(std::span<const int32_t>(p), o);
  const size_t first = size_t(std::find(all.begin(), all.end(), all[3]) - all.begin());
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>(all.begin(), all.begin() + long(first)));
  EXPECT_EQ(stopped.finish, models::FinishReason::Stop);
  EXPECT_EQ(stopped.stop_token, all[3]);
  // the model's eos_ids are the default stop tokens
  {
    models::LanguageModel lm = model();
    lm.eos_ids = {all[3]};
    Generator with_eos(std::move(lm), options({8}), shared_device());
    EXPECT_EQ(with_eos.generate(std::span<const int32_t>(p), greedy(8)).tokens, stopped.tokens);
  }
  // max_tokens
  const models::GenerationResult three = gen.generate(std::span<const int32_t>(p), greedy(3));
  EXPECT_EQ(three.tokens, std::vector<int32_t>(all.begin(), all.begin() + 3));
  EXPECT_EQ(three.finish, models::FinishReason::Length);
  EXPECT_TRUE(gen.generate(std::span<const int32_t>(p), greedy(0)).tokens.empty());
  // the callback sees every token in order and stops after the second
  std::vector<int32_t> seen;
  const models::GenerationResult cb =
      gen.generate(std::span<const int32_t>(p), greedy(8), [&](int32_t t, std::string_view) {
        seen.push_back(t);
        return seen.size() < 2;
      });
  EXPECT_EQ(seen, std::vector<int32_t>(all.begin(), all.begin() + 2));
  EXPECT_EQ(cb.tokens, seen);
  EXPECT_EQ(cb.finish, models::FinishReason::Callback);
}

TEST_F(Generate, SameSeedSameTokensOtherSeedOtherTokens) {
  Generator gen(model(), options({8}), shared_device());
  const std::vector<int32_t> p = {7, 1};
  GenerationOptions o;
  o.max_tokens = 12;
  o.sampling.temperature = 3.0;  // flat enough that two seeds agree on 12 tokens with tiny probability
  o.seed = 1234;
  const std::vector<int32_t> a = gen.generate(std::span<const int32_t>(p), o).tokens;
  ASSERT_EQ(a.size(), 12u);
  EXPECT_EQ(gen.generate(std::span<const int32_t>(p), o).tokens, a);
  o.seed = 1235;
  EXPECT_NE(gen.generate(std::span<const int32_t>(p), o).tokens, a);
  // top_k = 1 is greedy whatever the seed
  o.sampling.top_k = 1;
  EXPECT_EQ(gen.generate(std::span<const int32_t>(p), o).tokens,
            gen.generate(std::span<const int32_t>(p), greedy(12)).tokens);
}

TEST_F(Generate, BadPromptsAndOptionsAreConfigErrors) {
  Generator gen(model(), options({8}), shared_device());
  const std::vector<int32_t> long_prompt(17, 1), empty, bad_id = {1, 37};
  EXPECT_THROW(gen.generate(std::span<const int32_t>(long_prompt)), ConfigError);
  EXPECT_THROW(gen.generate(std::span<const int32_t>(empty)), ConfigError);
  EXPECT_THROW(gen.generate(std::span<const int32_t>(bad_id)), ConfigError);
  EXPECT_THROW(gen.generate(std::string_view("text without a tokenizer")), ConfigError);
  GenerationOptions o;
  o.sampling.top_p = 0;
  const std::vector<int32_t> p = {1};
  EXPECT_THROW(gen.generate(std::span<const int32_t>(p), o), ConfigError);
  EXPECT_THROW(gen.generate_batch({p, p}), ConfigError);                          // batch 1
  EXPECT_THROW(Generator(model(), options({32}), shared_device()), ConfigError);  // bucket over max_context
  models::LanguageModel missing = model();
  missing.weights.pop_back();
  EXPECT_THROW(Generator(std::move(missing), options({8}), shared_device()), ConfigError);
  // a failed call leaves the generator usable
  EXPECT_EQ(gen.generate(std::span<const int32_t>(p), greedy(2)).tokens.size(), 2u);
}
