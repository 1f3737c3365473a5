#pragma once
// Private to tokenizer/: the configuration both engines share and the pieces of the encode pipeline.
#include <array>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "meganeura/tokenizer/tokenizer.hpp"

namespace meganeura::tok {

// Heterogeneous lookup: find(string_view) without building a std::string.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// The split patterns, each a hand-written scanner equal to the regex it is named for (see pretokenize.cpp).
enum class SplitPattern { Gpt2, Llama3, Qwen2 };

struct NormStep {
  enum Kind { Prepend, Replace } kind;
  std::string a, b;  // Prepend: a; Replace: a -> b
  explicit NormStep(Kind k, std::string a_ = {}, std::string b_ = {})
      : kind(k), a(std::move(a_)), b(std::move(b_)) {}
};

struct PreStep {
  enum Kind { ByteLevel, Split, Digits } kind;
  explicit PreStep(Kind k) : kind(k) {}
  SplitPattern pattern = SplitPattern::Gpt2;  // Split
  bool add_prefix_space = false;              // ByteLevel
  bool use_regex = true;                      // ByteLevel
  bool individual = false;                    // Digits
};

struct DecStep {
  enum Kind { ByteLevel, Replace, ByteFallback, Fuse, Strip } kind;
  std::string a, b;            // Replace a -> b; Strip: a is the character
  size_t start = 0, stop = 0;  // Strip
  explicit DecStep(Kind k, std::string a_ = {}, std::string b_ = {})
      : kind(k), a(std::move(a_)), b(std::move(b_)) {}
};

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false, normalized = false, lstrip = false, rstrip = false, single_word = false;
};

// Leftmost-longest matching of a set of strings (what aho-corasick's LeftmostLongest gives), by a byte trie.
class Matcher {
 public:
  void build(const std::vector<std::string>& patterns);  // pattern index = position in the vector
  bool empty() const { return nodes_.size() <= 1; }
  // The longest pattern that starts exactly at `pos`: its index, or -1; len gets its length.
  int longest_at(std::string_view text, size_t pos, size_t& len) const;
  bool may_start(unsigned char c) const { return first_[c]; }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> next;  // sorted by byte
    int32_t pattern = -1;
  };
  std::vector<Node> nodes_;
  std::array<bool, 256> first_{};
};

// GPT-2's byte-level alphabet: each byte as its stand-in character; and back (false when a character of the
// token is outside the alphabet; out is then unchanged).
std::string byte_level_encode(std::string_view bytes);
bool byte_level_decode(std::string_view token, std::string& out);

}  // namespace meganeura::tok

namespace meganeura {

struct Tokenizer::Impl {
  enum class Kind { Bpe, Spm } kind = Kind::Bpe;
  std::string source;  // names the tokenizer in errors

  std::vector<std::string> vocab;  // id -> model token text (empty where no token has the id)
  tok::TokenMap token_to_id;       // model vocabulary

  // BPE
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;  // (left << 32 | right) -> (rank, new id)
  bool byte_fallback = false, fuse_unk = false, ignore_merges = false;
  int32_t unk_id = -1;
  // SPM
  std::vector<float> scores;
  bool add_space_prefix = false;
  std::array<int32_t, 256> byte_tokens{};  // "<0xXX>" ids, -1 where missing

  std::vector<tok::AddedToken> added;  // by position; id -> entry through added_by_id
  std::unordered_map<int32_t, size_t> added_by_id;
  tok::TokenMap added_to_id;
  // Matchers over the non-normalized ([0]) and normalized ([1]) added tokens, each with all of them (.all)
  // and without the special ones (.plain, for encoding with parse_special off).
  struct MatchSet {
    tok::Matcher matcher;
    std::vector<size_t> index;  // matcher pattern -> position in `added`
  };
  struct MatchPair {
    MatchSet all, plain;
  };
  std::array<MatchPair, 2> matchers;

  std::vector<tok::NormStep> normalizer;
  std::vector<tok::PreStep> pre;
  bool byte_level = false;  // words are mapped to the byte-level alphabet before the model sees them
  std::vector<tok::DecStep> decoder;
  bool has_decoder = false;
  std::vector<int32_t> prefix_ids, suffix_ids;  // post-processor
  int32_t bos = -1, eos = -1;

  // Word cache of the BPE model (raw word -> ids), shared by const encode() calls.
  mutable std::mutex cache_mutex;
  mutable tok::TokenMap cache_index;                                 // word -> entry
  mutable std::vector<std::pair<uint32_t, uint32_t>> cache_entries;  // (offset, length) into cache_ids
  mutable std::vector<int32_t> cache_ids;

  // Finalises the added-token tables once `added` and `normalizer` are set; checks ids.
  void build_added();
  std::string normalize(std::string_view s) const;
  // Working space of pre_tokenize, reused across calls so that splitting allocates nothing in the steady
  // state.
  struct PreScratch {
    std::vector<std::string_view> words, next;
    std::deque<std::string> owned;  // pieces given a prefix space
  };
  // Splits a normalized piece into words (views into the piece or into scratch.owned), left in scratch.words.
  // The words are raw bytes: the byte-level mapping, always the last pre-tokenizer step, is bpe_word's.
  void pre_tokenize(std::string_view piece, PreScratch& scratch) const;
  void bpe_word(std::string_view raw_word, std::vector<int32_t>& out) const;
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  void spm_text(std::string_view text, std::vector<int32_t>& out) const;
  int32_t spm_byte(unsigned char b) const;
  std::string token_text(int32_t id) const;  // added first, then the model's
};

}  // namespace meganeura
