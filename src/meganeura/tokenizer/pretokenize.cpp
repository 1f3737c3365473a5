// Normalizers and pre-tokenizers. The split patterns are hand-written scanners: std::regex has no \p{L}, and
// each pattern is a short list of alternatives whose backtracking can be worked out once. Every character is
// matched by some alternative of each pattern, so a pattern's matches cover the text and Isolated splitting
// is just "one piece per match". Classes follow Oniguruma (what `tokenizers` uses): \p{L} = L*, \p{N} = N*,
// \s = U+0009..U+000D, U+0085, Zs, Zl, Zp.
#include <array>
#include <string>

#include "meganeura/tokenizer/tokenizer_impl.hpp"
#include "meganeura/tokenizer/unicode.hpp"

namespace meganeura {
namespace tok {
namespace {

struct Text {
  const unsigned char* s;
  size_t n;

  // Flags of the character at i (0 for an invalid byte) and its length.
  uint8_t at(size_t i, int& len) const {
    uint32_t cp;
    if (s[i] < 0x80) {
      len = 1;
      return category_flags(s[i]);
    }
    len = decode_utf8(s + i, n - i, cp);
    return cp == kInvalid ? 0 : category_flags(cp);
  }
  static bool other(uint8_t f) { return !(f & (kLetter | kNumber | kSpace)); }

  template <class Pred>
  size_t run(size_t i, Pred pred) const {
    while (i < n) {
      int len;
      if (!pred(at(i, len))) break;
      i += len;
    }
    return i;
  }
  size_t letters(size_t i) const {
    return run(i, [](uint8_t f) { return f & kLetter; });
  }
  size_t numbers(size_t i) const {
    return run(i, [](uint8_t f) { return f & kNumber; });
  }
  size_t others(size_t i) const { return run(i, other); }
  size_t newlines(size_t i) const {
    while (i < n && (s[i] == '\r' || s[i] == '\n')) ++i;
    return i;
  }

