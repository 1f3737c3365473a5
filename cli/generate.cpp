#include "generate.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "flags.hpp"
#include "meganeura/ir/storage.hpp"
#include "meganeura/models/generate.hpp"
#include "meganeura/models/gguf_model.hpp"
#include "meganeura/models/hf.hpp"

namespace meganeura::cli {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::string model, hf, revision = "main", prompt;
  int64_t max_tokens = 128, max_context = 0, top_k = 0;
  double temperature = 0.0, top_p = 1.0, min_p = 0.0, repeat_penalty = 1.0;
  uint64_t seed = 0;
  bool chat = false, json = false;
  Precision precision = Precision::F32;
};

bool is_gguf_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char magic[4] = {};
  return f.read(magic, 4) && std::string(magic, 4) == "GGUF";
}

// --precision f16 / bf16: every f32 weight (and a 16-bit weight of the other kind) is stored in the chosen
// dtype; block-quantized weights stay as they are. The KV cache follows f16 (the cache reads f16 rows).
void store_weights_in(models::LanguageModel& m, DType to) {
  struct Converted {
    std::shared_ptr<const void> original;
    std::vector<std::vector<std::byte>> buffers;
  };
  auto held = std::make_shared<Converted>();
  held->original = m.storage;
  held->buffers.reserve(m.weights.size());
  for (models::WeightView& w : m.weights) {
    if (is_quantized(w.dtype) || w.dtype == to) continue;
    const size_t count = size_t(numel(w.shape));
    const std::vector<float> values = from_storage(w.bytes.data(), count, w.dtype);
    held->buffers.push_back(to_storage(values, to));
    w.bytes = held->buffers.back();
    w.dtype = to;
  }
  models::LlamaConfig& c = m.config;
  c.weight_dtype = m.weights.front().dtype;  // the token embedding, as the loaders set it
  c.tensor_dtypes.clear();
  for (const models::WeightView& w : m.weights)
    if (w.dtype != c.weight_dtype) c.tensor_dtypes[w.name] = w.dtype;
  if (to == DType::F16) c.cache_dtype = DType::F16;
  m.storage = held;
}

models::LanguageModel load(const Options& o, const std::string& program) {
  models::HfOptions hf;
  hf.revision = o.revision;
  hf.max_context = o.max_context;
  if (!o.hf.empty()) return models::load_hf(o.hf, hf);
  std::error_code ec;
  if (fs::is_regular_file(o.model, ec)) {
    if (!is_gguf_file(o.model))
      throw UsageError("[" + program +
                       "] expected MODEL to be a .gguf file or a Hugging Face model folder, got '" + o.model +
                       "' (not a GGUF file)");
    return models::load_gguf(o.model);  // --max-context applies through GeneratorOptions
  }
  if (fs::is_directory(o.model, ec)) return models::load_hf(o.model, hf);
  // Neither a file nor a folder: a hub id (ORG/NAME), as with --hf.
  if (o.model.find('/') != std::string::npos && o.model.find("..") == std::string::npos &&
      o.model.front() != '/' && o.model.front() != '.')
    return models::load_hf(o.model, hf);
  throw UsageError("[" + program +
                   "] expected MODEL to be a .gguf file, a Hugging Face model folder or ORG/NAME, got '" +
                   o.model + "' (no such file)");
}

std::string chat_prompt(const models::LanguageModel& m, const std::string& prompt,
                        const std::string& program) {
  if (m.chat_template.find("<|im_start|>") == std::string::npos)
    throw ConfigError(
        "[" + program + "] --chat expected the model's chat template to be ChatML (<|im_start|>), got " +
        (m.chat_template.empty() ? std::string("no template") : std::string("another template")));
  const std::vector<ChatMessage> messages = {{"user", prompt}};
  // SmolLM2's template adds its default system message when the conversation has none.
  const bool default_system = m.chat_template.find(std::string(kSmolLM2DefaultSystem)) != std::string::npos;
  return apply_chatml(messages, true, default_system ? kSmolLM2DefaultSystem : std::string_view{});
}

