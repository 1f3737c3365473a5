// Tokenizers: any byte string as tokenizer.json either loads or throws a meganeura::Error; and a fixed small
// byte-level BPE, a SentencePiece-style tokenizer and (when the input loaded) the input's tokenizer encode
// the same bytes as text (any bytes, invalid UTF-8 included) and decode the ids back without crashing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "meganeura/core/error.hpp"
#include "meganeura/tokenizer/tokenizer.hpp"

using namespace meganeura;

namespace {

const Tokenizer& fixed_bpe() {
  static const Tokenizer t = Tokenizer::from_json(R"({
    "added_tokens": [{"id": 6, "content": "<|im_start|>", "special": true, "normalized": false},
                     {"id": 7, "content": " x", "normalized": true, "lstrip": true, "rstrip": true, "single_word": true}],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "_"}]},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": true},
        {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
        {"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}]},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "byte_fallback": true, "unk_token": "a", "fuse_unk": true,
              "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120a": 4, "<0x41>": 5},
              "merges": [["a", "b"], ["\u0120", "a"]]}})",
                                                  "fuzz fixed");
  return t;
}

const Tokenizer& fixed_spm() {
  static const Tokenizer t = [] {
    TokenizerData d;
    d.model = TokenizerData::Model::Spm;
    d.tokens = {"<unk>",
                "<s>",
                "</s>",
                "\xE2\x96\x81",
                "a",
                "b",
                "\xE2\x96\x81"
                "a",
                "ab",
                "<0x41>"};
    d.scores = {0, 0, 0, -1, -2, -3, -4, -5, 0};
    d.token_types = {2, 3, 3, 1, 1, 1, 1, 1, 6};
    d.unk_id = 0, d.bos_id = 1, d.eos_id = 2, d.add_bos = true;
    return Tokenizer::from_data(d);
  }();
  return t;
}

void round_trip(const Tokenizer& t, std::string_view text) {
  const auto ids = t.encode(text);
  (void)t.decode(ids);
  (void)t.decode(ids, true);
  std::vector<int32_t> raw;
  for (size_t i = 0; i + 1 < text.size() && raw.size() < 64; i += 2)
    raw.push_back(static_cast<int32_t>(static_cast<unsigned char>(text[i]) | (text[i + 1] << 8)) - 100);
  (void)t.decode(raw);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    // text past 256 bytes reaches no new code, only slows every execution down
    round_trip(fixed_bpe(), bytes.substr(0, 256));
    round_trip(fixed_spm(), bytes.substr(0, 256));
  } catch (const meganeura::Error&) {
  }
  try {
    const Tokenizer t = Tokenizer::from_json(bytes, "fuzz");
    round_trip(t, bytes.substr(0, 256));
  } catch (const meganeura::Error&) {
  }
  return 0;
}
