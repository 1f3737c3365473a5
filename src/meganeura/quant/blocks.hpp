#pragma once
// GGUF / ggml tensor storage types: the type table and the byte layout of every block. One header, shared by
// the CPU reference (quant.cpp), the GGUF reader and writer, and the GPU kernels that keep weights in block
// form and dequantize while loading. Layouts are little-endian; `f16` fields are IEEE binary16 bit patterns.
//
// Dequantization, one line per type, for element i of a block (integer ops on bytes, then f32 arithmetic in
// exactly this order: the CPU reference is bit-exact against PyPI gguf's `gguf.quants`, and a GLSL port that
// keeps the order and avoids fma matches it too):
//   F32   y = uintBitsToFloat(u32)
//   F16   y = unpackHalf(u16)
//   BF16  y = uintBitsToFloat(u32(u16) << 16)
//   Q8_0  y = float(qs[i]) * d                                          (qs signed, i < 32)
//   Q4_0  y = d * float(int((qs[i % 16] >> (4 * (i / 16))) & 15) - 8)
//   Q4_1  y = d * float((qs[i % 16] >> (4 * (i / 16))) & 15) + m
//   Q5_0  y = d * float(int(((qs[i % 16] >> (4 * (i / 16))) & 15) | (((qh >> i) & 1) << 4)) - 16)   (qh: u32)
//   Q5_1  y = d * float(((qs[i % 16] >> (4 * (i / 16))) & 15) | (((qh >> i) & 1) << 4)) + m
//   Q4_K  j = i / 32, l = i % 32; q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
//         y = (d * float(sc(j))) * float(q) - dmin * float(mn(j))        (sc, mn: k_scale_min below)
//   Q5_K  as Q4_K with q |= ((qh[l] >> j) & 1) << 4
//   Q6_K  h = i / 128, t = (i % 128) / 32, l = i % 32;
//         q = ((ql[64 * h + 32 * (t % 2) + l] >> (4 * (t / 2))) & 15) | (((qh[32 * h + l] >> (2 * t)) & 3) <<
//         4); y = (d * float(scales[i / 16])) * float(q - 32)                (scales signed)
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>

namespace meganeura::quant {

static_assert(std::endian::native == std::endian::little,
              "GGUF blocks are read in place on little-endian hosts");

// The ggml type ids as they appear in GGUF tensor infos.
enum class Type : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  BF16 = 30,
};

struct TypeInfo {
  Type type;
  const char* name;
  uint32_t block_elems;  // elements per block (1 for plain float types)
  uint32_t block_bytes;  // bytes per block
};

// Every supported type, in id order.
inline constexpr TypeInfo kTypes[] = {
    {Type::F32, "F32", 1, 4},       {Type::F16, "F16", 1, 2},       {Type::Q4_0, "Q4_0", 32, 18},
    {Type::Q4_1, "Q4_1", 32, 20},   {Type::Q5_0, "Q5_0", 32, 22},   {Type::Q5_1, "Q5_1", 32, 24},
    {Type::Q8_0, "Q8_0", 32, 34},   {Type::Q4_K, "Q4_K", 256, 144}, {Type::Q5_K, "Q5_K", 256, 176},
    {Type::Q6_K, "Q6_K", 256, 210}, {Type::BF16, "BF16", 1, 2},
};

inline constexpr uint32_t kQK = 32;     // elements of a Q4_0 .. Q8_0 block
inline constexpr uint32_t kQK_K = 256;  // elements of a K-quant super-block

struct BlockQ4_0 {
  uint16_t d;      // f16 scale
  uint8_t qs[16];  // element i: nibble (i / 16) of qs[i % 16], offset by 8
};
struct BlockQ4_1 {
  uint16_t d, m;   // f16 scale and minimum
  uint8_t qs[16];  // as Q4_0, unsigned
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];   // bit i: the fifth bit of element i (a little-endian u32)
  uint8_t qs[16];  // low four bits as Q4_0; the 5-bit value is offset by 16
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
// Eight sub-blocks of 32 with 6-bit scales and minima packed into 12 bytes (k_scale_min).
struct BlockQ4_K {
  uint16_t d, dmin;  // f16 super-block scales of the sub-block scales and minima
  uint8_t scales[12];
  uint8_t qs[128];  // sub-blocks 2k and 2k+1: low and high nibbles of qs[32k .. 32k+31]
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];  // bit j of qh[l]: the fifth bit of element l of sub-block j
  uint8_t qs[128];
};
// Sixteen sub-blocks of 16 with signed 8-bit scales; 6-bit values offset by 32.
struct BlockQ6_K {
  uint8_t ql[128];  // low four bits
  uint8_t qh[64];   // high two bits
  int8_t scales[16];
  uint16_t d;
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);
static_assert(offsetof(BlockQ6_K, d) == 208 && offsetof(BlockQ5_K, qs) == 48 && offsetof(BlockQ5_0, qs) == 6);

// Sub-block j (0..7) of a Q4_K / Q5_K block: its 6-bit scale and minimum. Bytes 0..3 hold scales 0..3 in
// their low six bits, bytes 4..7 minima 0..3; sub-blocks 4..7 take their low four bits from bytes 8..11
// (scale low nibble, minimum high nibble) and their top two bits from the top of bytes 0..3 (scales) and 4..7
// (minima).
inline void k_scale_min(const uint8_t* s, int j, uint8_t& sc, uint8_t& mn) {
  if (j < 4) {
    sc = s[j] & 63;
    mn = s[j + 4] & 63;
  } else {
    sc = static_cast<uint8_t>((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4));
    mn = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// The table row of a supported type id, or nullptr.
const TypeInfo* find_type(uint32_t id);
// The row of a supported type (always found).
const TypeInfo& info(Type t);
inline const char* name(Type t) { return info(t).name; }
// A name for any ggml type id, supported or not ("Q2_K", "IQ4_XS", "type 99"), for error messages.
std::string any_type_name(uint32_t id);
// "F32, F16, ..." for error messages.
std::string supported_type_names();

}  // namespace meganeura::quant
