#include "meganeura/data/idx.hpp"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "meganeura/core/error.hpp"

namespace meganeura {
namespace {

size_t element_size(IdxType t) {
  switch (t) {
    case IdxType::U8:
    case IdxType::I8: return 1;
    case IdxType::I16: return 2;
    case IdxType::I32:
    case IdxType::F32: return 4;
    case IdxType::F64: return 8;
  }
  return 0;
}

bool valid_type(uint8_t code) {
  return code == 0x08 || code == 0x09 || code == 0x0B || code == 0x0C || code == 0x0D || code == 0x0E;
}

uint64_t read_be(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

int64_t IdxArray::count() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<float> IdxArray::to_float() const {
  const size_t es = element_size(type);
  const size_t n = raw.size() / es;
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = raw.data() + i * es;
    const uint64_t bits = read_be(p, es);
    switch (type) {
      case IdxType::U8: out[i] = static_cast<float>(p[0]); break;
      case IdxType::I8: out[i] = static_cast<float>(static_cast<int8_t>(p[0])); break;
      case IdxType::I16: out[i] = static_cast<float>(static_cast<int16_t>(bits)); break;
      case IdxType::I32: out[i] = static_cast<float>(static_cast<int32_t>(bits)); break;
      case IdxType::F32: {
        uint32_t b = static_cast<uint32_t>(bits);
        float f;
        std::memcpy(&f, &b, 4);
        out[i] = f;
        break;
      }
      case IdxType::F64: {
        double d;
        std::memcpy(&d, &bits, 8);
        out[i] = static_cast<float>(d);
        break;
      }
    }
  }
  return out;
}

IdxArray parse_idx(const std::vector<uint8_t>& bytes, const std::string& origin) {
  const std::string where = "[read_idx] " + origin + ": ";
  if (bytes.size() < 4)
    throw DataError(where + "expected an IDX header of at least 4 bytes, got " +
                    std::to_string(bytes.size()));
  if (bytes[0] != 0 || bytes[1] != 0 || !valid_type(bytes[2]) || bytes[3] == 0)
    throw DataError(where + "expected IDX magic 00 00 <type 08..0E> <rank>, got a file that is not IDX");
  IdxArray a;
  a.type = static_cast<IdxType>(bytes[2]);
  const size_t rank = bytes[3];
  const size_t header = 4 + 4 * rank;
  if (bytes.size() < header)
    throw DataError(where + "expected " + std::to_string(header) + " header bytes for rank " +
                    std::to_string(rank) + ", got " + std::to_string(bytes.size()) + " (truncated)");
  uint64_t count = 1;
  for (size_t i = 0; i < rank; ++i) {
    const uint64_t d = read_be(bytes.data() + 4 + 4 * i, 4);
    a.dims.push_back(static_cast<int64_t>(d));
    // Guard the product before it can overflow: no real data set comes near 2^48 elements.
    if (d != 0 && count > (uint64_t{1} << 48) / d)
      throw DataError(where + "expected plausible dimensions, got an element count above 2^48");
    count *= d;
  }
  const uint64_t payload = count * element_size(a.type);
  const uint64_t have = bytes.size() - header;
  if (have != payload) {
    std::string dims;
    for (size_t i = 0; i < rank; ++i) {
      if (i) dims += "x";
      dims += std::to_string(a.dims[i]);
    }
    throw DataError(where + "expected " + std::to_string(payload) + " payload bytes for dims " + dims +
                    ", got " + std::to_string(have) +
                    (have < payload ? " (truncated)" : " (trailing bytes)"));
  }
  a.raw.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return a;
}

IdxArray read_idx(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) {
    const int e = errno;
    throw DataError("[read_idx] expected a readable IDX file at '" + path +
                    "', got: " + (e ? std::strerror(e) : "cannot open"));
  }
  std::vector<uint8_t> bytes;
  constexpr size_t chunk = 1 << 20;
  for (;;) {
    const size_t at = bytes.size();
    bytes.resize(at + chunk);
    const int n = gzread(f, bytes.data() + at, static_cast<unsigned>(chunk));
    if (n < 0) {
      int code = 0;
      std::string msg = gzerror(f, &code);
      gzclose(f);
      throw DataError("[read_idx] expected a valid gzip stream in '" + path + "', got: " + msg);
    }
    bytes.resize(at + static_cast<size_t>(n));
    if (n == 0) break;
  }
  // gzread returns what it could before a truncated stream ends; zlib reports that only here.
  int code = Z_OK;
  const char* msg = gzerror(f, &code);
  std::string err = (code != Z_OK && code != Z_STREAM_END) ? std::string(msg) : std::string();
  const int close_rc = gzclose(f);
  if (!err.empty())
    throw DataError("[read_idx] expected a complete gzip stream in '" + path + "', got: " + err);
  if (close_rc == Z_BUF_ERROR)
    throw DataError("[read_idx] expected a complete gzip stream in '" + path + "', got: truncated file");
  if (close_rc != Z_OK)
    throw DataError("[read_idx] expected a readable file '" + path + "', got gzclose error " +
                    std::to_string(close_rc));
  return parse_idx(bytes, path);
}

}  // namespace meganeura
