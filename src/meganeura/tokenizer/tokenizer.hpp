#pragma once
// Tokenizers as data: one byte-level BPE engine (Hugging Face `tokenizers` semantics, from tokenizer.json or
// from GGUF's `gpt2` arrays) and one SentencePiece-style engine (llama.cpp's `llama` vocabulary: scores,
// bigram merges by score, byte fallback). Both share the added/special-token matching and the decoders.
//
// Supported tokenizer.json components (anything else is a DataError naming it):
//   normalizer     null, Sequence, Prepend, Replace (string patterns)
//   pre_tokenizer  null, Sequence, ByteLevel (with or without its regex), Digits, Split (Isolated, not
//                  inverted) with the GPT-2, Llama-3 or Qwen2 pattern
//   model          BPE (merges by rank, byte_fallback, unk/fuse_unk, ignore_merges; no dropout, no
//                  continuing_subword_prefix / end_of_word_suffix)
//   post_processor null, ByteLevel, TemplateProcessing (single sequences), Sequence of these
//   decoder        null, ByteLevel, Replace, ByteFallback, Fuse, Strip, Sequence
// Text that is not valid UTF-8 is accepted: a byte that starts no well-formed sequence is a character of its
// own with no Unicode category, kept as that byte (so byte-level models encode it and decode it back).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace meganeura {

// A tokenizer as plain arrays, the way GGUF metadata carries it (tokenizer.ggml.*).
struct TokenizerData {
  enum class Model { Bpe, Spm };  // GGUF "gpt2" (byte-level BPE) / "llama" (SentencePiece-style)
  // GGUF's token types.
  enum TokenType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

  Model model = Model::Bpe;
  std::vector<std::string> tokens;   // id -> text (byte-level alphabet for Bpe, "▁" for spaces for Spm)
  std::vector<float> scores;         // Spm: one per token (higher merges first); Bpe: ignored
  std::vector<int32_t> token_types;  // one per token, or empty (all Normal)
  std::vector<std::string> merges;   // Bpe: "left right", by rank
  std::string pre = "gpt-2";         // Bpe: tokenizer.ggml.pre (see pre_tokenizer_names())
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = true;  // Spm: a "▁" before the text (and after each special token)
  std::string chat_template;     // kept for callers; the tokenizer does not interpret it
};

struct EncodeOptions {
  bool add_special = true;    // the post-processor's tokens (BOS/EOS)
  bool parse_special = true;  // special tokens written in the text become their ids
};

struct ChatMessage {
  std::string role;
  std::string content;
};

class Tokenizer {
 public:
  // tokenizer.json as Hugging Face `tokenizers` writes it; `source` names it in errors.
  static Tokenizer from_json(std::string_view json_text, const std::string& source = "tokenizer.json");
  static Tokenizer load(const std::string& path);
  static Tokenizer from_data(const TokenizerData& data);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  size_t vocab_size() const;  // largest id + 1
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string id_to_token(int32_t id) const;  // empty for an unknown id
  bool is_special(int32_t id) const;
  int32_t bos_id() const;  // -1 when the tokenizer does not say
  int32_t eos_id() const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The names TokenizerData::pre accepts for Bpe.
std::vector<std::string> pre_tokenizer_names();

// ChatML as the SmolLM2 instruct models' template writes it: "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per
// message, with `default_system` as a first system message when the conversation has none (SmolLM2's
// template does this), and "<|im_start|>assistant\n" at the end when add_generation_prompt.
std::string apply_chatml(std::span<const ChatMessage> messages, bool add_generation_prompt,
                         std::string_view default_system = {});
// SmolLM2-Instruct's default system message.
inline constexpr std::string_view kSmolLM2DefaultSystem =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

}  // namespace meganeura
