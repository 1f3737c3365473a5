// Tokenizer behaviour that needs no oracle process: clear errors for what is not supported or malformed, text
// that is not UTF-8, and the Unicode table against facts of the standard.
#include <gtest/gtest.h>

#include <string>

#include "meganeura/core/error.hpp"
#include "meganeura/tokenizer/tokenizer.hpp"
#include "meganeura/tokenizer/unicode.hpp"

using namespace meganeura;

namespace {

// A byte-level BPE with the GPT-2 split: every byte has a token ("a"/"b" merge to "ab").
std::string tiny_json(
    const std::string& normalizer = "null",
    const std::string& pre = R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})") {
  std::string vocab;
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    // GPT-2's byte alphabet: printable Latin-1 bytes stand for themselves, the rest for U+0100 onwards
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const int cp = printable ? b : next++;
    char buf[16];
    std::snprintf(buf, sizeof buf, "\\u%04x", cp);
    vocab += std::string(vocab.empty() ? "" : ", ") + "\"" + buf + "\": " + std::to_string(b);
  }
  return R"({"normalizer": )" + normalizer + R"(, "pre_tokenizer": )" + pre +
         R"(, "decoder": {"type": "ByteLevel"}, "added_tokens": [{"id": 257, "content": "<s>", "special": true}],
            "model": {"type": "BPE", "vocab": {)" +
         vocab + R"(, "ab": 256}, "merges": [["a", "b"]]}})";
}

std::string error_of(const std::string& json) {
  try {
    Tokenizer::from_json(json, "test.json");
  } catch (const DataError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(Tokenizer, TinyByteLevelBpeEncodesAndDecodes) {
  const Tokenizer t = Tokenizer::from_json(tiny_json());
  EXPECT_EQ(t.encode("abab"), (std::vector<int32_t>{256, 256}));
  EXPECT_EQ(t.encode("a<s>b"), (std::vector<int32_t>{'a', 257, 'b'}));
  EXPECT_EQ(t.encode("a<s>b", {.parse_special = false}), (std::vector<int32_t>{'a', '<', 's', '>', 'b'}));
  EXPECT_EQ(t.decode(std::vector<int32_t>{256, 257, ' ', 'x'}), "ab<s> x");
  EXPECT_EQ(t.decode(std::vector<int32_t>{256, 257, 'x'}, true), "abx");
  EXPECT_TRUE(t.is_special(257));
  EXPECT_EQ(t.token_to_id("ab"), 256);
  EXPECT_EQ(t.vocab_size(), 258u);
}

// Bytes that are not UTF-8 are characters of their own: byte-level BPE keeps them, and decoding gives them
// back through the lossy UTF-8 conversion (one U+FFFD per maximal ill-formed subpart).
TEST(Tokenizer, InvalidUtf8IsEncodedByteForByte) {
  const Tokenizer t = Tokenizer::from_json(tiny_json());
  const std::string bad = "a\xC3(\xFF\xE2\x82 b\xF0\x9F\x98";
  const auto ids = t.encode(bad);
  ASSERT_EQ(ids.size(), bad.size());
  for (size_t i = 0; i < bad.size(); ++i) EXPECT_EQ(ids[i], static_cast<unsigned char>(bad[i]));
  EXPECT_EQ(t.decode(ids), "a\xEF\xBF\xBD(\xEF\xBF\xBD\xEF\xBF\xBD b\xEF\xBF\xBD");
  EXPECT_EQ(tok::utf8_lossy("\xED\xA0\x80"),
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate: 3 subparts
  EXPECT_EQ(tok::utf8_lossy("\xF4\x90\x80\x80"),
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // above U+10FFFF
  EXPECT_EQ(tok::utf8_lossy("\xF0\x9F\x98x"), "\xEF\xBF\xBDx");   // a truncated sequence is one subpart
}

TEST(Tokenizer, UnsupportedComponentsAreClearErrors) {
  EXPECT_NE(error_of(tiny_json(R"({"type": "NFC"})"))
                .find("normalizer: expected a normalizer of type Sequence, Prepend or Replace, got \"NFC\""),
            std::string::npos)
      << error_of(tiny_json(R"({"type": "NFC"})"));
  const std::string split =
      R"({"type": "Split", "pattern": {"Regex": "\\w+"}, "behavior": "Isolated", "invert": false})";
  EXPECT_NE(error_of(tiny_json("null", split)).find("expected the GPT-2, Llama-3 or Qwen2 split regex"),
            std::string::npos);
  EXPECT_NE(error_of(tiny_json("null", R"({"type": "Whitespace"})")).find("got \"Whitespace\""),
            std::string::npos);
  EXPECT_NE(error_of("{\"model\": 3").find("test.json: document: expected JSON"), std::string::npos);
  EXPECT_NE(error_of(R"({"model": {"type": "WordPiece", "vocab": {}}})").find("model.type: expected \"BPE\""),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model": {"vocab": {"a": 0}, "merges": [["a", "b"]]}})")
                .find("model.merges[0]: expected a token of the vocabulary, got \"b\""),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model": {"vocab": {"a": 0}, "merges": [["a", "a"]]}})").find("merged token \"aa\""),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model": {"vocab": {"a": 40000000}, "merges": []}})")
                .find("expected an id in [0, 4194304)"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model": {"vocab": {"a": 4000000}, "merges": []}})").find("expected dense ids"),
            std::string::npos);
}

TEST(Tokenizer, BadTokenizerDataIsAClearError) {
  TokenizerData d;
  d.tokens = {"a", "b"};
  d.pre = "falcon";
  try {
    Tokenizer::from_data(d);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("pre: expected one of gpt-2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("got \"falcon\""), std::string::npos) << e.what();
  }
  d.pre = "gpt-2";
  d.model = TokenizerData::Model::Spm;
  EXPECT_THROW(Tokenizer::from_data(d), DataError);  // no scores
  d.scores = {0, 0};
  d.token_types = {1};
  EXPECT_THROW(Tokenizer::from_data(d), DataError);  // one type for two tokens
  d.token_types = {1, 1};
  d.bos_id = 5;
  EXPECT_THROW(Tokenizer::from_data(d), DataError);
}

