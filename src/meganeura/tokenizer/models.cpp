// The two models: byte-level BPE by merge rank (Hugging Face `tokenizers`' BPE::merge_word / Word::merge_all)
// and SentencePiece-style bigram merging by score (llama.cpp's llm_tokenizer_spm).
#include <algorithm>
#include <cstdio>
#include <queue>
#include <string>

#include "meganeura/core/error.hpp"
#include "meganeura/tokenizer/tokenizer_impl.hpp"
#include "meganeura/tokenizer/unicode.hpp"

namespace meganeura {
namespace tok {

void Matcher::build(const std::vector<std::string>& patterns) {
  nodes_.assign(1, Node{});
  first_.fill(false);
  for (size_t p = 0; p < patterns.size(); ++p) {
    const std::string& s = patterns[p];
    if (s.empty()) continue;
    first_[static_cast<unsigned char>(s[0])] = true;
    int32_t node = 0;
    for (unsigned char c : s) {
      auto& next = nodes_[node].next;
      auto it = std::lower_bound(
          next.begin(), next.end(), c,
          [](const std::pair<unsigned char, int32_t>& e, unsigned char v) { return e.first < v; });
      if (it != next.end() && it->first == c) {
        node = it->second;
      } else {
        const int32_t fresh = static_cast<int32_t>(nodes_.size());
        next.insert(it, {c, fresh});
        nodes_.emplace_back();
        node = fresh;
      }
    }
    if (nodes_[node].pattern < 0) nodes_[node].pattern = static_cast<int32_t>(p);
  }
}

int Matcher::longest_at(std::string_view text, size_t pos, size_t& len) const {
  int best = -1;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto& next = nodes_[node].next;
    const unsigned char c = static_cast<unsigned char>(text[i]);
    auto it = std::lower_bound(
        next.begin(), next.end(), c,
        [](const std::pair<unsigned char, int32_t>& e, unsigned char v) { return e.first < v; });
    if (it == next.end() || it->first != c) break;
    node = it->second;
    if (nodes_[node].pattern >= 0) {
      best = nodes_[node].pattern;
      len = i + 1 - pos;
    }
  }
  return best;
}

}  // namespace tok

namespace {

struct Symbol {
  int32_t id;
  int32_t prev, next;
  uint32_t len;  // bytes of the word; 0 once merged into its left neighbour
};

struct Merge {
  int32_t pos, rank, new_id;
  bool operator<(const Merge& o) const {  // priority_queue pops the largest: lowest rank, then leftmost
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};

constexpr size_t kCacheEntries = 1 << 16;  // cleared when full: a bound on memory, not an eviction policy
constexpr size_t kCacheMaxWord = 256;      // longer words are not cached

}  // namespace

void Tokenizer::Impl::bpe_word(std::string_view raw_word, std::vector<int32_t>& out) const {
  const bool cacheable = raw_word.size() <= kCacheMaxWord;
  if (cacheable) {
    std::lock_guard lock(cache_mutex);
    if (auto it = cache_index.find(raw_word); it != cache_index.end()) {
      const auto [offset, length] = cache_entries[static_cast<size_t>(it->second)];
      out.insert(out.end(), cache_ids.begin() + offset, cache_ids.begin() + offset + length);
      return;
    }
  }
  const size_t first = out.size();
  std::string mapped;
  if (byte_level) mapped = tok::byte_level_encode(raw_word);
  const std::string_view word = byte_level ? std::string_view(mapped) : raw_word;
  auto it = ignore_merges ? token_to_id.find(word) : token_to_id.end();
  if (it != token_to_id.end())
    out.push_back(it->second);
  else
    merge_word(word, out);
  if (cacheable) {
    std::lock_guard lock(cache_mutex);
    if (cache_entries.size() >= kCacheEntries) {
      cache_index.clear();
      cache_entries.clear();
      cache_ids.clear();
    }
    if (cache_index.find(raw_word) == cache_index.end()) {
      cache_index.emplace(std::string(raw_word), static_cast<int32_t>(cache_entries.size()));
      cache_entries.emplace_back(static_cast<uint32_t>(cache_ids.size()),
                                 static_cast<uint32_t>(out.size() - first));
      cache_ids.insert(cache_ids.end(), out.begin() + static_cast<ptrdiff_t>(first), out.end());
    }
  }
}

// `tokenizers`' BPE::merge_word and Word::merge_all on a word in the model's alphabet.
void Tokenizer::Impl::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  // Initial symbols: one per character, the character's token, else its "<0xXX>" byte tokens, else unk
  // (consecutive unknowns fused when fuse_unk). As in `tokenizers`, a pending unk is not flushed before byte
  // fallback tokens.
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&](int32_t id, uint32_t len) {
    const int32_t index = static_cast<int32_t>(symbols.size());
    if (index > 0) symbols.back().next = index;
    symbols.push_back({id, index - 1, -1, len});
  };
  const auto* s = reinterpret_cast<const unsigned char*>(word.data());
  int32_t pending_unk = -1;
  uint32_t pending_len = 0;
  for (size_t i = 0; i < word.size();) {
    uint32_t cp;
    const int len = tok::decode_utf8(s + i, word.size() - i, cp);
    const std::string_view ch = word.substr(i, static_cast<size_t>(len));
    i += static_cast<size_t>(len);
    if (auto it = token_to_id.find(ch); it != token_to_id.end()) {
      if (pending_unk >= 0) add(pending_unk, pending_len), pending_unk = -1;
      add(it->second, static_cast<uint32_t>(len));
      continue;
    }
    if (byte_fallback) {
      bool all = true;
      for (unsigned char b : ch) all = all && byte_tokens[b] >= 0;
      if (all) {
        for (unsigned char b : ch) add(byte_tokens[b], 1);
        continue;
      }
    }
    if (unk_id >= 0) {
      if (pending_unk >= 0 && fuse_unk) {
        pending_len += static_cast<uint32_t>(len);
      } else {
        if (pending_unk >= 0) add(pending_unk, pending_len);
        pending_unk = unk_id;
        pending_len = static_cast<uint32_t>(len);
      }
    }
  }
  if (pending_unk >= 0) add(pending_unk, pending_len);

  auto merge_of = [&](int32_t left, int32_t right) -> const std::pair<int32_t, int32_t>* {
    auto it =
        merges.find(static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right));
    return it == merges.end() ? nullptr : &it->second;
  };
  std::priority_queue<Merge> queue;
  for (size_t i = 0; i + 1 < symbols.size(); ++i)
    if (auto m = merge_of(symbols[i].id, symbols[i + 1].id))
      queue.push({static_cast<int32_t>(i), m->first, m->second});
  const int32_t count = static_cast<int32_t>(symbols.size());
  while (!queue.empty()) {
    const Merge top = queue.top();
    queue.pop();
    Symbol& cur = symbols[static_cast<size_t>(top.pos)];
    if (cur.len == 0 || cur.next == -1) continue;
    const int32_t next_pos = cur.next;
    const Symbol right = symbols[static_cast<size_t>(next_pos)];
    const auto* m = merge_of(cur.id, right.id);
    if (!m || m->second != top.new_id) continue;  // an entry made stale by an earlier merge
    cur.id = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    symbols[static_cast<size_t>(next_pos)].len = 0;
    if (right.next > -1 && right.next < count) symbols[static_cast<size_t>(right.next)].prev = top.pos;
    if (cur.prev >= 0)
      if (auto pm = merge_of(symbols[static_cast<size_t>(cur.prev)].id, cur.id))
        queue.push({cur.prev, pm->first, pm->second});
    if (cur.next >= 0 && cur.next < count)
      if (auto nm = merge_of(cur.id, symbols[static_cast<size_t>(cur.next)].id))
        queue.push({top.pos, nm->first, nm->second});
  }
  for (const Symbol& sym : symbols)
    if (sym.len != 0) out.push_back(sym.id);
}

