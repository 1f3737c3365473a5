#include "meganeura/formats/gguf_tokenizer.hpp"

#include <algorithm>
#include <string_view>

#include "meganeura/core/error.hpp"

namespace meganeura::gguf {

namespace {

[[noreturn]] void fail(const File& f, std::string_view key, const std::string& what) {
  throw FormatError("[gguf::tokenizer_data] " + f.origin() + ": key '" + std::string(key) + "': " + what);
}

// An array of numbers with exactly `n` elements (one per token).
const Value& per_token_array(const File& f, std::string_view key, size_t n, bool floats) {
  const Value& v = f.at(key);
  const Value probe =
      v.type == ValueType::Array && v.element != ValueType::String && v.element != ValueType::Array
          ? Value::scalar(v.element, 0)
          : Value{};
  if (v.type != ValueType::Array || v.element == ValueType::String || v.element == ValueType::Array ||
      (floats ? !probe.is_float() : !probe.is_integer()))
    fail(f, key,
         std::string("expected an array of ") + (floats ? "f32/f64" : "integers") + ", got " +
             value_type_name(v.type) +
             (v.type == ValueType::Array ? std::string(" of ") + value_type_name(v.element) : ""));
  if (v.count != n)
    fail(f, key,
         "expected " + std::to_string(n) + " elements (one per token), got " + std::to_string(v.count));
  return v;
}

// A token id key: absent keeps `fallback`; an id outside the vocabulary keeps it too (llama.cpp warns and
// uses its default there); a non-integer is an error.
int32_t token_id(const File& f, std::string_view key, size_t n, int32_t fallback) {
  if (!f.find(key)) return fallback;
  const uint64_t id = f.get_uint(key);
  return id < n ? static_cast<int32_t>(id) : fallback;
}

}  // namespace

std::vector<std::string> tokenizer_models() { return {"gpt2", "llama"}; }

TokenizerData tokenizer_data(const File& f) {
  const std::string& model = f.get_string("tokenizer.ggml.model");
  TokenizerData d;
  if (model == "gpt2") {
    d.model = TokenizerData::Model::Bpe;
  } else if (model == "llama") {
    d.model = TokenizerData::Model::Spm;
  } else {
    std::string names;
    for (const auto& s : tokenizer_models()) names += (names.empty() ? "" : ", ") + s;
    fail(f, "tokenizer.ggml.model", "expected one of " + names + ", got \"" + model + "\"");
  }
  const bool spm = d.model == TokenizerData::Model::Spm;
  d.tokens = f.get_strings("tokenizer.ggml.tokens");
  const size_t n = d.tokens.size();
  if (n == 0) fail(f, "tokenizer.ggml.tokens", "expected at least one token, got none");
  if (n >= size_t(INT32_MAX))
    fail(f, "tokenizer.ggml.tokens", "expected fewer than 2^31 tokens, got " + std::to_string(n));
  if (f.find("tokenizer.ggml.scores")) {
    const Value& s = per_token_array(f, "tokenizer.ggml.scores", n, true);
    d.scores.resize(n);
    for (size_t i = 0; i < n; ++i) d.scores[i] = static_cast<float>(s.double_at(i));
  } else if (spm) {
    fail(f, "tokenizer.ggml.scores",
         "expected one score per token for the llama (SentencePiece) model, got no such key");
  }
  if (f.find("tokenizer.ggml.token_type")) {
    const Value& t = per_token_array(f, "tokenizer.ggml.token_type", n, false);
    d.token_types.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const int64_t v = t.int_at(i);
      if (v < TokenizerData::Normal || v > TokenizerData::Byte)
        fail(f, "tokenizer.ggml.token_type",
             "expected types 1..6, got " + std::to_string(v) + " at " + std::to_string(i));
      d.token_types[i] = static_cast<int32_t>(v);
    }
  }
  if (!spm) {
    d.merges = f.get_strings("tokenizer.ggml.merges");
    // llama.cpp uses its "default" regex set when the key is missing; we implement the named ones only.
    d.pre = f.find("tokenizer.ggml.pre") ? f.get_string("tokenizer.ggml.pre") : std::string("default");
    const auto names = pre_tokenizer_names();
    if (std::find(names.begin(), names.end(), d.pre) == names.end()) {
      std::string list;
      for (const auto& s : names) list += (list.empty() ? "" : ", ") + s;
      fail(f, "tokenizer.ggml.pre", "expected one of " + list + ", got \"" + d.pre + "\"");
    }
  }
  // llama.cpp's defaults: SentencePiece vocabularies have <unk> 0, <s> 1, </s> 2 and add BOS; BPE ones none.
  d.bos_id = token_id(f, "tokenizer.ggml.bos_token_id", n, spm && n > 1 ? 1 : -1);
  d.eos_id = token_id(f, "tokenizer.ggml.eos_token_id", n, spm && n > 2 ? 2 : -1);
  d.unk_id = token_id(f, "tokenizer.ggml.unknown_token_id", n, spm ? 0 : -1);
  d.pad_id = token_id(f, "tokenizer.ggml.padding_token_id", n, -1);
  d.add_bos = f.find("tokenizer.ggml.add_bos_token") ? f.get_bool("tokenizer.ggml.add_bos_token") : spm;
  d.add_eos = f.find("tokenizer.ggml.add_eos_token") ? f.get_bool("tokenizer.ggml.add_eos_token") : false;
  // BPE never prepends a space in llama.cpp, whatever the key says; SentencePiece does unless told not to.
  d.add_space_prefix =
      spm &&
      (f.find("tokenizer.ggml.add_space_prefix") ? f.get_bool("tokenizer.ggml.add_space_prefix") : true);
  if (d.add_bos && d.bos_id < 0)
    fail(f, "tokenizer.ggml.add_bos_token", "expected a bos_token_id with add_bos_token set, got none");
  if (d.add_eos && d.eos_id < 0)
    fail(f, "tokenizer.ggml.add_eos_token", "expected an eos_token_id with add_eos_token set, got none");
  if (f.find("tokenizer.chat_template")) d.chat_template = f.get_string("tokenizer.chat_template");
  return d;
}

std::vector<int32_t> end_of_generation_ids(const File& f, const TokenizerData& d) {
  std::vector<int32_t> ids;
  auto add = [&](int32_t id) {
    if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  add(d.eos_id);
  add(token_id(f, "tokenizer.ggml.eot_token_id", d.tokens.size(), -1));
  add(token_id(f, "tokenizer.ggml.eom_token_id", d.tokens.size(), -1));
  static constexpr std::string_view kEnd[] = {"<|eot_id|>",     "<|im_end|>",    "<|end|>",
                                              "<end_of_turn>",  "<|endoftext|>", "<|eom_id|>",
                                              "<|end_of_text|>"};
  for (size_t i = 0; i < d.tokens.size(); ++i)
    if (std::find(std::begin(kEnd), std::end(kEnd), d.tokens[i]) != std::end(kEnd))
      add(static_cast<int32_t>(i));
  return ids;
}

}  // namespace meganeura::gguf
