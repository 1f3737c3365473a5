#include "meganeura/ir/storage.hpp"

#include <cmath>
#include <cstring>

#include "meganeura/core/error.hpp"
#include "meganeura/quant/quant.hpp"

namespace meganeura {

double dtype_round(double v, DType t) {
  switch (t) {
    case DType::F32: return v;
    case DType::I32: return std::trunc(v);
    case DType::U32: {
      double w = std::fmod(std::trunc(v), 4294967296.0);
      return w < 0 ? w + 4294967296.0 : w;
    }
    case DType::BF16:
    case DType::F16: {
      if (!std::isfinite(v) || v == 0.0) return v;
      const int mant = t == DType::BF16 ? 8 : 11;  // significand bits including the implicit one
      const int min_exp = t == DType::BF16 ? -126 : -14;
      const double max = t == DType::BF16 ? 3.3895313892515355e38 : 65504.0;
      int e;
      std::frexp(v, &e);                                    // v = m * 2^e, 0.5 <= |m| < 1
      const int q = std::max(e - 1, min_exp) - (mant - 1);  // quantum exponent (subnormals keep the minimum)
      const double r = std::ldexp(std::nearbyint(std::ldexp(v, -q)), q);
      return std::fabs(r) > max ? std::copysign(INFINITY, v) : r;
    }
    default: break;  // block-quantized: the value a block means is given (dequantized), not rounded here
  }
  return v;
}

std::optional<int64_t> exact_int64(double v) {
  // 2^63 is exact in f64; every double in [-2^63, 2^63) converts without overflow.
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0) || std::trunc(v) != v) return std::nullopt;
  return int64_t(v);
}

uint32_t i32_bits(double v) { return std::isfinite(v) ? uint32_t(dtype_round(v, DType::U32)) : 0; }

namespace {
uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

uint16_t f32_to_f16_bits(float f) {
  const uint32_t u = bits(f), sign = (u >> 16) & 0x8000u;
  if (std::isnan(f)) return uint16_t(sign | 0x7E00u);
  // dtype_round gives the exact f16 value (or infinity); its bits follow from exponent and significand.
  const double r = dtype_round(double(f), DType::F16);
  const double a = std::fabs(r);
  if (std::isinf(r)) return uint16_t(sign | 0x7C00u);
  if (a < 6.103515625e-05) return uint16_t(sign | uint32_t(a * 16777216.0));  // subnormal: multiples of 2^-24
  int e;
  const double m = std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  return uint16_t(sign | uint32_t(e - 1 + 15) << 10 | (uint32_t(m * 2048.0) & 0x3FFu));
}

float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, ex = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  if (ex == 0x1F) return from_bits(sign | 0x7F800000u | man << 13);
  const float a = ex == 0 ? std::ldexp(float(man), -24) : std::ldexp(float(man | 0x400u), int(ex) - 25);
  return sign ? -a : a;
}

uint16_t f32_to_bf16_bits(float f) {
  const uint32_t u = bits(f);
  if (std::isnan(f)) return uint16_t((u >> 16) | 0x40u);
  return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);  // ties to even; overflow carries into infinity
}

float bf16_bits_to_f32(uint16_t h) { return from_bits(uint32_t(h) << 16); }

quant::Type quant_type(DType t) {
  switch (t) {
    case DType::F32: return quant::Type::F32;
    case DType::F16: return quant::Type::F16;
    case DType::BF16: return quant::Type::BF16;
    case DType::Q4_0: return quant::Type::Q4_0;
    case DType::Q4_1: return quant::Type::Q4_1;
    case DType::Q5_0: return quant::Type::Q5_0;
    case DType::Q5_1: return quant::Type::Q5_1;
    case DType::Q8_0: return quant::Type::Q8_0;
    case DType::Q4_K: return quant::Type::Q4_K;
    case DType::Q5_K: return quant::Type::Q5_K;
    case DType::Q6_K: return quant::Type::Q6_K;
    default: break;
  }
  throw ConfigError(std::string("[quant_type] expected a float or block-quantized dtype, got ") +
                    dtype_name(t));
}

std::vector<std::byte> to_storage(std::span<const float> values, DType t) {
  if (is_quantized(t)) {
    const std::vector<uint8_t> q = quant::quantize(quant_type(t), values);
    const auto* p = reinterpret_cast<const std::byte*>(q.data());
    return std::vector<std::byte>(p, p + q.size());
  }
  std::vector<std::byte> out(values.size() * dtype_size(t));
  for (size_t i = 0; i < values.size(); ++i) {
    switch (t) {
      case DType::F32: std::memcpy(&out[i * 4], &values[i], 4); break;
      case DType::I32: {
        const int32_t v = int32_t(values[i]);
        std::memcpy(&out[i * 4], &v, 4);
        break;
      }
      case DType::U32: {
        const uint32_t v = uint32_t(int64_t(values[i]));  // negative values wrap, as an i32 would
        std::memcpy(&out[i * 4], &v, 4);
        break;
      }
      case DType::F16:
      case DType::BF16: {
        const uint16_t v = t == DType::F16 ? f32_to_f16_bits(values[i]) : f32_to_bf16_bits(values[i]);
        std::memcpy(&out[i * 2], &v, 2);
        break;
      }
      default: break;
    }
  }
  return out;
}

std::vector<float> from_storage(const void* bytes, size_t count, DType t) {
  std::vector<float> out(count);
  const auto* p = static_cast<const std::byte*>(bytes);
  if (is_quantized(t)) {
    quant::dequantize(quant_type(t),
                      std::span(reinterpret_cast<const uint8_t*>(p), storage_bytes(t, int64_t(count))), out);
    return out;
  }
  for (size_t i = 0; i < count; ++i) {
    switch (t) {
      case DType::F32: std::memcpy(&out[i], p + i * 4, 4); break;
      case DType::I32: {
        int32_t v;
        std::memcpy(&v, p + i * 4, 4);
        out[i] = float(v);
        break;
      }
      case DType::U32: {
        uint32_t v;
        std::memcpy(&v, p + i * 4, 4);
        out[i] = float(v);
        break;
      }
      case DType::F16:
      case DType::BF16: {
        uint16_t v;
        std::memcpy(&v, p + i * 2, 2);
        out[i] = t == DType::F16 ? f16_bits_to_f32(v) : bf16_bits_to_f32(v);
        break;
      }
      default: break;
    }
  }
  return out;
}

}  // namespace meganeura
