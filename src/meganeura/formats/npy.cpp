#include "meganeura/formats/npy.hpp"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>

#include "meganeura/core/error.hpp"
#include "meganeura/formats/mmap.hpp"
#include "meganeura/ir/storage.hpp"

namespace meganeura {
namespace {

constexpr char kMagic[] = "\x93NUMPY";  // 6 bytes

struct Kind {
  char type = 'f';  // f, i, u, b
  size_t size = 4;
};

// '<f4', '|u1', ... ; '>' (big-endian) of a multi-byte type is refused (every machine we run on is
// little-endian and numpy writes native order).
bool kind_of(const std::string& descr, Kind& k) {
  if (descr.size() != 3) return false;
  const char order = descr[0], type = descr[1], size = descr[2];
  if (size < '1' || size > '8') return false;
  k = {type, size_t(size - '0')};
  const bool ok_type =
      (type == 'f' && (k.size == 2 || k.size == 4 || k.size == 8)) ||
      ((type == 'i' || type == 'u') && (k.size == 1 || k.size == 2 || k.size == 4 || k.size == 8)) ||
      (type == 'b' && k.size == 1);
  if (!ok_type) return false;
  if (k.size == 1) return order == '|' || order == '<' || order == '=';
  return order == '<' || order == '=';
}

// A small reader of the header's Python literal: {'key': value, ...}.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& origin) : t_(text), origin_(origin) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw FormatError("[read_npy] " + origin_ + ": expected " + what + " in the header at offset " +
                      std::to_string(i_) + ", got '" + t_.substr(i_, 24) + "'");
  }
  void skip() {
    while (i_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[i_]))) ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < t_.size() && t_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c, const char* what) {
    if (!eat(c)) fail(what);
  }
  std::string string() {
    skip();
    if (i_ >= t_.size() || (t_[i_] != '\'' && t_[i_] != '"')) fail("a quoted string");
    const char q = t_[i_++];
    const size_t end = t_.find(q, i_);
    if (end == std::string::npos) fail("a closing quote");
    std::string s = t_.substr(i_, end - i_);
    i_ = end + 1;
    return s;
  }
  bool boolean() {
    skip();
    if (t_.compare(i_, 4, "True") == 0) {
      i_ += 4;
      return true;
    }
    if (t_.compare(i_, 5, "False") == 0) {
      i_ += 5;
      return false;
    }
    fail("True or False for 'fortran_order'");
  }
  Shape shape() {
    expect('(', "'(' opening 'shape'");
    Shape s;
    while (!eat(')')) {
      skip();
      if (i_ >= t_.size() || !std::isdigit(static_cast<unsigned char>(t_[i_])))
        fail("a dimension of 'shape'");
      int64_t d = 0;
      while (i_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[i_]))) {
        if (d > (std::numeric_limits<int64_t>::max() - 9) / 10) fail("a dimension below 2^63");
        d = d * 10 + (t_[i_++] - '0');
      }
      s.push_back(d);
      if (!eat(',')) {
        expect(')', "',' or ')' in 'shape'");
        break;
      }
    }
    return s;
  }
  bool at_end() {
    skip();
    return i_ == t_.size();
  }

 private:
  const std::string& t_;
  const std::string& origin_;
  size_t i_ = 0;
};

double load_value(const std::byte* p, const Kind& k) {
  auto get = [p]<class T>(T) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  };
  switch (k.type) {
    case 'f':
      if (k.size == 2) return f16_bits_to_f32(get(uint16_t{}));
      if (k.size == 4) return get(float{});
      return get(double{});
    case 'b': return get(uint8_t{}) != 0 ? 1.0 : 0.0;
    case 'i':
      if (k.size == 1) return get(int8_t{});
      if (k.size == 2) return get(int16_t{});
      if (k.size == 4) return get(int32_t{});
      return double(get(int64_t{}));
    default:
      if (k.size == 1) return get(uint8_t{});
      if (k.size == 2) return get(uint16_t{});
      if (k.size == 4) return get(uint32_t{});
      return double(get(uint64_t{}));
  }
}

}  // namespace

