#include "meganeura/models/generate.hpp"

#include <algorithm>
#include <cmath>
#include <deque>

#include "meganeura/core/error.hpp"
#include "meganeura/ops/sample.hpp"

namespace meganeura::models {

namespace {

// The sampler after the logits, with the seen set marked at `mark` first; returns the drawn token ids [B].
NodeId append_sampler(Graph& g, const LlamaConfig& c, int64_t batch, NodeId logits, NodeId mark) {
  const NodeId params = g.input("sample_params", {batch, ops::kSampleParams}, DType::F32);
  const NodeId rng = g.input("sample_rng", {batch, ops::kSampleRng}, DType::I32);
  // The marked token's entry becomes 1 (a mark of -1 lands outside the row and is dropped).
  const NodeId seen = g.write_slice(g.state("sample.seen", {batch, c.vocab}, DType::F32),
                                    g.constant(std::vector<float>(size_t(batch), 1.0f), {batch, 1}), mark, 1);
  return g.sample(logits, seen, params, rng);
}

}  // namespace

LlamaStep build_llama_sampling(const LlamaConfig& c, int64_t batch, int64_t seq) {
  LlamaStep st = build_llama(c, batch, seq);
  Graph& g = st.graph;
  const NodeId mark = g.input("mark", {batch}, DType::I32);
  g.set_outputs({g.named(append_sampler(g, c, batch, g.outputs().at(0), mark), "token")});
  return st;
}

LlamaStep build_llama_decode(const LlamaConfig& c, int64_t batch) {
  LlamaStep st;
  st.batch = batch;
  Graph& g = st.graph;
  const NodeId fed = g.state("sample.token", {batch, 1}, DType::I32);
  const NodeId logits = llama_logits(g, c, batch, 1, fed);
  const NodeId drawn = append_sampler(g, c, batch, logits, g.reshape(fed, {batch}));
  // The state's new value is the step's output: the write depends on every reader of the fed token (the
  // embedding, the seen mark) through the logits, so the scheduler orders them before it.
  const NodeId next = g.write_slice(fed, g.reshape(drawn, {batch, 1}), g.fill(0, {batch}, DType::I32), 1);
  g.set_outputs({g.named(g.reshape(next, {batch}), "token")});
  return st;
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Context: return "context";
    case FinishReason::Callback: return "callback";
  }
  return "?";
}