int generate(const Options& o, const std::string& program) {
  const auto t0 = std::chrono::steady_clock::now();
  models::LanguageModel m = load(o, program);
  if (!m.tokenizer) throw FormatError("[" + program + "] expected a tokenizer in " + m.source + ", got none");
  if (o.precision == Precision::F16) store_weights_in(m, DType::F16);
  if (o.precision == Precision::BF16) store_weights_in(m, DType::BF16);
  const std::string prompt = o.chat ? chat_prompt(m, o.prompt, program) : o.prompt;

  models::GeneratorOptions go;
  go.max_context = o.max_context;
  SessionConfig cfg = SessionConfig::from_env();
  cfg.precision = o.precision;
  go.session = cfg;
  const std::string source = m.source, architecture = m.architecture;
  models::Generator gen(std::move(m), go);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  models::GenerationOptions opt;
  opt.max_tokens = o.max_tokens;
  opt.seed = o.seed;
  opt.sampling = {o.temperature, o.top_k, o.top_p, o.min_p, o.repeat_penalty};
  if (!o.json && !o.chat) {  // the text continues the prompt: show both
    std::fputs(prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  const models::GenerationResult r = gen.generate(prompt, opt, [&](int32_t, std::string_view piece) {
    if (!o.json) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    return true;
  });
  if (o.json) {
    json_line(nlohmann::json{{"model", source},
                             {"architecture", architecture},
                             {"precision", precision_name(o.precision)},
                             {"prompt", prompt},
                             {"prompt_ids", r.prompt},
                             {"text", r.text},
                             {"tokens", r.tokens},
                             {"finish", models::finish_reason_name(r.finish)},
                             {"load_s", load_s},
                             {"prefill_s", r.prefill_s},
                             {"decode_s", r.decode_s},
                             {"prompt_tokens_per_s", r.prompt_tokens_per_s},
                             {"generation_tokens_per_s", r.generation_tokens_per_s}}
                  .dump());
    return 0;
  }
  std::fputs("\n", stdout);
  std::fflush(stdout);
  std::fprintf(
      stderr,
      "\n[%s: load+build %.2f s; prompt %zu tokens, %.1f tokens/s; generation %zu tokens, %.1f tokens/s; "
      "finish: %s]\n",
      source.c_str(), load_s, r.prompt.size(), r.prompt_tokens_per_s, r.tokens.size(),
      r.generation_tokens_per_s, models::finish_reason_name(r.finish));
  return 0;
}

}  // namespace

int generate_main(int argc, char** argv, const GenerateDefaults& defaults) {
  Options o;
  o.prompt = defaults.prompt;
  const std::string program = argv[0];
  Flags f(
      program,
      "Generates text from a language model: a .gguf file (the architecture, weights and tokenizer it "
      "holds),\n"
      "a Hugging Face folder (config.json, *.safetensors, tokenizer.json), or a hub repository (--hf, into\n"
      "the Hugging Face cache). The text streams to stdout as it is generated; prompt and generation\n"
      "tokens/s follow on stderr.");
  f.positional("MODEL", o.model,
               defaults.model.empty() ? "a .gguf file, a Hugging Face model folder, or ORG/NAME"
                                      : "a .gguf file, a Hugging Face model folder, or ORG/NAME (default " +
                                            defaults.model + ")",
               /*required=*/false);
  f.option("--hf", o.hf, "a Hugging Face hub repository instead of MODEL", "ORG/NAME");
  f.option("--revision", o.revision, "hub branch, tag or commit (--hf)", "R");
  f.option("--prompt", o.prompt, "the prompt");
  f.alias("-p", "--prompt");
  f.option("--max-tokens", o.max_tokens, "tokens to generate at most");
  f.alias("-n", "--max-tokens");
  f.flag("--chat", o.chat, "wrap the prompt in the model's chat template (ChatML) as a user message");
  f.option("--temperature", o.temperature, "sampling temperature (0: greedy)");
  f.option("--top-k", o.top_k, "keep the k most likely tokens (0: off)");
  f.option("--top-p", o.top_p, "nucleus sampling mass (1: off)");
  f.option("--min-p", o.min_p, "drop tokens below min-p times the top probability (0: off)");
  f.option("--repeat-penalty", o.repeat_penalty, "penalty on tokens already seen (1: off)");
  f.option("--seed", o.seed, "sampling seed (same seed, prompt and options: the same text)");
  f.option("--max-context", o.max_context, "KV-cache positions (0: the model's, capped at 4096 for HF)");
  f.precision(o.precision);
  f.flag("--json", o.json,
         "one JSON object on stdout at the end (prompt, prompt_ids, text, tokens, finish, timings); no "
         "streaming");
  f.epilog(
      "examples:\n"
      "  meganeura generate smollm2-135m-instruct-q4_1.gguf -p \"Gravity is\" -n 64\n"
      "  meganeura generate --hf HuggingFaceTB/SmolLM2-135M-Instruct --chat -p \"What is gravity?\"\n"
      "HF_HOME, HF_TOKEN, HF_ENDPOINT and HF_HUB_OFFLINE apply to hub downloads.");
  return run(f, argc, argv, [&] {
    auto need = [&](bool ok, const std::string& what) {
      if (!ok) throw UsageError("[" + program + "] expected " + what);
    };
    if (o.model.empty() && o.hf.empty()) o.model = defaults.model;
    need(!o.model.empty() || !o.hf.empty(), "MODEL or --hf ORG/NAME, got neither");
    need(o.model.empty() || o.hf.empty(), "MODEL or --hf, got both");
    need(!o.prompt.empty(), "a prompt (-p TEXT), got none");
    need(o.max_tokens >= 1, "--max-tokens >= 1, got " + std::to_string(o.max_tokens));
    need(o.max_context >= 0, "--max-context >= 0, got " + std::to_string(o.max_context));
    need(o.temperature >= 0, "--temperature >= 0, got " + std::to_string(o.temperature));
    need(o.top_k >= 0, "--top-k >= 0, got " + std::to_string(o.top_k));
    need(o.top_p > 0 && o.top_p <= 1, "--top-p in (0, 1], got " + std::to_string(o.top_p));
    need(o.min_p >= 0 && o.min_p < 1, "--min-p in [0, 1), got " + std::to_string(o.min_p));
    need(o.repeat_penalty > 0, "--repeat-penalty > 0, got " + std::to_string(o.repeat_penalty));
    return generate(o, program);
  });
}

}  // namespace meganeura::cli
