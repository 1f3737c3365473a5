#pragma once
// Text generation from a LanguageModel: a Generator builds one decode session (one token per sequence) and
// prefill sessions (one per prompt bucket, built when first needed) over the same weights and KV cache, with
// the sampler (Graph::sample, ops/sample.cpp) in every step graph, so a decode step is one submission and
// only the chosen token ids (i32 per sequence) come back to the host. docs/inference.md describes the use.
//
// Prefill graphs (build_llama_sampling): build_llama's inputs tokens, start, last, and
//   sample_params f32 [batch, 5]   temperature, top_k, top_p, min_p, repetition penalty (ops/sample.hpp)
//   sample_rng    i32 [batch, 3]   seed low and high 32 bits, step (the draw is a function of these and the
//                                  row)
//   mark          i32 [batch]      a token to add to the row's seen set before sampling (-1: none)
// state  sample.seen f32 [batch, vocab] (> 0: the repetition penalty applies), output `token` i32 [batch].
// The decode graph (build_llama_decode) reads its tokens from the state sample.token i32 [batch, 1] instead
// of an input, marks them in the seen set, and writes the drawn ones back there: a
// step's input is the previous step's output without the host in between, so the Generator queues steps ahead
// of reading their tokens (start, last and the sampling inputs are known in advance).
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meganeura/models/language_model.hpp"
#include "meganeura/session/session.hpp"

namespace meganeura {
namespace runtime {
class Device;
}

namespace models {

// build_llama(config, batch, seq) with the sampler after the head; its one output is `token`.
LlamaStep build_llama_sampling(const LlamaConfig& config, int64_t batch, int64_t seq);
// One decode step of `batch` sequences whose tokens are the state sample.token (see above); output `token`
// (the state itself).
LlamaStep build_llama_decode(const LlamaConfig& config, int64_t batch);

struct SamplingParams {
  double temperature = 1.0;         // <= 0: greedy (argmax, ties to the lowest token id)
  int64_t top_k = 0;                // 0: off
  double top_p = 1.0;               // 1: off
  double min_p = 0.0;               // 0: off
  double repetition_penalty = 1.0;  // over the prompt and the tokens generated so far; 1: off
  static SamplingParams greedy() { return {0.0, 0, 1.0, 0.0, 1.0}; }
};

struct GenerationOptions {
  int64_t max_tokens = 256;  // generated tokens at most (the stop token not counted)
  std::optional<std::vector<int32_t>>
      stop_ids;  // generation ends at any of these; unset: the model's eos_ids
  SamplingParams sampling;
  uint64_t seed = 0;  // same seed, prompt and options: the same tokens
};

enum class FinishReason : uint8_t {
  Stop,      // a stop token was drawn (not part of `tokens`, not passed to the callback)
  Length,    // max_tokens reached
  Context,   // the sequence filled max_context
  Callback,  // the streaming callback returned false
};
const char* finish_reason_name(FinishReason r);

struct GenerationResult {
  std::vector<int32_t> prompt;  // as fed (text prompts: after tokenisation and BOS)
  std::vector<int32_t> tokens;  // generated, without the stop token
  std::string text;             // decoded `tokens` (empty without a tokenizer)
  FinishReason finish = FinishReason::Length;
  std::optional<int32_t> stop_token;  // the stop token drawn (finish == Stop)
  // Wall time of the prefill steps (prompt in, first token out) and of the decode steps (the other tokens),
  // and rates from them: prompt tokens / prefill_s, and decode-step tokens / decode_s (0 when none ran).
  double prefill_s = 0, decode_s = 0;
  double prompt_tokens_per_s = 0, generation_tokens_per_s = 0;
  int64_t decode_steps = 0;  // decode submissions
};

// Called once per generated token with its text (a piece that never splits a UTF-8 character: bytes of an
// unfinished character wait for the token that completes them; empty without a tokenizer). Return false to
// stop that sequence.
using StreamCallback = std::function<bool(int32_t token, std::string_view piece)>;
// The same for generate_batch, with the sequence's index.
using BatchStreamCallback = std::function<bool(size_t sequence, int32_t token, std::string_view piece)>;

struct GeneratorOptions {
  int64_t max_context = 0;  // KV cache positions per sequence; 0: the model's config.max_context
  int64_t batch = 1;        // sequences per step (generate_batch takes up to this many prompts)
  // Prefill sessions' prompt lengths. A prompt goes through the smallest bucket that holds it, and a longer
  // one through chunks of the largest bucket (the last chunk padded to the smallest that holds the rest);
  // padding costs the bucket's compute. Empty: {16, 128, 1024} below max_context, and max_context.
  std::vector<int64_t> prefill_buckets;
  std::optional<SessionConfig> session;  // unset: SessionConfig::from_env(); training is switched off
};

class Generator {
 public:
  // Builds the decode session and the smallest prefill session and uploads the weights (set_parameter_bytes).
  // ConfigError for bad options or a model whose weights do not match its config. `device`: a device the
  // caller opened (tests share one); null: the sessions open their own.
  explicit Generator(LanguageModel model, const GeneratorOptions& options = {},
                     std::shared_ptr<runtime::Device> device = nullptr);
  ~Generator();
  Generator(Generator&&) noexcept;
  Generator& operator=(Generator&&) noexcept;

  // One sequence. Token prompts are fed as given; text is encoded with the model's tokenizer (BOS prepended
  // when the model says add_bos). ConfigError for an empty prompt, a token id outside the vocabulary, a
  // prompt longer than max_context, text without a tokenizer, or bad options. Sessions and cache are reused
  // by every call (a call starts its sequences at position 0).
  GenerationResult generate(std::span<const int32_t> prompt, const GenerationOptions& options = {},
                            const StreamCallback& on_token = {});
  GenerationResult generate(std::string_view text, const GenerationOptions& options = {},
                            const StreamCallback& on_token = {});
  // Up to `batch` sequences at once, each with its own length, stop and callback; row i draws with the seed
  // and row index i, so its tokens depend on its place in the batch.
  std::vector<GenerationResult> generate_batch(const std::vector<std::vector<int32_t>>& prompts,
                                               const GenerationOptions& options = {},
                                               const BatchStreamCallback& on_token = {});

  const LanguageModel& model() const;
  int64_t max_context() const;
  int64_t batch() const;
  const std::vector<int64_t>& prefill_buckets() const;
  Session& decode_session();  // for profiles and memory summaries

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Incremental detokenisation: tokens in, text out, never half a UTF-8 character. Each push decodes every
// token so far (so decoders that look at neighbours, such as SentencePiece's leading-space rule, see them)
// and returns what is new, holding back the bytes of a character still unfinished (or a trailing U+FFFD, a
// decoder's mark for bytes it could not finish yet) until a later token completes it.
class TextStream {
 public:
  explicit TextStream(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}
  std::string push(int32_t token);
  std::string text() const;  // everything so far, unfinished bytes included
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  const Tokenizer* tokenizer_;
  std::vector<int32_t> tokens_;
  size_t emitted_ = 0;
};

// A LanguageModel of seeded random f32 weights (llama_random_weights) for `config`, without a tokenizer: for
// tests and benchmarks.
LanguageModel random_language_model(const LlamaConfig& config, uint64_t seed);

}  // namespace models
}  // namespace meganeura
