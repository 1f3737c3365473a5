#include "meganeura/ir/number_format.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>
#include <limits>

namespace meganeura {

namespace {

// name, bits, exponent, mantissa, bias, min exponent, max finite, signed, subnormals, inf, NaN, -0, zero
constexpr FormatInfo kFormats[] = {
    {"float8_e4m3fn", 8, 4, 3, 7, -6, 448.0, true, true, false, NanCode::AllOnes, true, true},
    {"float8_e4m3fnuz", 8, 4, 3, 8, -7, 240.0, true, true, false, NanCode::NegZero, false, true},
    {"float8_e5m2", 8, 5, 2, 15, -14, 57344.0, true, true, true, NanCode::Ieee, true, true},
    {"float8_e5m2fnuz", 8, 5, 2, 16, -15, 57344.0, true, true, false, NanCode::NegZero, false, true},
    {"float4_e2m1fn", 4, 2, 1, 1, 0, 6.0, true, true, false, NanCode::None, true, true},
    {"float8_e8m0fnu", 8, 8, 0, 127, -127, 0x1p127, false, false, false, NanCode::AllBits, false, false},
    {"float6_e2m3fn", 6, 2, 3, 1, 0, 7.5, true, true, false, NanCode::None, true, true},
    {"float6_e3m2fn", 6, 3, 2, 3, -2, 28.0, true, true, false, NanCode::None, true, true},
};
static_assert(std::size(kFormats) == size_t(NumberFormat::Count_), "one row per NumberFormat");

// Round-to-nearest-even of a non-negative double, independent of the floating-point environment.
double round_half_even(double s) {
  const double f = std::floor(s), d = s - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return std::fmod(f, 2.0) == 0.0 ? f : f + 1;
}

}  // namespace

const FormatInfo& format_info(NumberFormat f) { return kFormats[size_t(f) % size_t(NumberFormat::Count_)]; }

double format_min_positive(NumberFormat f) {
  const FormatInfo& i = format_info(f);
  return std::ldexp(1.0, i.min_exponent - i.mantissa_bits);
}

double decode_format(uint32_t code, NumberFormat f) {
  const FormatInfo& i = format_info(f);
  code &= (1u << i.bits) - 1u;
  const int magnitude_bits = i.bits - (i.is_signed ? 1 : 0);
  const uint32_t sign_bit = i.is_signed ? 1u << magnitude_bits : 0u;
  const uint32_t mag = code & ((1u << magnitude_bits) - 1u);
  const bool negative = (code & sign_bit) != 0;
  const uint32_t e = mag >> i.mantissa_bits, m = mag & ((1u << i.mantissa_bits) - 1u);
  const uint32_t e_ones = (1u << i.exponent_bits) - 1u;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  switch (i.nan) {
    case NanCode::None: break;
    case NanCode::AllOnes:
      if (mag == (1u << magnitude_bits) - 1u) return negative ? -nan : nan;
      break;
    case NanCode::Ieee:
      if (e == e_ones) {
        if (m != 0) return negative ? -nan : nan;
        return negative ? -HUGE_VAL : HUGE_VAL;
      }
      break;
    case NanCode::NegZero:
      if (code == sign_bit) return nan;
      break;
    case NanCode::AllBits:
      if (code == (1u << i.bits) - 1u) return nan;
      break;
  }
  const double v = i.has_subnormals && e == 0
                       ? std::ldexp(double(m), 1 - i.bias - i.mantissa_bits)
                       : std::ldexp(double((1u << i.mantissa_bits) + m), int(e) - i.bias - i.mantissa_bits);
  return negative ? -v : v;
}

// The GLSL twin of this function is generated from the same table (ops/elementwise.cpp,
// round_to_format_glsl); it follows the same steps in f32, which are exact: scaling by powers of two,
// rounding to an integer, and a product of at most 5 significant bits.
float round_to_format(float x, NumberFormat f, bool saturate, FormatRounding rounding) {
  const FormatInfo& i = format_info(f);
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const bool negative = i.is_signed && (bits >> 31) != 0;
  const bool signed_nan = i.nan == NanCode::AllOnes || i.nan == NanCode::Ieee;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float signed_nan_value = signed_nan && (bits >> 31) != 0 ? -nan : nan;
  if (std::isnan(x)) return i.nan == NanCode::None ? 0.0f : signed_nan_value;
  double r = HUGE_VAL;  // ±Inf: an overflow
  double n = 1;
  if (!std::isinf(x)) {
    const double a = std::fabs(double(x));
    // The quantum at x's exponent (at least the smallest normal exponent, below which the step is fixed).
    const int e = std::max(int((bits >> 23) & 0xFFu) - 127, i.min_exponent);
    const double s = std::ldexp(a, i.mantissa_bits - e);
    n = rounding == FormatRounding::NearestEven ? round_half_even(s)
        : rounding == FormatRounding::Up        ? std::ceil(s)
                                                : std::floor(s);
    r = std::ldexp(n, e - i.mantissa_bits);
  }
  if (r > i.max_finite) {
    if (saturate || (!i.has_inf && i.nan == NanCode::None))
      r = i.max_finite;
    else if (i.has_inf)
      r = HUGE_VAL;
    else
      return signed_nan_value;
  }
  if (n == 0) {
    if (!i.has_zero) return saturate ? float(format_min_positive(f)) : nan;
    return negative && i.negative_zero ? -0.0f : 0.0f;
  }
  return float(negative ? -r : r);
}

}  // namespace meganeura