int32_t Tokenizer::Impl::spm_byte(unsigned char b) const {
  if (byte_tokens[b] >= 0) return byte_tokens[b];
  if (auto it = token_to_id.find(std::string_view(reinterpret_cast<const char*>(&b), 1));
      it != token_to_id.end())
    return it->second;
  if (unk_id >= 0) return unk_id;
  char hex[8];
  std::snprintf(hex, sizeof hex, "<0x%02X>", b);
  throw DataError("[Tokenizer::encode] " + source + ": expected a byte token " + hex +
                  " (or an unknown token) for a byte no token covers, got none");
}

// llama.cpp's SentencePiece-style tokenizer: characters (by their UTF-8 lead byte, unvalidated) are merged
// pairwise, best score first (ties: leftmost), whenever the pair's text is a token; symbols left that are not
// tokens are re-split along the merges that made them, down to byte tokens.
void Tokenizer::Impl::spm_text(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  struct Sym {
    int32_t prev, next;
    size_t offset, n;
  };
  std::vector<Sym> syms;
  syms.reserve(text.size());
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  for (size_t offs = 0; offs < text.size();) {
    const size_t len =
        std::min<size_t>(text.size() - offs, kLen[static_cast<unsigned char>(text[offs]) >> 4]);
    const int32_t index = static_cast<int32_t>(syms.size());
    syms.push_back({index - 1, offs + len == text.size() ? -1 : index + 1, offs, len});
    offs += len;
  }
  struct Bigram {
    int32_t left, right;
    float score;
    size_t size;
  };
  auto worse = [](const Bigram& a, const Bigram& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> queue(worse);
  std::unordered_map<std::string_view, std::pair<int32_t, int32_t>> rev_merge;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left == -1 || right == -1) return;
    const std::string_view t =
        text.substr(syms[static_cast<size_t>(left)].offset,
                    syms[static_cast<size_t>(left)].n + syms[static_cast<size_t>(right)].n);
    auto it = token_to_id.find(t);
    if (it == token_to_id.end()) return;
    queue.push({left, right, scores[static_cast<size_t>(it->second)], t.size()});
    rev_merge[t] = {left, right};
  };
  for (size_t i = 1; i < syms.size(); ++i) try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Sym& l = syms[static_cast<size_t>(b.left)];
    Sym& r = syms[static_cast<size_t>(b.right)];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) syms[static_cast<size_t>(r.next)].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  // Depth-bounded: a rev_merge chain that does not shrink falls back to bytes instead of recursing forever.
  auto resegment = [&](auto&& self, const Sym& sym, int depth) -> void {
    const std::string_view t = text.substr(sym.offset, sym.n);
    if (auto it = token_to_id.find(t); it != token_to_id.end()) {
      out.push_back(it->second);
      return;
    }
    if (auto p = rev_merge.find(t); p != rev_merge.end() && depth < 64) {
      self(self, syms[static_cast<size_t>(p->second.first)], depth + 1);
      self(self, syms[static_cast<size_t>(p->second.second)], depth + 1);
      return;
    }
    for (unsigned char c : t) out.push_back(spm_byte(c));
  };
  for (int32_t i = 0; i != -1; i = syms[static_cast<size_t>(i)].next)
    resegment(resegment, syms[static_cast<size_t>(i)], 0);
}

}  // namespace meganeura
