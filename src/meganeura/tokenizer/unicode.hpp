#pragma once
// The little Unicode the tokenizers need: strict UTF-8 decoding that never fails (a byte that does not start
// a well-formed sequence is one "invalid" unit of its own), and the general-category classes that the split
// patterns' \p{L}, \p{N} and \s name. The class table is generated (scripts/gen_unicode_table.py).
#include <cstddef>
#include <cstdint>
#include <string>

namespace meganeura::tok {

enum CategoryFlag : uint8_t {
  kLetter = 1,      // L*  (\p{L})
  kNumber = 2,      // N*  (\p{N}, Rust's char::is_numeric)
  kDigit = 4,       // Nd
  kMark = 8,        // M*
  kConnector = 16,  // Pc
  kSpace = 32,      // Oniguruma's \s: U+0009..U+000D, U+0085, Zs, Zl, Zp
};

struct CategoryRange {
  uint32_t first, last;
  uint8_t flags;
};
extern const char* const kUnicodeVersion;
extern const size_t kCategoryRangeCount;
extern const CategoryRange kCategoryRanges[];

// A code point no valid UTF-8 decodes to: the value given to a byte that starts no well-formed sequence.
inline constexpr uint32_t kInvalid = 0x110000;

uint8_t category_flags_slow(uint32_t cp);

inline uint8_t category_flags(uint32_t cp) {
  if (cp < 0x80) {
    if ((cp | 0x20) - 'a' < 26) return kLetter;
    if (cp - '0' < 10) return kNumber | kDigit;
    if (cp == ' ' || (cp >= 9 && cp <= 13)) return kSpace;
    if (cp == '_') return kConnector;
    return 0;
  }
  return category_flags_slow(cp);
}

// Decodes the code point at s[0..n) (n >= 1) into cp and returns its length in bytes. Overlong forms,
// surrogates, values above U+10FFFF and truncated sequences give cp = kInvalid and length 1.
inline int decode_utf8(const unsigned char* s, size_t n, uint32_t& cp) {
  const unsigned c = s[0];
  if (c < 0x80) {
    cp = c;
    return 1;
  }
  int len;
  uint32_t v;
  uint32_t min;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2, v = c & 0x1F, min = 0x80;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3, v = c & 0x0F, min = 0x800;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4, v = c & 0x07, min = 0x10000;
  } else {
    cp = kInvalid;
    return 1;
  }
  if (n < static_cast<size_t>(len)) {
    cp = kInvalid;
    return 1;
  }
  for (int k = 1; k < len; ++k) {
    if ((s[k] & 0xC0) != 0x80) {
      cp = kInvalid;
      return 1;
    }
    v = (v << 6) | (s[k] & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
    cp = kInvalid;
    return 1;
  }
  cp = v;
  return len;
}

void append_utf8(std::string& out, uint32_t cp);

// Rust's String::from_utf8_lossy (and Python's errors="replace"): every maximal ill-formed subpart becomes
// one U+FFFD.
std::string utf8_lossy(std::string_view bytes);
bool is_valid_utf8(std::string_view bytes);

}  // namespace meganeura::tok
