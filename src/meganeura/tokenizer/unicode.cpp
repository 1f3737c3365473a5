#include "meganeura/tokenizer/unicode.hpp"

#include <algorithm>

namespace meganeura::tok {

uint8_t category_flags_slow(uint32_t cp) {
  const CategoryRange* end = kCategoryRanges + kCategoryRangeCount;
  const CategoryRange* it = std::upper_bound(kCategoryRanges, end, cp,
                                             [](uint32_t c, const CategoryRange& r) { return c < r.first; });
  if (it == kCategoryRanges) return 0;
  --it;
  return cp <= it->last ? it->flags : 0;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {

// Length of the longest prefix of s[0..n) that is a prefix of some well-formed sequence (Unicode table 3-7):
// the "maximal subpart" that one U+FFFD replaces. At least 1.
size_t maximal_subpart(const unsigned char* s, size_t n) {
  const unsigned c = s[0];
  unsigned lo = 0x80, hi = 0xBF;
  size_t need;
  if (c >= 0xC2 && c <= 0xDF)
    need = 1;
  else if (c == 0xE0)
    need = 2, lo = 0xA0;
  else if (c >= 0xE1 && c <= 0xEC)
    need = 2;
  else if (c == 0xED)
    need = 2, hi = 0x9F;
  else if (c >= 0xEE && c <= 0xEF)
    need = 2;
  else if (c == 0xF0)
    need = 3, lo = 0x90;
  else if (c >= 0xF1 && c <= 0xF3)
    need = 3;
  else if (c == 0xF4)
    need = 3, hi = 0x8F;
  else
    return 1;
  size_t k = 1;
  if (k < n && s[k] >= lo && s[k] <= hi) {
    ++k;
    while (k <= need && k < n && (s[k] & 0xC0) == 0x80) ++k;
  }
  return k;
}

}  // namespace

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t i = 0;
  while (i < bytes.size()) {
    uint32_t cp;
    const int len = decode_utf8(s + i, bytes.size() - i, cp);
    if (cp != kInvalid) {
      out.append(bytes.data() + i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      i += maximal_subpart(s + i, bytes.size() - i);
    }
  }
  return out;
}

bool is_valid_utf8(std::string_view bytes) {
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  for (size_t i = 0; i < bytes.size();) {
    uint32_t cp;
    i += decode_utf8(s + i, bytes.size() - i, cp);
    if (cp == kInvalid) return false;
  }
  return true;
}

}  // namespace meganeura::tok
