// Dequantizers: one function per block type, each the one-line formula of blocks.hpp written out. The order
// of f32 operations is the formula's (no fma: the build is ISO C++, where GCC does not contract), so the
// results are bit-exact against gguf-py's numpy code.
#include <cstring>

#include "meganeura/core/error.hpp"
#include "meganeura/quant/half.hpp"
#include "meganeura/quant/quant.hpp"

namespace meganeura::quant {
namespace {

template <class Block>
Block load(const uint8_t* p) {
  Block b;
  std::memcpy(&b, p, sizeof b);  // tensor data need not be aligned for the block's u16 fields
  return b;
}

void q4_0(const uint8_t* p, float* y) {
  const auto b = load<BlockQ4_0>(p);
  const float d = f16_to_f32(b.d);
  for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>(((b.qs[i % 16] >> (4 * (i / 16))) & 15) - 8);
}

void q4_1(const uint8_t* p, float* y) {
  const auto b = load<BlockQ4_1>(p);
  const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>((b.qs[i % 16] >> (4 * (i / 16))) & 15) + m;
}

uint32_t u32_le(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void q5_0(const uint8_t* p, float* y) {
  const auto b = load<BlockQ5_0>(p);
  const float d = f16_to_f32(b.d);
  const uint32_t qh = u32_le(b.qh);
  for (int i = 0; i < 32; ++i) {
    const int q = static_cast<int>(((b.qs[i % 16] >> (4 * (i / 16))) & 15) | (((qh >> i) & 1) << 4));
    y[i] = d * static_cast<float>(q - 16);
  }
}

void q5_1(const uint8_t* p, float* y) {
  const auto b = load<BlockQ5_1>(p);
  const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  const uint32_t qh = u32_le(b.qh);
  for (int i = 0; i < 32; ++i) {
    const uint32_t q = ((b.qs[i % 16] >> (4 * (i / 16))) & 15) | (((qh >> i) & 1) << 4);
    y[i] = d * static_cast<float>(q) + m;
  }
}

void q8_0(const uint8_t* p, float* y) {
  const auto b = load<BlockQ8_0>(p);
  const float d = f16_to_f32(b.d);
  for (int i = 0; i < 32; ++i) y[i] = static_cast<float>(b.qs[i]) * d;
}

// Q4_K and Q5_K share everything but the fifth bit.
template <class Block, bool kFifthBit>
void qk_4_5(const uint8_t* p, float* y) {
  const auto b = load<Block>(p);
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    k_scale_min(b.scales, j, sc, mn);
    const float dj = d * static_cast<float>(sc), mj = dmin * static_cast<float>(mn);
    for (int l = 0; l < 32; ++l) {
      uint32_t q = (b.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
      if constexpr (kFifthBit) q |= ((b.qh[l] >> j) & 1u) << 4;
      y[32 * j + l] = dj * static_cast<float>(q) - mj;
    }
  }
}

void q6_k(const uint8_t* p, float* y) {
  const auto b = load<BlockQ6_K>(p);
  const float d = f16_to_f32(b.d);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, t = (i % 128) / 32, l = i % 32;
    const int q = ((b.ql[64 * h + 32 * (t % 2) + l] >> (4 * (t / 2))) & 15) |
                  (((b.qh[32 * h + l] >> (2 * t)) & 3) << 4);
    y[i] = (d * static_cast<float>(b.scales[i / 16])) * static_cast<float>(q - 32);
  }
}

void f32(const uint8_t* p, float* y) { std::memcpy(y, p, 4); }
void f16(const uint8_t* p, float* y) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  *y = f16_to_f32(h);
}
void bf16(const uint8_t* p, float* y) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  *y = bf16_to_f32(h);
}

using BlockFn = void (*)(const uint8_t*, float*);

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
    case Type::Q4_K: return qk_4_5<BlockQ4_K, false>;
    case Type::Q5_K: return qk_4_5<BlockQ5_K, true>;
    case Type::Q6_K: return q6_k;
  }
  return nullptr;
}

}  // namespace

size_t bytes_for(Type t, size_t elements) {
  const TypeInfo& ti = info(t);
  if (elements % ti.block_elems != 0)
    throw ShapeError(std::string("[quant::bytes_for] expected a multiple of ") +
                     std::to_string(ti.block_elems) + " elements for " + ti.name + ", got " +
                     std::to_string(elements));
  return elements / ti.block_elems * ti.block_bytes;
}

void dequantize(Type t, std::span<const uint8_t> bytes, std::span<float> out) {
  const TypeInfo& ti = info(t);
  const size_t want = bytes_for(t, out.size());
  if (bytes.size() != want)
    throw FormatError(std::string("[quant::dequantize] expected ") + std::to_string(want) + " bytes for " +
                      std::to_string(out.size()) + " " + ti.name + " values, got " +
                      std::to_string(bytes.size()));
  const BlockFn fn = block_fn(t);
  const size_t blocks = out.size() / ti.block_elems;
  for (size_t b = 0; b < blocks; ++b) fn(bytes.data() + b * ti.block_bytes, out.data() + b * ti.block_elems);
}

std::vector<float> dequantize(Type t, std::span<const uint8_t> bytes) {
  const TypeInfo& ti = info(t);
  if (bytes.size() % ti.block_bytes != 0)
    throw FormatError(std::string("[quant::dequantize] expected whole ") + ti.name + " blocks of " +
                      std::to_string(ti.block_bytes) + " bytes, got " + std::to_string(bytes.size()) +
                      " bytes");
  std::vector<float> out(bytes.size() / ti.block_bytes * ti.block_elems);
  dequantize(t, bytes, out);
  return out;
}

}  // namespace meganeura::quant