// An SPM vocabulary with no byte tokens and no unknown token cannot spell "c".
TEST(Tokenizer, SentencePieceWithoutByteOrUnknownTokenSaysWhichByte) {
  TokenizerData d;
  d.model = TokenizerData::Model::Spm;
  d.tokens = {"\xE2\x96\x81", "a"};
  d.scores = {0, 0};
  const Tokenizer t = Tokenizer::from_data(d);
  EXPECT_EQ(t.encode("a"), (std::vector<int32_t>{0, 1}));
  try {
    t.encode("c");
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("<0x63>"), std::string::npos) << e.what();
  }
}

// Facts of Unicode 14 (the table's version), including the classes the split patterns depend on.
TEST(Tokenizer, UnicodeTableClasses) {
  EXPECT_STREQ(tok::kUnicodeVersion, "14.0.0");
  EXPECT_EQ(tok::category_flags(0x00E9), tok::kLetter);                // é
  EXPECT_EQ(tok::category_flags(0x0663), tok::kNumber | tok::kDigit);  // ARABIC-INDIC DIGIT THREE
  EXPECT_EQ(tok::category_flags(0x00BD), tok::kNumber);                // ½ (No)
  EXPECT_EQ(tok::category_flags(0x216B), tok::kNumber);                // Ⅻ (Nl)
  EXPECT_EQ(tok::category_flags(0x3000), tok::kSpace);                 // IDEOGRAPHIC SPACE (Zs)
  EXPECT_EQ(tok::category_flags(0x0085), tok::kSpace);                 // NEXT LINE
  EXPECT_EQ(tok::category_flags(0x2028), tok::kSpace);                 // LINE SEPARATOR (Zl)
  EXPECT_EQ(tok::category_flags(0x200B), 0);                           // ZERO WIDTH SPACE is Cf
  EXPECT_EQ(tok::category_flags(0x0301), tok::kMark);                  // COMBINING ACUTE
  EXPECT_EQ(tok::category_flags(0x4E00), tok::kLetter);                // 一
  EXPECT_EQ(tok::category_flags(0x1F600), 0);                          // 😀 is So
  EXPECT_EQ(tok::category_flags(0x1D400), tok::kLetter);               // 𝐀
  EXPECT_EQ(tok::category_flags(0x0378), 0);                           // unassigned
  EXPECT_EQ(tok::category_flags(0x10FFFF), 0);
}

TEST(Tokenizer, ChatMLWithoutDefaultSystem) {
  const std::vector<ChatMessage> m = {{"user", "hi"}};
  EXPECT_EQ(apply_chatml(m, true), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}
