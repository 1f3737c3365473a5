// Quantizers. Q4_0 .. Q8_0 follow ggml's reference rounding step by step (gguf-py reproduces it in numpy, and
// the oracle test compares bytes). The K types use a direct construction: per sub-block the range is covered
// by rounding its scale (and minimum) *up* to the next multiple of the super-block's step, so no element is
// clamped and each lands within half a sub-block step.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "meganeura/core/error.hpp"
#include "meganeura/quant/half.hpp"
#include "meganeura/quant/quant.hpp"

namespace meganeura::quant {
namespace {

template <class Block>
void store(const Block& b, uint8_t* p) {
  std::memcpy(p, &b, sizeof b);
}

int clampi(int v, int lo, int hi) { return std::min(hi, std::max(lo, v)); }

// The value of largest magnitude (first one on ties, keeping its sign), as ggml and gguf-py pick it.
float signed_absmax(const float* x, int n) {
  float amax = std::fabs(x[0]), m = x[0];
  for (int i = 1; i < n; ++i)
    if (amax < std::fabs(x[i])) {
      amax = std::fabs(x[i]);
      m = x[i];
    }
  return m;
}

float inverse(float d) { return d == 0.0f ? 0.0f : 1.0f / d; }

// Symmetric 4/5-bit: d = max / -(2^(bits-1)), q = min(2^bits - 1, trunc(x / d + 2^(bits-1) + 0.5)).
template <int kBits>
void symmetric(const float* x, uint8_t* q, uint16_t& d16) {
  constexpr float half = static_cast<float>(1 << (kBits - 1));
  const float d = signed_absmax(x, 32) / -half;
  const float id = inverse(d);
  for (int i = 0; i < 32; ++i) {
    const float t = x[i] * id;
    const float v = t + (half + 0.5f);
    q[i] = static_cast<uint8_t>(std::min(static_cast<int>(std::trunc(v)), (1 << kBits) - 1));
  }
  d16 = f32_to_f16(d);
}

// Affine 4/5-bit: d = (max - min) / (2^bits - 1), q = trunc((x - min) / d + 0.5), stored minimum = min.
template <int kBits>
void affine(const float* x, uint8_t* q, uint16_t& d16, uint16_t& m16) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < 32; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  const float d = (hi - lo) / static_cast<float>((1 << kBits) - 1);
  const float id = inverse(d);
  for (int i = 0; i < 32; ++i) {
    const float t = (x[i] - lo) * id;
    const float v = t + 0.5f;
    q[i] = static_cast<uint8_t>(std::min(static_cast<int>(std::trunc(v)), (1 << kBits) - 1));
  }
  d16 = f32_to_f16(d);
  m16 = f32_to_f16(lo);
}

void pack_nibbles(const uint8_t* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 15) | ((q[j + 16] & 15) << 4));
}

void pack_fifth_bits(const uint8_t* q, uint8_t* qh) {
  uint32_t bits = 0;
  for (int i = 0; i < 32; ++i) bits |= static_cast<uint32_t>((q[i] >> 4) & 1) << i;
  std::memcpy(qh, &bits, 4);
}

void q4_0(const float* x, uint8_t* p) {
  BlockQ4_0 b{};
  uint8_t q[32];
  symmetric<4>(x, q, b.d);
  pack_nibbles(q, b.qs);
  store(b, p);
}

void q4_1(const float* x, uint8_t* p) {
  BlockQ4_1 b{};
  uint8_t q[32];
  affine<4>(x, q, b.d, b.m);
  pack_nibbles(q, b.qs);
  store(b, p);
}

void q5_0(const float* x, uint8_t* p) {
  BlockQ5_0 b{};
  uint8_t q[32];
  symmetric<5>(x, q, b.d);
  pack_nibbles(q, b.qs);
  pack_fifth_bits(q, b.qh);
  store(b, p);
}

void q5_1(const float* x, uint8_t* p) {
  BlockQ5_1 b{};
  uint8_t q[32];
  affine<5>(x, q, b.d, b.m);
  pack_nibbles(q, b.qs);
  pack_fifth_bits(q, b.qh);
  store(b, p);
}

void q8_0(const float* x, uint8_t* p) {
  BlockQ8_0 b{};
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = inverse(d);
  for (int i = 0; i < 32; ++i) b.qs[i] = static_cast<int8_t>(std::round(x[i] * id));  // half away from zero
  b.d = f32_to_f16(d);
  store(b, p);
}

// The smallest multiple k of `step` (k <= kmax) with k * step >= need; 0 when step is 0.
int steps_up(float need, float step, int kmax) {
  if (!(step > 0.0f)) return 0;
  return clampi(static_cast<int>(std::ceil(need / step)), 0, kmax);
}

