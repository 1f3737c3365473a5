// Language models from Python: load_gguf / load_hf → LanguageModel (config, tokenizer, weights as views),
// .generator(...) → Generator, .generate(prompt, ...) with a streaming callback. The GPU runs with the GIL
// released; the callback takes it back for each token.
#include <nanobind/stl/function.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <functional>
#include <mutex>
#include <optional>

#include "bindings.hpp"
#include "meganeura/models/generate.hpp"
#include "meganeura/models/gguf_model.hpp"
#include "meganeura/models/hf.hpp"

namespace meganeura::python {

using namespace nb::literals;
using models::GenerationResult;
using models::Generator;
using models::LanguageModel;

namespace {

// A Generator and the lock that keeps two Python threads from running it at once (the GIL is released
// while it runs, and its sessions and KV cache are not shareable).
struct PyGenerator {
  std::unique_ptr<Generator> gen;
  std::mutex busy;
};

// A loaded model. A Generator takes its LanguageModel by value and the model is move-only (its tokenizer),
// so each generator gets a fresh load from the same source (`reload`: a mapping again, not a copy of the
// weights); this object keeps its own for the tokenizer, config and weight views.
struct PyLanguageModel {
  LanguageModel model;
  std::function<LanguageModel()> reload;
  std::shared_ptr<PyGenerator> default_generator;  // made by the first .generate() call