  // \s+(?!\S)|\s+ at i (a space): the whole run at the end of the text, else the run but its last character
  // when that leaves at least one, else the one character. last_nl (if not null) gets one past the last
  // \r or \n of the run, or 0.
  size_t spaces(size_t i, size_t* last_nl) const {
    size_t last_start = i, e = i;
    size_t nl = 0;
    int count = 0;
    while (e < n) {
      int len;
      if (!(at(e, len) & kSpace)) break;
      if (s[e] == '\r' || s[e] == '\n') nl = e + 1;
      last_start = e;
      e += len;
      ++count;
    }
    if (last_nl) *last_nl = nl;
    if (e == n || count < 2) return e;
    return last_start;
  }
};

// 's|'t|'re|'ve|'m|'ll|'d (case-insensitive when `fold`, where Oniguruma's folding lets U+017F match s).
size_t contraction(const Text& t, size_t i, bool fold) {
  if (t.s[i] != '\'' || i + 1 >= t.n) return 0;
  auto lower = [&](unsigned char c) -> unsigned char { return fold && c >= 'A' && c <= 'Z' ? c + 32 : c; };
  const unsigned char c1 = lower(t.s[i + 1]);
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return i + 2;
  if (fold && t.s[i + 1] == 0xC5 && i + 2 < t.n && t.s[i + 2] == 0xBF) return i + 3;  // 'ſ
  if (i + 2 < t.n) {
    const unsigned char c2 = lower(t.s[i + 2]);
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return i + 3;
  }
  return 0;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t scan_gpt2(const Text& t, size_t i) {
  if (size_t e = contraction(t, i, false)) return e;
  int len;
  const uint8_t f = t.at(i, len);
  if (t.s[i] == ' ' && i + 1 < t.n) {
    int len1;
    const uint8_t f1 = t.at(i + 1, len1);
    if (f1 & kLetter) return t.letters(i + 1);
    if (f1 & kNumber) return t.numbers(i + 1);
    if (Text::other(f1)) return t.others(i + 1);
  }
  if (f & kLetter) return t.letters(i);
  if (f & kNumber) return t.numbers(i);
  if (Text::other(f)) return t.others(i);
  return t.spaces(i, nullptr);
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|
// \s+(?!\S)|\s+   with D = 3 (Llama-3) or 1 (Qwen2)
size_t scan_llama3(const Text& t, size_t i, int max_digits) {
  if (size_t e = contraction(t, i, true)) return e;
  int len;
  const uint8_t f = t.at(i, len);
  if (f & kLetter) return t.letters(i);
  const bool newline = t.s[i] == '\r' || t.s[i] == '\n';
  if (!(f & kNumber) && !newline && i + len < t.n) {
    int len1;
    if (t.at(i + len, len1) & kLetter) return t.letters(i + len);
  }
  if (f & kNumber) {
    size_t e = i;
    for (int k = 0; k < max_digits && e < t.n; ++k) {
      int l;
      if (!(t.at(e, l) & kNumber)) break;
      e += l;
    }
    return e;
  }
  if (t.s[i] == ' ' && i + 1 < t.n) {
    int len1;
    if (Text::other(t.at(i + 1, len1))) return t.newlines(t.others(i + 1));
  }
  if (Text::other(f)) return t.newlines(t.others(i));
  size_t nl;
  const size_t e = t.spaces(i, &nl);
  return nl ? nl : e;
}

size_t scan(SplitPattern p, const Text& t, size_t i) {
  switch (p) {
    case SplitPattern::Gpt2: return scan_gpt2(t, i);
    case SplitPattern::Llama3: return scan_llama3(t, i, 3);
    case SplitPattern::Qwen2: return scan_llama3(t, i, 1);
  }
  return t.n;
}

void split_pattern(SplitPattern p, std::string_view piece, std::vector<std::string_view>& out) {
  const Text t{reinterpret_cast<const unsigned char*>(piece.data()), piece.size()};
  for (size_t i = 0; i < t.n;) {
    size_t e = scan(p, t, i);
    if (e <= i) e = i + 1;  // every pattern matches at least one character; never loop on a bug
    out.push_back(piece.substr(i, e - i));
    i = e;
  }
}

void split_digits(std::string_view piece, bool individual, std::vector<std::string_view>& out) {
  const Text t{reinterpret_cast<const unsigned char*>(piece.data()), piece.size()};
  size_t start = 0;
  for (size_t i = 0; i < t.n;) {
    int len;
    const bool num = t.at(i, len) & kNumber;
    if (num) {
      if (start < i) out.push_back(piece.substr(start, i - start));
      size_t e = individual ? i + static_cast<size_t>(len) : t.numbers(i);
      out.push_back(piece.substr(i, e - i));
      start = i = e;
    } else {
      i += static_cast<size_t>(len);
    }
  }
  if (start < t.n) out.push_back(piece.substr(start));
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the others for U+0100 onwards.
const std::array<std::string, 256>& byte_chars() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      append_utf8(t[b], printable ? static_cast<uint32_t>(b) : next++);
    }
    return t;
  }();
  return table;
}

}  // namespace

std::string byte_level_encode(std::string_view bytes) {
  const auto& table = byte_chars();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) out += table[c];
  return out;
}

// The bytes a byte-level token stands for, appended to out; false (out unchanged) when a character is
// outside the alphabet.
bool byte_level_decode(std::string_view token, std::string& out) {
  static const std::array<int16_t, 0x144> to_byte = [] {
    std::array<int16_t, 0x144> t;
    t.fill(-1);
    const auto& chars = byte_chars();
    for (int b = 0; b < 256; ++b) {
      uint32_t cp;
      decode_utf8(reinterpret_cast<const unsigned char*>(chars[b].data()), chars[b].size(), cp);
      t[cp] = static_cast<int16_t>(b);
    }
    return t;
  }();
  const auto* s = reinterpret_cast<const unsigned char*>(token.data());
  const size_t old = out.size();
  for (size_t i = 0; i < token.size();) {
    uint32_t cp;
    i += decode_utf8(s + i, token.size() - i, cp);
    if (cp >= to_byte.size() || to_byte[cp] < 0) {
      out.resize(old);
      return false;
    }
    out += static_cast<char>(to_byte[cp]);
  }
  return true;
}

}  // namespace tok

std::string Tokenizer::Impl::normalize(std::string_view s) const {
  std::string out(s);
  for (const auto& step : normalizer) {
    if (step.kind == tok::NormStep::Prepend) {
      if (!out.empty()) out.insert(0, step.a);
    } else if (!step.a.empty()) {
      std::string r;
      size_t pos = 0;
      for (size_t hit; (hit = out.find(step.a, pos)) != std::string::npos; pos = hit + step.a.size()) {
        r.append(out, pos, hit - pos);
        r += step.b;
      }
      r.append(out, pos);
      out = std::move(r);
    }
  }
  return out;
}

void Tokenizer::Impl::pre_tokenize(std::string_view piece, PreScratch& scratch) const {
  auto& words = scratch.words;
  auto& next = scratch.next;
  words.clear();
  scratch.owned.clear();
  if (piece.empty()) return;
  words.push_back(piece);
  for (const auto& step : pre) {
    next.clear();
    for (std::string_view w : words) {
      switch (step.kind) {
        case tok::PreStep::Digits: tok::split_digits(w, step.individual, next); break;
        case tok::PreStep::Split: tok::split_pattern(step.pattern, w, next); break;
        case tok::PreStep::ByteLevel:
          if (step.add_prefix_space && (w.empty() || w[0] != ' '))
            w = scratch.owned.emplace_back(" " + std::string(w));
          if (step.use_regex)
            tok::split_pattern(tok::SplitPattern::Gpt2, w, next);
          else
            next.push_back(w);
          break;
      }
    }
    words.swap(next);
  }
}

}  // namespace meganeura