namespace {

[[noreturn]] void fail(const std::string& fn, const std::string& what) {
  throw ConfigError("[Generator::" + fn + "] expected " + what);
}

// Bytes at the end of `s` that begin a UTF-8 character whose continuation bytes have not arrived.
size_t incomplete_utf8_tail(const std::string& s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back for the lead byte
    const size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

// U+FFFD at the end: a decoder's replacement for bytes it could not finish (byte fallback, byte-level BPE).
bool ends_with_replacement(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

}  // namespace

std::string TextStream::push(int32_t token) {
  tokens_.push_back(token);
  const std::string all = tokenizer_->decode(tokens_);
  const size_t ready = ends_with_replacement(all) ? all.size() - 3 : all.size() - incomplete_utf8_tail(all);
  if (ready <= emitted_) return {};
  std::string piece = all.substr(emitted_, ready - emitted_);
  emitted_ = ready;
  return piece;
}

std::string TextStream::text() const { return tokenizer_->decode(tokens_); }

struct Generator::Impl {
  LanguageModel model;
  LlamaConfig config;  // the model's, with this generator's max_context
  int64_t batch = 1;
  std::vector<int64_t> buckets;
  SessionConfig session_config;
  std::shared_ptr<runtime::Device> device;
  std::map<int64_t, Session> prefill;  // by bucket; the smallest owns weights and cache
  std::optional<Session> decode;

  Session& owner() { return prefill.begin()->second; }

  Session& prefill_session(int64_t bucket) {
    auto it = prefill.find(bucket);
    if (it != prefill.end()) return it->second;
    return prefill
        .emplace(bucket, build(build_llama_sampling(config, batch, bucket).graph, session_config, owner()))
        .first->second;
  }

  // Per-row sampling inputs for step `step`.
  void set_sampling(Session& s, const GenerationOptions& o, int64_t step) {
    std::vector<float> params(size_t(batch * ops::kSampleParams));
    std::vector<int32_t> rng(size_t(batch * ops::kSampleRng));
    for (int64_t b = 0; b < batch; ++b) {
      float* p = &params[size_t(b * ops::kSampleParams)];
      p[ops::kTemperature] = float(o.sampling.temperature);
      p[ops::kTopK] = float(o.sampling.top_k);
      p[ops::kTopP] = float(o.sampling.top_p);
      p[ops::kMinP] = float(o.sampling.min_p);
      p[ops::kPenalty] = float(o.sampling.repetition_penalty);
      int32_t* r = &rng[size_t(b * ops::kSampleRng)];
      r[ops::kSeedLo] = int32_t(uint32_t(o.seed));
      r[ops::kSeedHi] = int32_t(uint32_t(o.seed >> 32));
      r[ops::kStep] = int32_t(uint32_t(step));
    }
    s.set_input("sample_params", params);
    s.set_input("sample_rng", rng);
  }
};

Generator::Generator(LanguageModel model, const GeneratorOptions& options,
                     std::shared_ptr<runtime::Device> device)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.config = model.config;
  if (options.max_context < 0)
    fail("Generator", "max_context >= 0, got " + std::to_string(options.max_context));
  if (options.max_context > 0) m.config.max_context = options.max_context;
  const int64_t T = m.config.max_context;
  if (options.batch <= 0) fail("Generator", "batch > 0, got " + std::to_string(options.batch));
  m.batch = options.batch;
  m.buckets = options.prefill_buckets;
  if (m.buckets.empty()) {
    for (int64_t b : {16, 128, 1024})
      if (b < T) m.buckets.push_back(b);
    m.buckets.push_back(T);
  }
  std::sort(m.buckets.begin(), m.buckets.end());
  m.buckets.erase(std::unique(m.buckets.begin(), m.buckets.end()), m.buckets.end());
  for (int64_t b : m.buckets)
    if (b <= 0 || b > T)
      fail("Generator",
           "prefill buckets in 1..max_context " + std::to_string(T) + ", got " + std::to_string(b));
  // Weights: one per parameter of the config, of its shape and dtype.
  const auto params = llama_parameters(m.config);
  std::map<std::string, const WeightView*> by_name;
  for (const WeightView& w : model.weights) by_name[w.name] = &w;
  for (const auto& [name, shape] : params) {
    const auto it = by_name.find(name);
    if (it == by_name.end())
      fail("Generator", "a weight named '" + name + "' in " + model.source + ", got none");
    if (it->second->shape != shape || it->second->dtype != m.config.dtype_of(name))
      fail("Generator", "weight '" + name + "' of shape " + shape_str(shape) + " " +
                            dtype_name(m.config.dtype_of(name)) + ", got " + shape_str(it->second->shape) +
                            " " + dtype_name(it->second->dtype));
  }
  if (by_name.size() != params.size())
    fail("Generator", std::to_string(params.size()) + " weights (one per parameter), got " +
                          std::to_string(model.weights.size()));

  m.session_config = options.session ? *options.session : SessionConfig::from_env();
  m.session_config.training = false;
  m.session_config.optimizer.kind = OptimizerKind::None;
  const Graph first = build_llama_sampling(m.config, m.batch, m.buckets.front()).graph;
  m.prefill.emplace(m.buckets.front(),
                    device ? build(first, m.session_config, device) : build(first, m.session_config));
  m.decode.emplace(build(build_llama_decode(m.config, m.batch).graph, m.session_config, m.owner()));
  for (const WeightView& w : model.weights) m.owner().set_parameter_bytes(w.name, w.bytes);
  m.model = std::move(model);
}

Generator::~Generator() = default;
Generator::Generator(Generator&&) noexcept = default;
Generator& Generator::operator=(Generator&&) noexcept = default;

const LanguageModel& Generator::model() const { return impl_->model; }
int64_t Generator::max_context() const { return impl_->config.max_context; }
int64_t Generator::batch() const { return impl_->batch; }
const std::vector<int64_t>& Generator::prefill_buckets() const { return impl_->buckets; }
Session& Generator::decode_session() { return *impl_->decode; }

GenerationResult Generator::generate(std::span<const int32_t> prompt, const GenerationOptions& options,
                                     const StreamCallback& on_token) {
  BatchStreamCallback cb;
  if (on_token) cb = [&](size_t, int32_t t, std::string_view piece) { return on_token(t, piece); };
  return std::move(generate_batch({std::vector<int32_t>(prompt.begin(), prompt.end())}, options, cb).front());
}

GenerationResult Generator::generate(std::string_view text, const GenerationOptions& options,
                                     const StreamCallback& on_token) {
  const LanguageModel& lm = impl_->model;
  if (!lm.tokenizer) fail("generate", "a model with a tokenizer for a text prompt, got none in " + lm.source);
  EncodeOptions eo;
  eo.add_special = false;
  std::vector<int32_t> ids = lm.tokenizer->encode(text, eo);
  if (lm.add_bos && lm.bos_id >= 0 && (ids.empty() || ids.front() != lm.bos_id))
    ids.insert(ids.begin(), lm.bos_id);
  return generate(std::span<const int32_t>(ids), options, on_token);
}

std::vector<GenerationResult> Generator::generate_batch(const std::vector<std::vector<int32_t>>& prompts,
                                                        const GenerationOptions& o,
                                                        const BatchStreamCallback& on_token) {
  Impl& m = *impl_;
  const int64_t B = m.batch, T = m.config.max_context, V = m.config.vocab;
  const size_t n = prompts.size();
  // Everything is checked before the first step: a bad call leaves no half-run state behind.
  if (n == 0 || int64_t(n) > B)
    fail("generate",
         "1.." + std::to_string(B) + " prompts (the generator's batch), got " + std::to_string(n));
  for (size_t i = 0; i < n; ++i) {
    const auto& p = prompts[i];
    const std::string which = n == 1 ? "the prompt" : "prompt " + std::to_string(i);
    if (p.empty()) fail("generate", "a non-empty prompt, got an empty " + which);
    if (int64_t(p.size()) > T)
      fail("generate", which + " to fit max_context " + std::to_string(T) + ", got " +
                           std::to_string(p.size()) + " tokens");
    for (size_t j = 0; j < p.size(); ++j)
      if (p[j] < 0 || p[j] >= V)
        fail("generate", "token ids in 0.." + std::to_string(V - 1) + " in " + which + ", got " +
                             std::to_string(p[j]) + " at index " + std::to_string(j));
  }
  const SamplingParams& sp = o.sampling;
  if (o.max_tokens < 0) fail("generate", "max_tokens >= 0, got " + std::to_string(o.max_tokens));
  if (!(std::isfinite(sp.temperature) && sp.top_k >= 0 && sp.top_p > 0 && sp.top_p <= 1 && sp.min_p >= 0 &&
        sp.min_p <= 1 && sp.repetition_penalty > 0 && std::isfinite(sp.repetition_penalty)))
    fail("generate",
         "sampling with a finite temperature, top_k >= 0, 0 < top_p <= 1, 0 <= min_p <= 1 and a "
         "positive repetition_penalty, got temperature " +
             std::to_string(sp.temperature) + ", top_k " + std::to_string(sp.top_k) + ", top_p " +
             std::to_string(sp.top_p) + ", min_p " + std::to_string(sp.min_p) + ", repetition_penalty " +
             std::to_string(sp.repetition_penalty));
  const std::vector<int32_t> stops = o.stop_ids ? *o.stop_ids : m.model.eos_ids;

  std::vector<GenerationResult> res(n);
  std::vector<char> active(n, 1);
  std::vector<int32_t> next(n, 0);  // the latest token drawn for each sequence
  const Tokenizer* tok = m.model.tokenizer ? &*m.model.tokenizer : nullptr;
  std::vector<TextStream> streams;
  if (tok) streams.assign(n, TextStream(*tok));
  int64_t prompt_total = 0, longest = 0;
  for (size_t i = 0; i < n; ++i) {
    res[i].prompt = prompts[i];
    prompt_total += int64_t(prompts[i].size());
    longest = std::max(longest, int64_t(prompts[i].size()));
  }
  if (o.max_tokens == 0) return res;

  // A drawn token: stop, or keep it and stream its text. Returns whether the sequence goes on.
  auto accept = [&](size_t i, int32_t t) {
    GenerationResult& r = res[i];
    if (std::find(stops.begin(), stops.end(), t) != stops.end()) {
      r.finish = FinishReason::Stop;
      r.stop_token = t;
      return false;
    }
    r.tokens.push_back(t);
    const std::string piece = tok ? streams[i].push(t) : std::string();
    if (on_token && !on_token(i, t, piece)) {
      r.finish = FinishReason::Callback;
      return false;
    }
    if (int64_t(r.tokens.size()) >= o.max_tokens) {
      r.finish = FinishReason::Length;
      return false;
    }
    if (int64_t(r.prompt.size() + r.tokens.size()) >= T) {  // no position left to feed it at
      r.finish = FinishReason::Context;
      return false;
    }
    return true;
  };

  // The seen set: the prompt's tokens (the penalty reads it only when it is not 1).
  const bool penalty = sp.repetition_penalty != 1.0;
  if (penalty) {
    std::vector<float> seen(size_t(B * V), 0.0f);
    for (size_t i = 0; i < n; ++i)
      for (int32_t t : prompts[i]) seen[i * size_t(V) + size_t(t)] = 1.0f;
    m.owner().set_state("sample.seen", seen);
  }

  // Prefill: chunks of the largest bucket while more than it remains, then the smallest bucket holding the
  // rest.
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t at = 0; at < longest;) {
    const int64_t rest = longest - at;
    const auto fit = std::lower_bound(m.buckets.begin(), m.buckets.end(), rest);
    const int64_t S = fit == m.buckets.end() ? m.buckets.back() : *fit;
    Session& s = m.prefill_session(S);
    std::vector<int32_t> tokens(size_t(B * S), 0), start(static_cast<size_t>(B), int32_t(at)),
        last(size_t(B), 0), mark(size_t(B), -1);
    for (size_t i = 0; i < n; ++i) {
      const int64_t len = int64_t(prompts[i].size());
      for (int64_t j = at; j < std::min(len, at + S); ++j)
        tokens[i * size_t(S) + size_t(j - at)] = prompts[i][size_t(j)];
      last[i] = int32_t(std::clamp<int64_t>(len - 1 - at, 0, S - 1));
    }
    s.set_input("tokens", tokens);
    s.set_input("start", start);
    s.set_input("last", last);
    s.set_input("mark", mark);
    m.set_sampling(s, o, 0);
    s.run();
    const std::vector<float> drawn = s.read_output("token");
    for (size_t i = 0; i < n; ++i) {
      const int64_t len = int64_t(prompts[i].size());
      if (len - 1 >= at && len - 1 < at + S) next[i] = int32_t(drawn[i]);
    }
    at += S;
  }
  const auto t1 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < n; ++i) active[i] = accept(i, next[i]);

  // Decode: step s (1, 2, ...) feeds each sequence's latest token, which the previous step (the prefill for
  // s = 1) left in sample.token, at position len + s - 1, and draws the next. Steps are queued up to the
  // session's frames in flight ahead of the one whose tokens the host reads, so the GPU does not wait for the
  // host between tokens. A sequence that stopped at a drawn stop token (or the callback) is known only when
  // that step is read: the steps queued behind it compute tokens nobody reads, at positions clamped inside
  // the cache. Length and Context stops are known ahead, so no step past the last needed one is queued.
  Session& d = *m.decode;
  {
    std::vector<int32_t> fed(size_t(B), 0);
    std::copy(next.begin(), next.end(), fed.begin());
    d.set_state("sample.token", fed);
  }
  int64_t last_step = 0;  // the last step any sequence may need
  for (size_t i = 0; i < n; ++i)
    if (active[i])
      last_step = std::max(last_step, std::min<int64_t>(o.max_tokens, T - int64_t(prompts[i].size())) - 1);
  d.set_input("last", std::vector<int32_t>(size_t(B), 0));
  const size_t ahead = size_t(std::max(1, m.session_config.frames_in_flight));
  std::deque<uint64_t> queued;  // the session's ids of the queued steps, oldest first
  int64_t steps = 0, decoded = 0;
  for (int64_t s = 1; std::find(active.begin(), active.end(), 1) != active.end();) {
    for (; queued.size() < ahead && s <= last_step; ++s) {
      std::vector<int32_t> start(size_t(B), 0);
      for (size_t i = 0; i < n; ++i)
        start[i] = int32_t(std::min<int64_t>(int64_t(res[i].prompt.size()) + s - 1, T - 1));
      d.set_input("start", start);
      m.set_sampling(d, o, s);
      queued.push_back(d.step());
      ++steps;
    }
    if (queued.empty()) break;  // unreachable: an active sequence has a step left before its Length stop
    const std::vector<float> drawn = d.read_output("token", queued.front());
    queued.pop_front();
    for (size_t i = 0; i < n; ++i) {
      if (!active[i]) continue;
      ++decoded;
      next[i] = int32_t(drawn[i]);
      active[i] = accept(i, next[i]);
    }
  }
  const auto t2 = std::chrono::steady_clock::now();
  d.wait();  // steps queued past a stop
  const double prefill_s = std::chrono::duration<double>(t1 - t0).count();
  const double decode_s = std::chrono::duration<double>(t2 - t1).count();
  for (GenerationResult& r : res) {
    if (tok) r.text = tok->decode(r.tokens);
    r.prefill_s = prefill_s;
    r.decode_s = decode_s;
    r.decode_steps = steps;
    r.prompt_tokens_per_s = prefill_s > 0 ? double(prompt_total) / prefill_s : 0;
    r.generation_tokens_per_s = decode_s > 0 && decoded > 0 ? double(decoded) / decode_s : 0;
  }
  return res;
}

LanguageModel random_language_model(const LlamaConfig& config, uint64_t seed) {
  auto weights =
      std::make_shared<std::map<std::string, std::vector<float>>>(llama_random_weights(config, seed));
  LanguageModel lm;
  lm.source = "random weights (seed " + std::to_string(seed) + ")";
  lm.architecture = "llama";
  lm.config = config;
  lm.config.weight_dtype = DType::F32;
  lm.config.tensor_dtypes.clear();
  for (const auto& [name, shape] : llama_parameters(lm.config)) {
    const std::vector<float>& v = weights->at(name);
    lm.weights.push_back({name, DType::F32, shape, std::as_bytes(std::span<const float>(v))});
  }
  lm.storage = weights;
  return lm;
}

}  // namespace meganeura::models