// Q4_K / Q5_K: sub-block j stores y = D_j q - M_j with D_j = d * sc_j, M_j = dmin * mn_j (6-bit sc, mn).
template <class Block, int kBits>
void qk_4_5(const float* x, uint8_t* p) {
  constexpr int kLevels = (1 << kBits) - 1;
  Block b{};
  float lo[8], hi[8], mneed_max = 0.0f;
  for (int j = 0; j < 8; ++j) {
    lo[j] = 0.0f;  // the offset is subtracted, so a sub-block of positive values keeps M_j = 0
    hi[j] = x[32 * j];
    for (int l = 0; l < 32; ++l) {
      lo[j] = std::min(lo[j], x[32 * j + l]);
      hi[j] = std::max(hi[j], x[32 * j + l]);
    }
    mneed_max = std::max(mneed_max, -lo[j]);
  }
  b.dmin = f32_to_f16(mneed_max / 63.0f);
  const float dmin = f16_to_f32(b.dmin);
  uint8_t sc[8], mn[8];
  float M[8], dneed[8], dneed_max = 0.0f;
  for (int j = 0; j < 8; ++j) {
    mn[j] = static_cast<uint8_t>(steps_up(-lo[j], dmin, 63));
    M[j] = dmin * static_cast<float>(mn[j]);
    dneed[j] = std::max(0.0f, hi[j] + M[j]) / static_cast<float>(kLevels);
    dneed_max = std::max(dneed_max, dneed[j]);
  }
  b.d = f32_to_f16(dneed_max / 63.0f);
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < 8; ++j) sc[j] = static_cast<uint8_t>(steps_up(dneed[j], d, 63));
  for (int j = 0; j < 4; ++j) {
    b.scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    b.scales[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    b.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
  for (int j = 0; j < 8; ++j) {
    const float D = d * static_cast<float>(sc[j]);
    for (int l = 0; l < 32; ++l) {
      const int q =
          D > 0.0f ? clampi(static_cast<int>(std::floor((x[32 * j + l] + M[j]) / D + 0.5f)), 0, kLevels) : 0;
      b.qs[32 * (j / 2) + l] |= static_cast<uint8_t>((q & 15) << (4 * (j % 2)));
      if constexpr (kBits == 5) b.qh[l] |= static_cast<uint8_t>(((q >> 4) & 1) << j);
    }
  }
  store(b, p);
}

// Q6_K: sub-block j (16 values) stores y = D_j (q - 32) with D_j = d * scales[j]; |x| <= 31 D_j.
void q6_k(const float* x, uint8_t* p) {
  BlockQ6_K b{};
  float need[16], need_max = 0.0f;
  for (int j = 0; j < 16; ++j) {
    float a = 0.0f;
    for (int l = 0; l < 16; ++l) a = std::max(a, std::fabs(x[16 * j + l]));
    need[j] = a / 31.0f;
    need_max = std::max(need_max, need[j]);
  }
  b.d = f32_to_f16(need_max / 127.0f);
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(steps_up(need[j], d, 127));
  for (int i = 0; i < 256; ++i) {
    const float D = d * static_cast<float>(b.scales[i / 16]);
    const int q = (D > 0.0f ? clampi(static_cast<int>(std::floor(x[i] / D + 0.5f)), -32, 31) : 0) + 32;
    const int h = i / 128, t = (i % 128) / 32, l = i % 32;
    b.ql[64 * h + 32 * (t % 2) + l] |= static_cast<uint8_t>((q & 15) << (4 * (t / 2)));
    b.qh[32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * t));
  }
  store(b, p);
}

void f32(const float* x, uint8_t* p) { std::memcpy(p, x, 4); }
void f16(const float* x, uint8_t* p) {
  const uint16_t h = f32_to_f16(*x);
  std::memcpy(p, &h, 2);
}
void bf16(const float* x, uint8_t* p) {
  const uint16_t h = f32_to_bf16(*x);
  std::memcpy(p, &h, 2);
}

using BlockFn = void (*)(const float*, uint8_t*);

BlockFn block_fn(Type t) {
  switch (t) {
    case Type::F32: return f32;
    case Type::F16: return f16;
    case Type::BF16: return bf16;
    case Type::Q4_0: return q4_0;
    case Type::Q4_1: return q4_1;
    case Type::Q5_0: return q5_0;
    case Type::Q5_1: return q5_1;
    case Type::Q8_0: return q8_0;
    case Type::Q4_K: return qk_4_5<BlockQ4_K, 4>;
    case Type::Q5_K: return qk_4_5<BlockQ5_K, 5>;
    case Type::Q6_K: return q6_k;
  }
  return nullptr;
}

}  // namespace

std::vector<uint8_t> quantize(Type t, std::span<const float> values) {
  const TypeInfo& ti = info(t);
  std::vector<uint8_t> out(bytes_for(t, values.size()));
  const BlockFn fn = block_fn(t);
  const size_t blocks = values.size() / ti.block_elems;
  for (size_t b = 0; b < blocks; ++b) fn(values.data() + b * ti.block_elems, out.data() + b * ti.block_bytes);
  return out;
}

}  // namespace meganeura::quant
