#pragma once
// Narrow number formats: float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ), float6 and float4 (the OCP microscaling
// element types E2M3, E3M2, E2M1) and the E8M0 scale. One table holds the facts of each (bits, exponent
// bias, largest finite value, which special values it encodes); the ONNX tensor reader decodes with it, the
// CPU reference of the op round_to_format rounds with it, and that op's GLSL is generated from it
// (ops/elementwise.cpp), so the three cannot disagree about a format. Names follow ml_dtypes, the oracle of
// tests/oracle/test_number_format.cpp.
#include <cstdint>

namespace meganeura {

// The order is the value of round_to_format's format attribute; append only.
enum class NumberFormat : uint8_t {
  F8E4M3FN,
  F8E4M3FNUZ,
  F8E5M2,
  F8E5M2FNUZ,
  F4E2M1,
  F8E8M0,
  F6E2M3,
  F6E3M2,
  Count_
};

// Rounding to a format: to the nearest value, ties to even (ties upward for E8M0, whose one value between
// two powers of two has no mantissa bit to be even: ONNX's `nearest`); away from zero; toward zero. ONNX
// Cast rounds every format to nearest-even except E8M0, whose round_mode attribute picks one of the three.
enum class FormatRounding : uint8_t { NearestEven, Up, Down, Count_ };

// How a format encodes NaN.
enum class NanCode : uint8_t {
  None,     // no NaN (float4, float6)
  AllOnes,  // exponent and mantissa all ones, either sign (E4M3FN: 0x7F, 0xFF)
  Ieee,     // exponent all ones with a nonzero mantissa (E5M2); all ones with a zero mantissa is ±Inf
  NegZero,  // the pattern of negative zero, 0x80 (the FNUZ formats: no -0, one NaN)
  AllBits,  // every bit set, 0xFF (E8M0)
};

struct FormatInfo {
  const char* name;     // ml_dtypes' name: "float8_e4m3fn"
  int bits;             // width of one value
  int exponent_bits;    //
  int mantissa_bits;    //
  int bias;             // a normal value is 2^(e - bias) · 1.m
  int min_exponent;     // exponent of the smallest normal value: 1 - bias, or -bias without subnormals
  double max_finite;    // the largest finite value (the value a saturating cast clamps to)
  bool is_signed;       // has a sign bit (E8M0 has none)
  bool has_subnormals;  // exponent field 0 means 2^(1 - bias) · 0.m (E8M0: 2^-bias, no zero)
  bool has_inf;         // E5M2 only
  NanCode nan;          //
  bool negative_zero;   // has -0 (not the FNUZ formats, nor E8M0)
  bool has_zero;        // E8M0 has none
};

const FormatInfo& format_info(NumberFormat f);
// The smallest positive value: 2^(min_exponent - mantissa_bits) (E8M0: 2^-127).
double format_min_positive(NumberFormat f);

// The value of the `bits`-wide code (bits above the width are ignored): NaN, ±Inf, signed zeros included.
double decode_format(uint32_t code, NumberFormat f);

// x rounded to the nearest value of f (by `rounding`), returned as that value. The rules are ONNX Cast's
// (its tables for float8 and E8M0; the rounded value decides overflow, as its "[x] > FLT_MAX"):
// - NaN: NaN, keeping its sign where the format has signed NaNs (E4M3FN, E5M2); a format without NaN
//   (float4, float6) gives +0.
// - ±Inf, or a rounded magnitude above max_finite: ±max_finite when `saturate` (float4 and float6 always
//   saturate: they have neither Inf nor NaN); otherwise ±Inf for E5M2, NaN for the others (signed for
//   E4M3FN, as ONNX's table says -Inf -> -NaN).
// - A result of zero is -0 for a negative x where the format has -0, else +0; E8M0 has no zero, so a value
//   that rounds to 0 (x = 0, or below half its smallest value) is that smallest value 2^-127 when
//   `saturate`, else NaN.
// - E8M0 has no sign: a negative x is rounded by its magnitude (ONNX leaves it unspecified; its reference
//   implementation reads only the exponent bits, which does the same).
// Every result is an f32 value (2^-127, E8M0's smallest, is an f32 subnormal).
float round_to_format(float x, NumberFormat f, bool saturate, FormatRounding rounding);

}  // namespace meganeura
