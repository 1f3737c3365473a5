// Host conversions of storage dtypes against IEEE 754 binary16 values from the standard's tables and bfloat16
// as the upper half of binary32.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "meganeura/ir/storage.hpp"

using namespace meganeura;

TEST(Storage, HalfBitsOfKnownValues) {
  EXPECT_EQ(f32_to_f16_bits(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16_bits(-2.0f), 0xC000);
  EXPECT_EQ(f32_to_f16_bits(65504.0f), 0x7BFF);               // largest finite
  EXPECT_EQ(f32_to_f16_bits(65519.0f), 0x7BFF);               // below the midpoint to infinity
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7C00);               // the midpoint rounds (to even) to infinity
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -25)), 0x0000);  // half of it: a tie, to even (zero)
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 subnormal units: a tie, to even (2)
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(f32_to_f16_bits(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie between 1 and 1+2^-10: even
  EXPECT_EQ(f32_to_f16_bits(1.0f + std::ldexp(3.0f, -11)), 0x3C02);  // tie between 1+2^-10 and 1+2^-9: even
  EXPECT_EQ(f32_to_f16_bits(0.333333343f), 0x3555);
  EXPECT_EQ(f32_to_f16_bits(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_EQ(f32_to_f16_bits(std::nanf("")) & 0x7C00, 0x7C00);
  EXPECT_NE(f32_to_f16_bits(std::nanf("")) & 0x03FF, 0);
  for (uint32_t h = 0; h < 0x10000; ++h) {  // every non-NaN half survives the round trip
    if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) continue;
    ASSERT_EQ(f32_to_f16_bits(f16_bits_to_f32(uint16_t(h))), h) << std::hex << h;
  }
  EXPECT_EQ(f16_bits_to_f32(0x3555), 0.333251953125f);
  EXPECT_EQ(f16_bits_to_f32(0x8001), -std::ldexp(1.0f, -24));
}

TEST(Storage, BfloatBitsOfKnownValues) {
  EXPECT_EQ(f32_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16_bits(-2.0f), 0xC000);
  EXPECT_EQ(f32_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // tie: to even
  EXPECT_EQ(f32_to_bf16_bits(1.0f + std::ldexp(3.0f, -8)), 0x3F82);  // tie: to even
  EXPECT_EQ(f32_to_bf16_bits(3.0e38f), 0x7F62);
  EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::max()),
            0x7F80);  // rounds past the largest: infinity
  EXPECT_EQ(bf16_bits_to_f32(0x3F80), 1.0f);
  EXPECT_NE(f32_to_bf16_bits(std::nanf("")) & 0x007F, 0);  // NaN stays NaN
  EXPECT_EQ(dtype_round(1.0 + std::ldexp(1.0, -9), DType::BF16), 1.0);
  EXPECT_EQ(dtype_round(65520.0, DType::F16), INFINITY);
}

TEST(Storage, BytesRoundTripThroughEachDtype) {
  const std::vector<float> v = {2.0f, -3.0f, 7.0f, 1024.0f};  // exact in every dtype
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::U32}) {
    const std::vector<std::byte> b = to_storage(v, t);
    ASSERT_EQ(b.size(), v.size() * dtype_size(t));
    const std::vector<float> back = from_storage(b.data(), v.size(), t);
    for (size_t i = 0; i < v.size(); ++i)
      EXPECT_EQ(back[i], t == DType::U32 && v[i] < 0 ? 4294967296.0f + v[i] : v[i])
          << dtype_name(t) << " " << i;
  }
}

// Reference i32 values are exact f64 integers and may leave int64's range (the fuzzer's gather index
// 2.77e25); converting those with a cast is undefined behaviour, so they go through these.
TEST(Storage, IntegerValuesOutsideInt64AreNotCast) {
  EXPECT_EQ(exact_int64(-3.0), std::optional<int64_t>(-3));
  EXPECT_EQ(exact_int64(-9223372036854775808.0), std::optional<int64_t>(INT64_MIN));
  EXPECT_EQ(exact_int64(9223372036854775808.0), std::nullopt);  // 2^63
  EXPECT_EQ(exact_int64(2.77312e25), std::nullopt);
  EXPECT_EQ(exact_int64(0.5), std::nullopt);
  EXPECT_EQ(exact_int64(NAN), std::nullopt);
  EXPECT_EQ(exact_int64(-INFINITY), std::nullopt);
  EXPECT_EQ(i32_bits(-1.0), 0xffffffffu);
  EXPECT_EQ(i32_bits(4294967296.0 + 5.0), 5u);
  EXPECT_EQ(i32_bits(-4294967296.0 * 3 - 2.0), 0xfffffffeu);
  EXPECT_EQ(i32_bits(2.0 * 9223372036854775808.0), 0u);  // 2^64: a multiple of 2^32
  EXPECT_EQ(i32_bits(NAN), 0u);
}
