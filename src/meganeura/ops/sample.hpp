#pragma once
// Token sampling (Op::Sample, Graph::sample): the layout of its per-row parameters and its random numbers.
// The draw is a pure function of (seed, step, row, token): a counter-based generator, so the CPU reference
// and the GPU kernel draw the same numbers, and one recorded step serves every step (seed and step are
// inputs). Only 32-bit integer operations, so GLSL computes the same bits (sample_glsl()).
#include <cstdint>

#include "meganeura/ops/dropout_hash.hpp"

namespace meganeura::ops {

// params f32 [B, kSampleParams]: what each row (sequence) samples with.
enum SampleParam : int {
  kTemperature = 0,  // <= 0: greedy (argmax of the penalised logits, ties to the lowest id)
  kTopK = 1,         // keep the k largest (ties at the k-th value kept); <= 0 or >= vocab: off
  kTopP = 2,         // keep the smallest top set whose probability reaches p (ties kept); >= 1: off
  kMinP = 3,         // keep tokens with probability >= min_p · the largest; <= 0: off
  kPenalty = 4,      // repetition penalty on tokens whose `seen` entry is > 0: logit < 0 ? logit·r : logit/r
  kSampleParams = 5,
};
// rng i32 [B, kSampleRng]: the seed's two 32-bit halves and the step (any integers; bits, not values, count).
enum SampleRng : int { kSeedLo = 0, kSeedHi = 1, kStep = 2, kSampleRng = 3 };

// The row's key from (seed, step, row): every input changes every bit of it.
constexpr uint32_t sample_key(uint32_t seed_lo, uint32_t seed_hi, uint32_t step, uint32_t row) {
  uint32_t h = dropout_mix(seed_lo ^ 0x9e3779b9U);
  h = dropout_mix(h ^ seed_hi ^ 0x85ebca6bU);
  h = dropout_mix(h ^ step ^ 0xc2b2ae35U);
  return dropout_mix(h ^ row ^ 0x27d4eb2fU);
}

// 23 random bits for `token` under a row key; the uniform draw is (bits + 0.5) / 2^23, in (0, 1) and exact in
// f32 (24 bits would round the largest draw to 1).
constexpr uint32_t sample_bits(uint32_t key, uint32_t token) {
  return dropout_mix(dropout_mix(token ^ key) ^ dropout_mix(key ^ 0x165667b1U)) >> 9;
}

// The same in GLSL: `uint mn_sample_key(uint, uint, uint, uint)` and `float mn_sample_u(uint key, uint
// token)`.
inline const char* sample_glsl() {
  return "uint mn_smix(uint x) { x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> "
         "16; "
         "return x; }\n"
         "uint mn_sample_key(uint lo, uint hi, uint step, uint row) { uint h = mn_smix(lo ^ 0x9e3779b9u); "
         "h = mn_smix(h ^ hi ^ 0x85ebca6bu); h = mn_smix(h ^ step ^ 0xc2b2ae35u); "
         "return mn_smix(h ^ row ^ 0x27d4eb2fu); }\n"
         "float mn_sample_u(uint key, uint token) { "
         "uint b = mn_smix(mn_smix(token ^ key) ^ mn_smix(key ^ 0x165667b1u)) >> 9; "
         "return (float(b) + 0.5) * (1.0 / 8388608.0); }\n";
}

}  // namespace meganeura::ops
