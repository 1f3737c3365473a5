// The encode pipeline shared by both engines (added tokens, normalizer, pre-tokenizer, model,
// post-processor), the decoders, and the public Tokenizer.
#include "meganeura/tokenizer/tokenizer.hpp"

#include <fstream>
#include <sstream>

#include "meganeura/core/error.hpp"
#include "meganeura/tokenizer/tokenizer_impl.hpp"
#include "meganeura/tokenizer/unicode.hpp"

namespace meganeura {
namespace {

using tok::AddedToken;

// Rust regex's \w for the added tokens' single_word test: L, M, Nd, Pc and the joiners (Alphabetic's few
// non-letter members, e.g. Nl and circled letters, are not included).
bool word_char(uint32_t cp) {
  if (cp == tok::kInvalid) return false;
  if (cp == 0x200C || cp == 0x200D) return true;
  return tok::category_flags(cp) & (tok::kLetter | tok::kMark | tok::kDigit | tok::kConnector);
}
bool space_char(uint32_t cp) { return cp != tok::kInvalid && (tok::category_flags(cp) & tok::kSpace); }

// The code point that ends s[0..end): the last lead byte's sequence when it is well formed.
uint32_t last_char(std::string_view s, size_t end, size_t& start) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = end;
  int back = 0;
  while (i > 0 && back < 4) {
    --i, ++back;
    if ((p[i] & 0xC0) != 0x80) break;
  }
  uint32_t cp;
  const int len = tok::decode_utf8(p + i, end - i, cp);
  if (i + static_cast<size_t>(len) != end) {
    start = end - 1;
    return tok::kInvalid;
  }
  start = i;
  return cp;
}

// AddedVocabulary::find_matches of `tokenizers`: leftmost-longest matches, single_word matches dropped when a
// word character touches them, lstrip/rstrip widening over whitespace. Calls text(begin, end) for the text
// between matches and token(position in added) for each match.
template <class OnText, class OnToken>
void split_added(const Tokenizer::Impl& m, const Tokenizer::Impl::MatchSet& set, std::string_view s,
                 OnText text, OnToken token) {
  if (set.matcher.empty()) {
    text(size_t{0}, s.size());
    return;
  }
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t start_offset = 0;
  for (size_t i = 0; i < s.size();) {
    if (!set.matcher.may_start(p[i])) {
      ++i;
      continue;
    }
    size_t len = 0;
    const int pat = set.matcher.longest_at(s, i, len);
    if (pat < 0) {
      ++i;
      continue;
    }
    size_t start = i, stop = i + len;
    i = stop;  // the search goes on after the match, whatever widening does below
    const AddedToken& t = m.added[set.index[static_cast<size_t>(pat)]];
    if (t.single_word) {
      size_t before;
      uint32_t after_cp;
      const bool start_space = start == 0 || !word_char(last_char(s, start, before));
      bool stop_space = stop == s.size();
      if (!stop_space) {
        tok::decode_utf8(p + stop, s.size() - stop, after_cp);
        stop_space = !word_char(after_cp);
      }
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) {
      size_t newstart = start;
      while (newstart > 0) {
        size_t b;
        if (!space_char(last_char(s, newstart, b))) break;
        newstart = b;
      }
      start = std::max(newstart, start_offset);
    }
    if (t.rstrip) {
      while (stop < s.size()) {
        uint32_t cp;
        const int l = tok::decode_utf8(p + stop, s.size() - stop, cp);
        if (!space_char(cp)) break;
        stop += static_cast<size_t>(l);
      }
    }
    if (start_offset < start) text(start_offset, start);
    token(set.index[static_cast<size_t>(pat)]);
    start_offset = stop;
  }
  if (start_offset != s.size()) text(start_offset, s.size());
}

std::string replace_all(std::string_view s, const std::string& from, const std::string& to) {
  if (from.empty()) return std::string(s);
  std::string r;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string_view::npos; pos = hit + from.size()) {
    r.append(s.substr(pos, hit - pos));
    r += to;
  }
  r.append(s.substr(pos));
  return r;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte of a "<0xXX>" token as `tokenizers`' ByteFallback decoder reads it (u8::from_str_radix, which
// also takes "+X"), or -1.
int fallback_byte(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  if (t[3] == '+') return hex_digit(t[4]);
  const int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::vector<std::string> apply_decoder(const std::vector<tok::DecStep>& steps,
                                       std::vector<std::string> toks) {
  for (const auto& step : steps) {
    switch (step.kind) {
      case tok::DecStep::ByteLevel: {
        std::string bytes;
        for (const auto& t : toks)
          if (!tok::byte_level_decode(t, bytes)) bytes += t;
        toks.assign(1, tok::utf8_lossy(bytes));
        break;
      }
      case tok::DecStep::Replace:
        for (auto& t : toks) t = replace_all(t, step.a, step.b);
        break;
      case tok::DecStep::ByteFallback: {
        std::vector<std::string> next;
        std::string pending;
        auto flush = [&] {
          if (pending.empty()) return;
          if (tok::is_valid_utf8(pending))
            next.push_back(pending);
          else
            for (size_t k = 0; k < pending.size(); ++k) next.emplace_back("\xEF\xBF\xBD");
          pending.clear();
        };
        for (auto& t : toks) {
          const int b = fallback_byte(t);
          if (b >= 0) {
            pending += static_cast<char>(b);
          } else {
            flush();
            next.push_back(std::move(t));
          }
        }
        flush();
        toks = std::move(next);
        break;
      }
      case tok::DecStep::Fuse: {
        std::string all;
        for (const auto& t : toks) all += t;
        toks.assign(1, std::move(all));
        break;
      }
      case tok::DecStep::Strip:
        for (auto& t : toks) {
          // chars as (offset, code point)
          std::vector<std::pair<size_t, uint32_t>> chars;
          const auto* p = reinterpret_cast<const unsigned char*>(t.data());
          for (size_t i = 0; i < t.size();) {
            uint32_t cp;
            const int len = tok::decode_utf8(p + i, t.size() - i, cp);
            chars.emplace_back(i, cp);
            i += static_cast<size_t>(len);
          }
          uint32_t content;
          tok::decode_utf8(reinterpret_cast<const unsigned char*>(step.a.data()), step.a.size(), content);
          size_t start_cut = 0;
          for (size_t i = 0; i < step.start && i < chars.size(); ++i) {
            if (chars[i].second != content) break;
            start_cut = i + 1;
          }
          size_t stop_cut = chars.size();
          for (size_t i = 0; i < step.stop && i < chars.size(); ++i) {
            const size_t index = chars.size() - i - 1;
            if (chars[index].second != content) break;
            stop_cut = index;
          }
          if (stop_cut < start_cut) stop_cut = start_cut;
          const size_t b = start_cut < chars.size() ? chars[start_cut].first : t.size();
          const size_t e = stop_cut < chars.size() ? chars[stop_cut].first : t.size();
          t = t.substr(b, e - b);
        }
        break;
    }
  }
  return toks;
}

}  // namespace

void Tokenizer::Impl::build_added() {
  added_by_id.clear();
  added_to_id.clear();
  for (int g = 0; g < 2; ++g) {
    std::vector<std::string> all, plain;
    MatchPair& pair = matchers[static_cast<size_t>(g)];
    pair.all.index.clear();
    pair.plain.index.clear();
    for (size_t k = 0; k < added.size(); ++k) {
      const AddedToken& t = added[k];
      if (t.content.empty() || t.normalized != (g == 1)) continue;
      // a normalized token is matched in normalized text, so in its normalized form
      std::string pattern = g == 1 ? normalize(t.content) : t.content;
      all.push_back(pattern);
      pair.all.index.push_back(k);
      if (!t.special) {
        plain.push_back(std::move(pattern));
        pair.plain.index.push_back(k);
      }
    }
    pair.all.matcher.build(all);
    pair.plain.matcher.build(plain);
  }
  for (size_t k = 0; k < added.size(); ++k) {
    added_by_id[added[k].id] = k;
    added_to_id[added[k].content] = added[k].id;
  }
}

std::string Tokenizer::Impl::token_text(int32_t id) const {
  if (auto it = added_by_id.find(id); it != added_by_id.end()) return added[it->second].content;
  if (id >= 0 && static_cast<size_t>(id) < vocab.size()) return vocab[static_cast<size_t>(id)];
  return {};
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("[Tokenizer::load] expected a readable tokenizer.json, got no file at " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return from_json(text.str(), path);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  const Impl& m = *impl_;
  std::vector<int32_t> out;
  if (options.add_special) out = m.prefix_ids;
  auto pick = [&](int g) -> const Impl::MatchSet& {
    return options.parse_special ? m.matchers[static_cast<size_t>(g)].all
                                 : m.matchers[static_cast<size_t>(g)].plain;
  };
  auto on_token = [&](size_t k) { out.push_back(m.added[k].id); };

  if (m.kind == Impl::Kind::Spm) {
    // llama.cpp: a space before the first fragment and before each fragment that follows a special token
    // (which is every fragment but the first), then spaces written as U+2581.
    split_added(
        m, pick(0), text,
        [&](size_t b, size_t e) {
          std::string t = m.add_space_prefix ? " " : "";
          t.append(text.substr(b, e - b));
          m.spm_text(replace_all(t, " ", "\xE2\x96\x81"), out);
        },
        on_token);
  } else {
    Impl::PreScratch scratch;
    std::string normalized_storage;
    split_added(
        m, pick(0), text,
        [&](size_t b, size_t e) {
          std::string_view normalized = text.substr(b, e - b);
          if (!m.normalizer.empty()) normalized = normalized_storage = m.normalize(normalized);
          split_added(
              m, pick(1), normalized,
              [&](size_t b2, size_t e2) {
                m.pre_tokenize(normalized.substr(b2, e2 - b2), scratch);
                for (std::string_view w : scratch.words) m.bpe_word(w, out);
              },
              on_token);
        },
        on_token);
  }
  if (options.add_special) out.insert(out.end(), m.suffix_ids.begin(), m.suffix_ids.end());
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  const Impl& m = *impl_;
  std::vector<std::string> toks;
  toks.reserve(ids.size());
  for (int32_t id : ids) {
    auto it = m.added_by_id.find(id);
    if (it != m.added_by_id.end()) {
      if (skip_special && m.added[it->second].special) continue;
      toks.push_back(m.added[it->second].content);
    } else if (id >= 0 && static_cast<size_t>(id) < m.vocab.size() &&
               !m.vocab[static_cast<size_t>(id)].empty()) {
      toks.push_back(m.vocab[static_cast<size_t>(id)]);
    }  // ids no token has are dropped, as `tokenizers` does
  }
  if (!m.has_decoder) {
    std::string joined;
    for (size_t k = 0; k < toks.size(); ++k) joined += (k ? " " : "") + toks[k];
    return joined;
  }
  std::string out;
  for (const auto& t : apply_decoder(m.decoder, std::move(toks))) out += t;
  return out;
}

size_t Tokenizer::vocab_size() const {
  size_t n = impl_->vocab.size();
  for (const auto& t : impl_->added) n = std::max(n, static_cast<size_t>(t.id) + 1);
  return n;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto it = impl_->added_to_id.find(token); it != impl_->added_to_id.end()) return it->second;
  if (auto it = impl_->token_to_id.find(token); it != impl_->token_to_id.end()) return it->second;
  return std::nullopt;
}

std::string Tokenizer::id_to_token(int32_t id) const { return impl_->token_text(id); }

bool Tokenizer::is_special(int32_t id) const {
  auto it = impl_->added_by_id.find(id);
  return it != impl_->added_by_id.end() && impl_->added[it->second].special;
}

int32_t Tokenizer::bos_id() const { return impl_->bos; }
int32_t Tokenizer::eos_id() const { return impl_->eos; }

std::string apply_chatml(std::span<const ChatMessage> messages, bool add_generation_prompt,
                         std::string_view default_system) {
  std::string out;
  if (!default_system.empty() && (messages.empty() || messages[0].role != "system")) {
    if (!messages.empty()) {
      out += "<|im_start|>system\n";
      out += default_system;
      out += "<|im_end|>\n";
    }
  }
  for (const auto& msg : messages) {
    out += "<|im_start|>";
    out += msg.role;
    out += "\n";
    out += msg.content;
    out += "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace meganeura