NpyArray parse_npy(std::span<const std::byte> file, const std::string& origin) {
  auto fail = [&](const std::string& what) -> void {
    throw FormatError("[read_npy] " + origin + ": " + what);
  };
  if (file.size() < 10 || std::memcmp(file.data(), kMagic, 6) != 0)
    fail("expected the magic \\x93NUMPY at the start, got another file (or fewer than 10 bytes)");
  const auto major = uint8_t(file[6]), minor = uint8_t(file[7]);
  if (major < 1 || major > 3 || minor != 0)
    fail("expected format version 1.0, 2.0 or 3.0, got " + std::to_string(major) + "." +
         std::to_string(minor));
  size_t len_bytes = major == 1 ? 2 : 4, header_len = 0;
  if (file.size() < 8 + len_bytes) fail("expected a header length, got the end of the file");
  for (size_t b = 0; b < len_bytes; ++b) header_len |= size_t(uint8_t(file[8 + b])) << (8 * b);
  const size_t data_start = 8 + len_bytes + header_len;
  if (header_len > file.size() || data_start > file.size())
    fail("expected a header of " + std::to_string(header_len) + " bytes inside the file of " +
         std::to_string(file.size()) + " bytes, got the end of the file");
  const std::string text(reinterpret_cast<const char*>(file.data()) + 8 + len_bytes, header_len);

  HeaderParser p(text, origin);
  std::string descr;
  bool fortran = false, has_descr = false, has_order = false, has_shape = false;
  Shape shape;
  p.expect('{', "'{' opening the header dict");
  while (!p.eat('}')) {
    const std::string key = p.string();
    p.expect(':', "':' after a key");
    if (key == "descr" && !has_descr) {
      descr = p.string();
      has_descr = true;
    } else if (key == "fortran_order" && !has_order) {
      fortran = p.boolean();
      has_order = true;
    } else if (key == "shape" && !has_shape) {
      shape = p.shape();
      has_shape = true;
    } else {
      fail("expected the header keys descr, fortran_order and shape once each, got '" + key + "'");
    }
    if (!p.eat(',')) {
      p.expect('}', "',' or '}' in the header dict");
      break;
    }
  }
  if (!p.at_end()) p.fail("only spaces and a newline after the header dict");
  if (!has_descr || !has_order || !has_shape)
    fail(std::string("expected the header keys descr, fortran_order and shape, got no '") +
         (!has_descr   ? "descr"
          : !has_order ? "fortran_order"
                       : "shape") +
         "'");
  Kind k;
  if (!kind_of(descr, k))
    fail("expected 'descr' to be a little-endian f2/f4/f8, i1..i8, u1..u8 or b1, got '" + descr + "'");
  if (fortran && shape.size() > 1) fail("expected 'fortran_order': False (C order), got True");
  uint64_t count = 1;
  for (int64_t d : shape) {
    if (d != 0 && count > std::numeric_limits<uint64_t>::max() / uint64_t(d) / k.size)
      fail("expected a shape whose size fits in 64 bits, got an overflow");
    count *= uint64_t(d);
  }
  const uint64_t have = file.size() - data_start;
  if (have != count * k.size)
    fail("expected " + std::to_string(count * k.size) + " data bytes for shape and '" + descr + "', got " +
         std::to_string(have));
  NpyArray a;
  a.descr = descr;
  a.value.shape = shape;
  a.value.data.resize(count);
  const std::byte* d = file.data() + data_start;
  for (uint64_t i = 0; i < count; ++i) a.value.data[i] = load_value(d + i * k.size, k);
  return a;
}

NpyArray read_npy(const std::string& path) {
  const MappedFile map(path);
  return parse_npy(map.bytes(), path);
}

std::vector<std::byte> serialize_npy(const HostTensor& value, const std::string& descr,
                                     const std::string& origin) {
  Kind k;
  if (!kind_of(descr, k))
    throw ConfigError("[write_npy] expected a little-endian f2/f4/f8, i1..i8, u1..u8 or b1 dtype for " +
                      origin + ", got '" + descr + "'");
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < value.shape.size(); ++i)
    header += std::to_string(value.shape[i]) +
              (value.shape.size() == 1 || i + 1 < value.shape.size() ? "," : "") +
              (i + 1 < value.shape.size() ? " " : "");
  header += "), }";
  // numpy pads with spaces so that the data starts at a multiple of 64, and ends the header with '\n'.
  const size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  if (header.size() > 65535)
    throw ConfigError("[write_npy] expected a shape of fewer dimensions for " + origin);
  std::vector<std::byte> out(10 + header.size() + value.data.size() * k.size);
  std::memcpy(out.data(), kMagic, 6);
  out[6] = std::byte{1};
  out[7] = std::byte{0};
  out[8] = std::byte(header.size() & 0xff);
  out[9] = std::byte(header.size() >> 8);
  std::memcpy(out.data() + 10, header.data(), header.size());
  std::byte* p = out.data() + 10 + header.size();
  for (size_t i = 0; i < value.data.size(); ++i, p += k.size) {
    const double v = value.data[i];
    auto put = [p]<class T>(T x) { std::memcpy(p, &x, sizeof(T)); };
    auto check_int = [&](double lo, double hi) {
      if (!(v >= lo && v <= hi) || v != std::floor(v))
        throw ConfigError("[write_npy] expected whole numbers in " + descr + "'s range for " + origin +
                          ", got " + std::to_string(v) + " at element " + std::to_string(i));
    };
    switch (k.type) {
      case 'f':
        if (k.size == 2)
          put(f32_to_f16_bits(float(v)));
        else if (k.size == 4)
          put(float(v));
        else
          put(v);
        break;
      case 'b': put(uint8_t(v != 0.0)); break;
      case 'i':
        if (k.size == 1) check_int(-128, 127), put(int8_t(v));
        if (k.size == 2) check_int(-32768, 32767), put(int16_t(v));
        if (k.size == 4) check_int(-2147483648.0, 2147483647.0), put(int32_t(v));
        if (k.size == 8) check_int(-9.2233720368547758e18, 9.2233720368547748e18), put(int64_t(v));
        break;
      default:
        if (k.size == 1) check_int(0, 255), put(uint8_t(v));
        if (k.size == 2) check_int(0, 65535), put(uint16_t(v));
        if (k.size == 4) check_int(0, 4294967295.0), put(uint32_t(v));
        if (k.size == 8) check_int(0, 1.8446744073709550e19), put(uint64_t(v));
    }
  }
  return out;
}

void write_npy(const std::string& path, const HostTensor& value, const std::string& descr) {
  const std::vector<std::byte> bytes = serialize_npy(value, descr, path);
  std::ofstream f(path, std::ios::binary);
  if (!f || !f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size())))
    throw ConfigError("[write_npy] expected a writable path, got '" + path + "'");
}

}  // namespace meganeura