  std::shared_ptr<PyGenerator> make_generator(const models::GeneratorOptions& o) {
    LanguageModel fresh = reload();
    auto g = std::make_shared<PyGenerator>();
    nb::gil_scoped_release release;  // builds sessions and uploads weights
    g->gen = std::make_unique<Generator>(std::move(fresh), o);
    return g;
  }
};

// A prompt: text (the model's tokenizer, BOS as the model says) or a sequence of token ids.
using Prompt = std::variant<std::string, std::vector<int32_t>>;

int32_t stop_id(const LanguageModel& lm, nb::handle s) {
  if (nb::isinstance<nb::int_>(s)) return nb::cast<int32_t>(s);
  const std::string text = nb::cast<std::string>(s);
  if (!lm.tokenizer)
    throw ConfigError("[generate] expected stop as token ids for a model without a tokenizer, got '" + text +
                      "'");
  if (auto id = lm.tokenizer->token_to_id(text)) return *id;
  const std::vector<int32_t> ids = lm.tokenizer->encode(text, EncodeOptions{false, true});
  if (ids.size() == 1) return ids[0];
  throw ConfigError("[generate] expected each stop string to be one token of " + lm.source + ", got '" +
                    text + "' (" + std::to_string(ids.size()) + " tokens)");
}

models::GenerationOptions options_from(const LanguageModel& lm, int64_t max_tokens, double temperature,
                                       int64_t top_k, double top_p, double min_p, double repetition_penalty,
                                       uint64_t seed, const std::optional<nb::sequence>& stop) {
  models::GenerationOptions o;
  o.max_tokens = max_tokens;
  o.sampling = {temperature, top_k, top_p, min_p, repetition_penalty};
  o.seed = seed;
  if (stop) {
    std::vector<int32_t> ids;
    for (nb::handle s : *stop) ids.push_back(stop_id(lm, s));
    o.stop_ids = std::move(ids);
  }
  return o;
}

// Runs `body` (a generate call) with the GIL released and the generator locked. The callback, when given,
// is called with the GIL held; its exception stops the generation and is raised here afterwards. Pending
// signals (Ctrl-C) are checked after every token, so a long generation can be interrupted.
template <typename Body>
auto run_generation(PyGenerator& g, const std::optional<nb::callable>& on_token, Body body) {
  std::optional<nb::python_error> failed;
  auto callback = [&](size_t sequence, int32_t token, std::string_view piece) -> bool {
    nb::gil_scoped_acquire acquire;
    if (failed) return false;  // stop every sequence once one call failed
    try {
      if (PyErr_CheckSignals() != 0) throw nb::python_error();
      if (!on_token) return true;
      nb::object r = sequence == size_t(-1) ? (*on_token)(token, utf8(piece))
                                            : (*on_token)(sequence, token, utf8(piece));
      if (r.is_none()) return true;  // a callback that returns nothing goes on
      const int truth = PyObject_IsTrue(r.ptr());
      if (truth < 0) throw nb::python_error();
      return truth == 1;
    } catch (nb::python_error& e) {
      failed.emplace(std::move(e));
      return false;
    }
  };
  auto result = [&] {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(g.busy);
    return body(callback);
  }();
  if (failed) throw std::move(*failed);
  return result;
}

GenerationResult generate_one(PyGenerator& g, const Prompt& prompt, const models::GenerationOptions& o,
                              const std::optional<nb::callable>& on_token) {
  return run_generation(g, on_token, [&](const auto& cb) {
    const models::StreamCallback one = [&](int32_t t, std::string_view piece) {
      return cb(size_t(-1), t, piece);
    };
    if (const auto* text = std::get_if<std::string>(&prompt)) return g.gen->generate(*text, o, one);
    return g.gen->generate(std::span<const int32_t>(std::get<std::vector<int32_t>>(prompt)), o, one);
  });
}

// The ids Generator::generate(text) would feed: tokens without the post-processor's, BOS as the model says.
std::vector<int32_t> prompt_ids(const LanguageModel& lm, const Prompt& p) {
  if (const auto* ids = std::get_if<std::vector<int32_t>>(&p)) return *ids;
  if (!lm.tokenizer)
    throw ConfigError("[generate] expected token ids for a model without a tokenizer (" + lm.source +
                      "), got text");
  std::vector<int32_t> ids = lm.tokenizer->encode(std::get<std::string>(p), EncodeOptions{false, true});
  if (lm.add_bos && lm.bos_id >= 0 && (ids.empty() || ids.front() != lm.bos_id))
    ids.insert(ids.begin(), lm.bos_id);
  return ids;
}

nb::dict config_dict(const models::LlamaConfig& c) {
  nb::dict d;
  d["vocab"] = c.vocab;
  d["hidden"] = c.hidden;
  d["layers"] = c.layers;
  d["heads"] = c.heads;
  d["kv_heads"] = c.kv_heads;
  d["intermediate"] = c.intermediate;
  d["rope_theta"] = c.rope_theta;
  d["rms_eps"] = c.rms_eps;
  d["tied_embeddings"] = c.tied_embeddings;
  d["attn_bias"] = c.attn_bias;
  d["max_context"] = c.max_context;
  d["weight_dtype"] = dtype_name(c.weight_dtype);
  return d;
}

#define MN_SAMPLING_ARGS                                                                        \
  "max_tokens"_a = 256, "temperature"_a = 1.0, "top_k"_a = 0, "top_p"_a = 1.0, "min_p"_a = 0.0, \
  "repetition_penalty"_a = 1.0, "seed"_a = 0, "stop"_a = nb::none()

const char* kGenerateDoc =
    "Generates from a prompt (str, encoded with the model's tokenizer and BOS as the model says, or a list "
    "of "
    "token ids). temperature <= 0 is greedy. stop: token ids or single-token strings (default: the model's "
    "end-of-sequence tokens). on_token(token, piece) is called for each generated token with its text (never "
    "half a UTF-8 character); returning False stops. Returns a GenerationResult.";

}  // namespace

void bind_models(nb::module_& m) {
  nb::class_<Tokenizer>(m, "Tokenizer")
      .def_static("load", &Tokenizer::load, "path"_a, "A tokenizer.json file.")
      .def_static(
          "from_json", [](const std::string& text) { return Tokenizer::from_json(text); }, "text"_a)
      .def(
          "encode",
          [](const Tokenizer& t, std::string_view text, bool add_special, bool parse_special) {
            return t.encode(text, EncodeOptions{add_special, parse_special});
          },
          "text"_a, "add_special"_a = true, "parse_special"_a = true)
      .def(
          "decode",
          [](const Tokenizer& t, const std::vector<int32_t>& ids, bool skip_special) {
            return utf8(t.decode(ids, skip_special));
          },
          "ids"_a, "skip_special"_a = false)
      .def_prop_ro("vocab_size", &Tokenizer::vocab_size)
      .def("token_to_id", &Tokenizer::token_to_id, "token"_a)
      .def(
          "id_to_token", [](const Tokenizer& t, int32_t id) { return utf8(t.id_to_token(id)); }, "id"_a)
      .def("is_special", &Tokenizer::is_special, "id"_a)
      .def_prop_ro("bos_id", &Tokenizer::bos_id)
      .def_prop_ro("eos_id", &Tokenizer::eos_id);

  nb::class_<GenerationResult>(m, "GenerationResult")
      .def_ro("prompt", &GenerationResult::prompt)
      .def_ro("tokens", &GenerationResult::tokens)
      .def_prop_ro("text", [](const GenerationResult& r) { return utf8(r.text); })
      .def_prop_ro("finish", [](const GenerationResult& r) { return models::finish_reason_name(r.finish); })
      .def_ro("stop_token", &GenerationResult::stop_token)
      .def_ro("prefill_s", &GenerationResult::prefill_s)
      .def_ro("decode_s", &GenerationResult::decode_s)
      .def_ro("prompt_tokens_per_s", &GenerationResult::prompt_tokens_per_s)
      .def_ro("generation_tokens_per_s", &GenerationResult::generation_tokens_per_s)
      .def_ro("decode_steps", &GenerationResult::decode_steps)
      .def("__str__", [](const GenerationResult& r) { return utf8(r.text); })
      .def("__repr__", [](const GenerationResult& r) {
        return "<meganeura.GenerationResult " + std::to_string(r.tokens.size()) +
               " tokens, finish=" + models::finish_reason_name(r.finish) + ">";
      });

  nb::class_<PyGenerator>(m, "Generator")
      .def(
          "generate",
          [](PyGenerator& g, const Prompt& prompt, int64_t max_tokens, double temperature, int64_t top_k,
             double top_p, double min_p, double repetition_penalty, uint64_t seed,
             std::optional<nb::sequence> stop, std::optional<nb::callable> on_token) {
            const auto o = options_from(g.gen->model(), max_tokens, temperature, top_k, top_p, min_p,
                                        repetition_penalty, seed, stop);
            return generate_one(g, prompt, o, on_token);
          },
          "prompt"_a, nb::kw_only(), MN_SAMPLING_ARGS, "on_token"_a = nb::none(), kGenerateDoc)
      .def(
          "generate_batch",
          [](PyGenerator& g, const std::vector<Prompt>& prompts, int64_t max_tokens, double temperature,
             int64_t top_k, double top_p, double min_p, double repetition_penalty, uint64_t seed,
             std::optional<nb::sequence> stop, std::optional<nb::callable> on_token) {
            const LanguageModel& lm = g.gen->model();
            const auto o = options_from(lm, max_tokens, temperature, top_k, top_p, min_p, repetition_penalty,
                                        seed, stop);
            std::vector<std::vector<int32_t>> ids;
            for (const Prompt& p : prompts) ids.push_back(prompt_ids(lm, p));
            return run_generation(g, on_token,
                                  [&](const auto& cb) { return g.gen->generate_batch(ids, o, cb); });
          },
          "prompts"_a, nb::kw_only(), MN_SAMPLING_ARGS, "on_token"_a = nb::none(),
          "Up to `batch` prompts at once; on_token(sequence, token, piece). Returns one GenerationResult "
          "each.")
      .def_prop_ro("max_context", [](PyGenerator& g) { return g.gen->max_context(); })
      .def_prop_ro("batch", [](PyGenerator& g) { return g.gen->batch(); })
      .def_prop_ro("prefill_buckets", [](PyGenerator& g) { return g.gen->prefill_buckets(); });

  nb::class_<PyLanguageModel>(m, "LanguageModel")
      .def_prop_ro("source", [](const PyLanguageModel& p) { return p.model.source; })
      .def_prop_ro("architecture", [](const PyLanguageModel& p) { return p.model.architecture; })
      .def_prop_ro("config", [](const PyLanguageModel& p) { return config_dict(p.model.config); })
      .def_prop_ro(
          "tokenizer",
          [](PyLanguageModel& p) -> const Tokenizer* {
            return p.model.tokenizer ? &*p.model.tokenizer : nullptr;
          },
          nb::rv_policy::reference_internal, "The embedded tokenizer, or None.")
      .def_prop_ro("bos_id", [](const PyLanguageModel& p) { return p.model.bos_id; })
      .def_prop_ro("add_bos", [](const PyLanguageModel& p) { return p.model.add_bos; })
      .def_prop_ro("eos_ids", [](const PyLanguageModel& p) { return p.model.eos_ids; })
      .def_prop_ro("chat_template", [](const PyLanguageModel& p) { return p.model.chat_template; })
      .def(
          "encode",
          [](const PyLanguageModel& p, const std::string& text) { return prompt_ids(p.model, text); },
          "text"_a, "The token ids generate() feeds for a text prompt (BOS as the model says).")
      .def_prop_ro(
          "weights",
          [](const PyLanguageModel& p) {
            nb::list out;
            for (const auto& w : p.model.weights) {
              nb::dict d;
              d["name"] = w.name;
              d["dtype"] = dtype_name(w.dtype);
              d["shape"] = w.shape;
              d["nbytes"] = w.bytes.size();
              out.append(d);
            }
            return out;
          },
          "Every weight: name, dtype as stored on the device, shape, bytes.")
      .def(
          "weight_bytes",
          [](nb::handle self, const std::string& name) {
            const PyLanguageModel& p = nb::cast<const PyLanguageModel&>(self);
            for (const auto& w : p.model.weights)
              if (w.name == name) {
                const size_t n = w.bytes.size();
                return nb::ndarray<nb::numpy, const uint8_t>(reinterpret_cast<const uint8_t*>(w.bytes.data()),
                                                             {n}, self);
              }
            throw ConfigError("[weight_bytes] expected a weight of " + p.model.source + ", got '" + name +
                              "'");
          },
          "name"_a,
          "A weight's stored bytes as a read-only uint8 array over the loader's memory (the file's mapping: "
          "no copy), kept alive by the model.")
      .def(
          "generator",
          [](PyLanguageModel& p, int64_t max_context, int64_t batch, std::vector<int64_t> prefill_buckets,
             std::optional<SessionConfig> config) {
            models::GeneratorOptions o;
            o.max_context = max_context;
            o.batch = batch;
            o.prefill_buckets = std::move(prefill_buckets);
            o.session = std::move(config);
            return p.make_generator(o);
          },
          "max_context"_a = 0, "batch"_a = 1, "prefill_buckets"_a = std::vector<int64_t>{},
          "config"_a = nb::none(),
          "Decode and prefill sessions over the model's weights (max_context 0: the model's). Each generator "
          "loads the model's source again (mapped, not copied).")
      .def(
          "generate",
          [](PyLanguageModel& p, const Prompt& prompt, int64_t max_tokens, double temperature, int64_t top_k,
             double top_p, double min_p, double repetition_penalty, uint64_t seed,
             std::optional<nb::sequence> stop, std::optional<nb::callable> on_token) {
            if (!p.default_generator) p.default_generator = p.make_generator({});
            const auto o = options_from(p.model, max_tokens, temperature, top_k, top_p, min_p,
                                        repetition_penalty, seed, stop);
            return generate_one(*p.default_generator, prompt, o, on_token);
          },
          "prompt"_a, nb::kw_only(), MN_SAMPLING_ARGS, "on_token"_a = nb::none(),
          "generator().generate(...) on a generator made at the first call and kept (the model's "
          "max_context).");

  m.def(
      "load_gguf",
      [](const std::string& path) {
        PyLanguageModel p;
        p.reload = [path] { return models::load_gguf(path); };
        p.model = p.reload();
        return p;
      },
      "path"_a,
      "A GGUF file (llama / qwen2): config and tokenizer from its metadata, weights as views into its "
      "mapping.");
  m.def(
      "load_hf",
      [](const std::string& source, int64_t max_context, std::optional<std::string> weight_dtype,
         const std::string& revision) {
        models::HfOptions o;
        o.max_context = max_context;
        o.revision = revision;
        if (weight_dtype) o.weight_dtype = parse_dtype(*weight_dtype);
        PyLanguageModel p;
        p.reload = [source, o] { return models::load_hf(source, o); };
        p.model = p.reload();
        return p;
      },
      "source"_a, "max_context"_a = 0, "weight_dtype"_a = nb::none(), "revision"_a = "main",
      "A Hugging Face folder (config.json, *.safetensors, tokenizer files) or hub id ORG/NAME (downloaded "
      "into the Hugging Face cache). weight_dtype 'f16' / 'bf16' / 'f32' converts the weights on load.");
}

}  // namespace meganeura::python
