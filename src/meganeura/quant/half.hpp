#pragma once
// Bit-exact conversions between f32 and the 16-bit float formats of GGUF, by integer arithmetic (no F16C, so
// the results do not depend on the host CPU or compiler flags).
#include <cstdint>
#include <cstring>

namespace meganeura::quant {

inline float bits_to_f32(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
inline uint32_t f32_to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Exact widening. Subnormals become normal f32; a NaN keeps its payload (shifted up), quiet or signalling.
inline uint32_t f16_bits_to_f32_bits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    if (man == 0) return sign;
    uint32_t e = 113;  // 127 - 15 + 1: the exponent of 2^-14 once the leading bit reaches bit 10
    while (!(man & 0x400u)) {
      man <<= 1;
      --e;
    }
    return sign | (e << 23) | ((man & 0x3ffu) << 13);
  }
  if (exp == 31) return sign | 0x7f800000u | (man << 13);
  return sign | ((exp + 112) << 23) | (man << 13);
}
inline float f16_to_f32(uint16_t h) { return bits_to_f32(f16_bits_to_f32_bits(h)); }

// Round to nearest, ties to even; overflow gives infinity, tiny values f16 subnormals or zero; a NaN stays a
// (quiet) NaN.
inline uint16_t f32_to_f16(float f) {
  const uint32_t b = f32_to_bits(f);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  const uint32_t a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a & 0x7fffffu) >> 13));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to infinity
  if (a < 0x38800000u) {                                               // below 2^-14: subnormal or zero
    if (a <= 0x33000000u) return sign;                                 // <= 2^-25 rounds to zero
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - (a >> 23);  // 14..24
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t h = (a >> 13) - (112u << 10);
  const uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;  // a carry into the exponent is the right answer
  return static_cast<uint16_t>(sign | h);
}

inline float bf16_to_f32(uint16_t h) { return bits_to_f32(static_cast<uint32_t>(h) << 16); }

// Round to nearest, ties to even; a NaN is made quiet (as ggml and gguf-py do).
inline uint16_t f32_to_bf16(float f) {
  uint32_t b = f32_to_bits(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((b >> 16) | 0x40u);
  const uint64_t r = (static_cast<uint64_t>(b) + 0x7fffu + ((b >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>(r);
}

}  // namespace meganeura::quant
