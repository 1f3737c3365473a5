#pragma once
// The dropout mask as a pure function of (seed, element index): a counter-based generator, so the CPU
// reference, the GPU kernel and the backward pass all draw the same mask without storing it.
// Only 32-bit integer operations, so a GLSL kernel can compute it bit-for-bit (see dropout_glsl()).
#include <cmath>
#include <cstdint>

namespace meganeura::ops {

// A 32-bit finaliser with good avalanche (Wellons' "lowbias32").
constexpr uint32_t dropout_mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

// 24 random bits for element `index` under `seed`.
constexpr uint32_t dropout_bits(uint64_t seed, uint32_t index) {
  const uint32_t k1 = dropout_mix(uint32_t(seed) ^ 0x9e3779b9U);
  const uint32_t k2 = dropout_mix(uint32_t(seed >> 32) ^ k1 ^ 0x85ebca6bU);
  return dropout_mix(dropout_mix(index ^ k1) ^ k2) >> 8;
}

// An element is kept when its 24 bits reach this threshold; comparing integers (not floats) keeps every
// backend's decision identical for any p.
inline uint32_t dropout_threshold(double p) { return uint32_t(std::ceil(p * 16777216.0)); }

inline bool dropout_keep(uint64_t seed, uint32_t index, double p) {
  return dropout_bits(seed, index) >= dropout_threshold(p);
}

// The same generator in GLSL: `bool mn_dropout_keep(uint k1, uint k2, uint index, uint threshold)` with
// k1/k2 from dropout_keys() passed as push constants.
inline const char* dropout_glsl() {
  return "uint mn_mix(uint x) { x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> "
         "16; "
         "return x; }\n"
         "bool mn_dropout_keep(uint k1, uint k2, uint index, uint threshold) { "
         "return (mn_mix(mn_mix(index ^ k1) ^ k2) >> 8) >= threshold; }\n";
}

struct DropoutKeys {
  uint32_t k1, k2;
};
constexpr DropoutKeys dropout_keys(uint64_t seed) {
  const uint32_t k1 = dropout_mix(uint32_t(seed) ^ 0x9e3779b9U);
  return {k1, dropout_mix(uint32_t(seed >> 32) ^ k1 ^ 0x85ebca6bU)};
}

}  // namespace meganeura::ops
