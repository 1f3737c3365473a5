// LLM inference with Hugging Face weights: SmolLM2 (or any LlamaForCausalLM) from a hub repository id or a
// local folder, greedy decoding streamed to the terminal.
//
//   smollm2 [MODEL] [-p PROMPT] [-n MAX_TOKENS] [--chat] [--revision R]
//
// MODEL: a folder with config.json, model.safetensors and tokenizer.json, or a hub id (default
// HuggingFaceTB/SmolLM2-135M-Instruct, downloaded into the Hugging Face cache: HF_HOME, HF_TOKEN,
// HF_ENDPOINT, HF_HUB_OFFLINE apply). --chat wraps the prompt in the model's ChatML template. Offline, a
// folder made by scripts/make-hf-smollm2.py (.models/smollm2-hf) serves.
//
// The generator (models/generate.hpp) is not there yet; this drives a prefill session and a decode session
// sharing weights and KV cache directly, as tests/gpu/test_llama_decode.cpp does.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "meganeura/meganeura.hpp"
#include "meganeura/models/hf.hpp"

using namespace meganeura;

int main(int argc, char** argv) {
  std::string source = "HuggingFaceTB/SmolLM2-135M-Instruct", prompt = "Gravity is", revision = "main";
  int max_tokens = 64;
  bool chat = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "smollm2: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-p" || a == "--prompt")
      prompt = value();
    else if (a == "-n" || a == "--max-tokens")
      max_tokens = std::max(1, std::atoi(value().c_str()));
    else if (a == "--revision")
      revision = value();
    else if (a == "--chat")
      chat = true;
    else if (a == "-h" || a == "--help") {
      std::printf("usage: smollm2 [MODEL] [-p PROMPT] [-n MAX_TOKENS] [--chat] [--revision R]\n");
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "smollm2: unknown option %s\n", a.c_str());
      return 2;
    } else {
      source = a;
    }
  }
  try {
    SessionConfig cfg = SessionConfig::from_env();
    cfg.training = false;
    cfg.optimizer.kind = OptimizerKind::None;
    models::HfOptions options;
    options.revision = revision;
    options.hub = cfg.hub;
    const models::LanguageModel m = models::load_hf(source, options);
    if (!m.tokenizer) throw FormatError("[smollm2] expected tokenizer.json in " + m.source + ", got none");
    const Tokenizer& tok = *m.tokenizer;

    if (chat) {
      if (m.chat_template.find("<|im_start|>") == std::string::npos)
        throw ConfigError("[smollm2] --chat expected a ChatML chat template, got " +
                          (m.chat_template.empty() ? std::string("none") : "another template"));
      const std::vector<ChatMessage> messages = {{"user", prompt}};
      // SmolLM2's template adds its default system message when the conversation has none.
      const bool default_system =
          m.chat_template.find(std::string(kSmolLM2DefaultSystem)) != std::string::npos;
      prompt = apply_chatml(messages, true, default_system ? kSmolLM2DefaultSystem : std::string_view{});
    }
    std::vector<int32_t> ids = tok.encode(prompt);
    if (m.add_bos && (ids.empty() || ids.front() != m.bos_id)) ids.insert(ids.begin(), m.bos_id);
    const int64_t P = int64_t(ids.size());
    if (P == 0) throw ConfigError("[smollm2] expected a prompt of at least one token, got none");
    if (P + max_tokens > m.config.max_context)
      throw ConfigError("[smollm2] expected prompt + max tokens <= " + std::to_string(m.config.max_context) +
                        ", got " + std::to_string(P + max_tokens));

    const auto t0 = std::chrono::steady_clock::now();
    const int64_t bucket = std::min<int64_t>((P + 15) / 16 * 16, m.config.max_context);
    Session prefill = build(models::build_llama(m.config, 1, bucket).graph, cfg);
    Session decode = build(models::build_llama(m.config, 1, 1).graph, cfg, prefill);
    for (const auto& w : m.weights) prefill.set_parameter_bytes(w.name, w.bytes);
    const auto t1 = std::chrono::steady_clock::now();

    std::vector<int32_t> padded(size_t(bucket), 0);
    std::copy(ids.begin(), ids.end(), padded.begin());
    prefill.set_input("tokens", padded);
    prefill.set_input("start", std::vector<int32_t>{0});
    prefill.set_input("last", std::vector<int32_t>{int32_t(P - 1)});
    prefill.run();
    std::vector<float> logits = prefill.read_output("logits");
    const auto t2 = std::chrono::steady_clock::now();

    std::printf("%s", prompt.c_str());
    std::fflush(stdout);
    std::vector<int32_t> out;
    std::string shown;
    for (int k = 0; k < max_tokens; ++k) {
      const int32_t t = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
      if (std::find(m.eos_ids.begin(), m.eos_ids.end(), t) != m.eos_ids.end()) break;
      out.push_back(t);
      // Decoding the whole answer each time keeps multi-byte characters split across tokens whole.
      const std::string text = tok.decode(out, true);
      if (text.size() > shown.size() && text.compare(0, shown.size(), shown) == 0) {
        std::printf("%s", text.c_str() + shown.size());
        std::fflush(stdout);
        shown = text;
      }
      if (k + 1 == max_tokens) break;
      decode.set_input("tokens", std::vector<int32_t>{t});
      decode.set_input("start", std::vector<int32_t>{int32_t(P + k)});
      decode.set_input("last", std::vector<int32_t>{0});
      decode.run();
      logits = decode.read_output("logits");
    }
    const auto t3 = std::chrono::steady_clock::now();
    const auto s = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
    std::printf("\n\n[%s: load+build %.2f s, prefill %lld tokens %.1f ms, %zu tokens at %.3g tokens/s]\n",
                m.source.c_str(), s(t0, t1), static_cast<long long>(P), 1e3 * s(t1, t2), out.size(),
                out.size() > 1 ? double(out.size() - 1) / s(t2, t3) : 0.0);
  } catch (const Error& e) {
    std::fprintf(stderr, "smollm2: %s\n", e.what());
    return 1;
  }
  return 0;
}
