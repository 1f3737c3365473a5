#pragma once
// Reader for the IDX format of MNIST-style data sets (optionally gzip-compressed).
#include <cstdint>
#include <string>
#include <vector>

namespace meganeura {

enum class IdxType : uint8_t { U8 = 0x08, I8 = 0x09, I16 = 0x0B, I32 = 0x0C, F32 = 0x0D, F64 = 0x0E };

// One IDX file, decoded: dims as stored, values widened to float (exact for every MNIST payload).
struct IdxArray {
  IdxType type = IdxType::U8;
  std::vector<int64_t> dims;
  std::vector<uint8_t> raw;  // payload, big-endian as in the file
  int64_t count() const;     // product of dims
  std::vector<float> to_float() const;
};

// Reads `path`; a gzip file is inflated through zlib, a plain file is read as is. Throws DataError naming
// the file when it is missing, unreadable, truncated or not IDX.
IdxArray read_idx(const std::string& path);
// Decodes an in-memory IDX image; `origin` names it in errors.
IdxArray parse_idx(const std::vector<uint8_t>& bytes, const std::string& origin);

}  // namespace meganeura
