#pragma once
// NNEF binary tensor files (.dat) written byte by byte for tests: the 128-byte header of the NNEF 1.0
// specification (magic 4E EF, version 1.0, data length, rank, 8 extents, bits per item, item type) and
// little-endian data.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace meganeura::test::nnef_writer {

inline void put_u32(std::vector<std::byte>& b, size_t at, uint32_t v) {
  for (int k = 0; k < 4; ++k) b[at + size_t(k)] = std::byte((v >> (8 * k)) & 0xff);
}

inline std::vector<std::byte> header(const std::vector<uint32_t>& shape, uint32_t bits, uint32_t item_type,
                                     uint32_t data_length) {
  std::vector<std::byte> b(128, std::byte{0});
  b[0] = std::byte{0x4E};
  b[1] = std::byte{0xEF};
  b[2] = std::byte{1};
  b[3] = std::byte{0};
  put_u32(b, 4, data_length);
  put_u32(b, 8, uint32_t(shape.size()));
  for (size_t i = 0; i < shape.size(); ++i) put_u32(b, 12 + 4 * i, shape[i]);
  put_u32(b, 44, bits);
  put_u32(b, 48, item_type);
  return b;
}

inline std::vector<std::byte> f32(const std::vector<uint32_t>& shape, const std::vector<float>& values) {
  std::vector<std::byte> b = header(shape, 32, 0, uint32_t(values.size() * 4));
  const size_t at = b.size();
  b.resize(at + values.size() * 4);
  std::memcpy(b.data() + at, values.data(), values.size() * 4);
  return b;
}

inline std::vector<std::byte> i32(const std::vector<uint32_t>& shape, const std::vector<int32_t>& values) {
  std::vector<std::byte> b = header(shape, 32, 4, uint32_t(values.size() * 4));
  const size_t at = b.size();
  b.resize(at + values.size() * 4);
  std::memcpy(b.data() + at, values.data(), values.size() * 4);
  return b;
}

}  // namespace meganeura::test::nnef_writer
