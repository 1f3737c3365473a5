// The NNEF binary tensor file: a 128-byte little-endian header (magic 'N' 0xEF, version 1.0, data length,
// rank, 8 extents, bits per item, item type, 19 reserved words) and the packed data. Every field is checked
// against the others before any data is read, so a truncated or hostile file is a FormatError, never a read
// past the end.
#include <cstring>

#include "meganeura/core/error.hpp"
#include "meganeura/formats/mmap.hpp"
#include "meganeura/nnef/nnef.hpp"
#include "meganeura/quant/half.hpp"

namespace meganeura {
namespace {

constexpr size_t kHeaderBytes = 128;
constexpr uint32_t kMaxRank = 8;
// Far above any real variable; it keeps the float64 copy of a hostile header's extents bounded.
constexpr uint64_t kMaxItems = uint64_t(1) << 32;

uint32_t u32(std::span<const std::byte> b, size_t offset) {
  uint32_t v = 0;
  for (int k = 3; k >= 0; --k) v = (v << 8) | uint32_t(b[offset + size_t(k)]);
  return v;
}

template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // the data is little-endian, as the host is (static_assert in formats)
  return v;
}

}  // namespace

NnefTensor read_nnef_tensor_bytes(std::span<const std::byte> bytes, const std::string& origin) {
  auto fail = [&](const std::string& what) -> void {
    throw FormatError("[load_nnef] " + origin + ": " + what);
  };
  if (bytes.size() < kHeaderBytes)
    fail("expected a tensor file of at least 128 bytes (the header), got " + std::to_string(bytes.size()));
  if (uint8_t(bytes[0]) != 0x4E || uint8_t(bytes[1]) != 0xEF)
    fail("expected the magic number 4E EF, got a file that is not an NNEF tensor");
  const unsigned major = unsigned(bytes[2]), minor = unsigned(bytes[3]);
  if (major != 1 || minor != 0)
    fail("expected version 1.0, got " + std::to_string(major) + "." + std::to_string(minor));
  const uint32_t data_length = u32(bytes, 4), rank = u32(bytes, 8);
  if (rank > kMaxRank) fail("expected a rank of at most 8, got " + std::to_string(rank));
  Shape shape;
  uint64_t count = 1;
  for (uint32_t i = 0; i < rank; ++i) {
    const uint32_t e = u32(bytes, 12 + 4 * size_t(i));
    shape.push_back(int64_t(e));
    count *= e;
    if (count > kMaxItems) fail("expected at most 2^32 items, got extents beyond that");
  }
  NnefTensor t;
  t.bits = u32(bytes, 44);
  t.item_type = u32(bytes, 48);
  // Files of the first 1.0 tools mark signed integers as unsigned with a non-zero first reserved word.
  if (t.item_type == NnefTensor::Uint && u32(bytes, 52) != 0) t.item_type = NnefTensor::Int;
  const uint32_t bits = t.bits;
  switch (t.item_type) {
    case NnefTensor::Float:
      if (bits != 16 && bits != 32 && bits != 64)
        fail("expected 16, 32 or 64 bits per float item, got " + std::to_string(bits));
      break;
    case NnefTensor::Uint:
    case NnefTensor::Int:
    case NnefTensor::Quint:
    case NnefTensor::Qint:
      if (bits != 8 && bits != 16 && bits != 32 && bits != 64)
        fail("expected 8, 16, 32 or 64 bits per integer item, got " + std::to_string(bits));
      break;
    case NnefTensor::Bool:
      if (bits != 1 && bits != 8) fail("expected 1 or 8 bits per logical item, got " + std::to_string(bits));
      break;
    default: fail("expected an item type code 0..5, got " + std::to_string(t.item_type));
  }
  const uint64_t expected = (count * bits + 7) / 8;
  if (data_length != expected)
    fail("expected a data length of " + std::to_string(expected) + " bytes for " + std::to_string(count) +
         " items of " + std::to_string(bits) + " bits, got " + std::to_string(data_length));
  if (bytes.size() != kHeaderBytes + uint64_t(data_length))
    fail("expected " + std::to_string(kHeaderBytes + uint64_t(data_length)) +
         " bytes (header and data), got " + std::to_string(bytes.size()));
  const std::byte* d = bytes.data() + kHeaderBytes;
  t.value = HostTensor(shape);
  std::vector<double>& out = t.value.data;
  const bool is_signed = t.item_type == NnefTensor::Int || t.item_type == NnefTensor::Qint;
  for (size_t i = 0; i < size_t(count); ++i) {
    double v = 0;
    if (t.item_type == NnefTensor::Float) {
      v = bits == 16   ? double(quant::f16_to_f32(load<uint16_t>(d + 2 * i)))
          : bits == 32 ? double(load<float>(d + 4 * i))
                       : load<double>(d + 8 * i);
    } else if (t.item_type == NnefTensor::Bool) {
      v = bits == 1 ? double((uint8_t(d[i / 8]) >> (7 - i % 8)) & 1) : double(uint8_t(d[i]) != 0);
    } else {
      switch (bits) {
        case 8: v = is_signed ? double(load<int8_t>(d + i)) : double(load<uint8_t>(d + i)); break;
        case 16: v = is_signed ? double(load<int16_t>(d + 2 * i)) : double(load<uint16_t>(d + 2 * i)); break;
        case 32: v = is_signed ? double(load<int32_t>(d + 4 * i)) : double(load<uint32_t>(d + 4 * i)); break;
        default: v = is_signed ? double(load<int64_t>(d + 8 * i)) : double(load<uint64_t>(d + 8 * i)); break;
      }
    }
    out[i] = v;
  }
  return t;
}

NnefTensor read_nnef_tensor(const std::string& path) {
  MappedFile file(path);
  return read_nnef_tensor_bytes(file.bytes(), path);
}

}  // namespace meganeura
