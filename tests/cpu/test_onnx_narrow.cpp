// Narrow ONNX tensor types, device-free: float8, float6, float4, E8M0 and the 4- and 2-bit integers decoded
// from raw_data (packed LSB first) and int32_data, a wrong byte or entry count as a FormatError naming the
// tensor and the field, and Cast to and from them lowered to round_to_format (and the integer wrap) and
// evaluated by the reference interpreter. Expected values are written out by hand from the formats'
// definitions (onnx.proto, the OCP MX and float8 papers), not computed by the code under test.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "meganeura/onnx/onnx.hpp"
#include "meganeura/reference/interpreter.hpp"
#include "onnx_writer.hpp"

namespace meganeura {
namespace {

using namespace test::onnx_writer;

constexpr int kFloat = 1, kInt32 = 6, kE4M3FN = 17, kE4M3FNUZ = 18, kE5M2 = 19, kE5M2FNUZ = 20, kUint4 = 21,
              kInt4 = 22, kFloat4 = 23, kE8M0 = 24, kUint2 = 25, kInt2 = 26, kFloat6E2M3 = 27,
              kFloat6E3M2 = 28;

std::string bytes(std::vector<int> v) {
  std::string s;
  for (int b : v) s += char(b);
  return s;
}

std::vector<double> decode(const std::string& tensor) {
  return read_onnx_tensor_bytes(as_bytes(tensor), "t.pb").value.data;
}

// Element-wise equality with NaN equal to NaN and the sign of zero compared (integers: not compared, the
// reference's truncation keeps a -0 that an integer does not have).
void expect_values(const std::vector<double>& got, const std::vector<double>& want, const std::string& what,
                   bool zero_sign = true) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << "[" << i << "]: " << got[i];
      continue;
    }
    EXPECT_EQ(got[i], want[i]) << what << "[" << i << "]";
    if (zero_sign)
      EXPECT_EQ(std::signbit(got[i]), std::signbit(want[i])) << what << "[" << i << "]: sign of " << got[i];
  }
}

const double nan = std::nan("");

TEST(OnnxNarrow, FourBitValuesArePackedLowNibbleFirstWithAnOddCount) {
  // five values in three bytes; the last byte's high nibble is padding
  const std::string raw = bytes({0x21, 0xF8, 0xA7});
  expect_values(decode(tensor_raw("i4", {5}, kInt4, raw)), {1, 2, -8, -1, 7}, "int4", false);
  expect_values(decode(tensor_raw("u4", {5}, kUint4, raw)), {1, 2, 8, 15, 7}, "uint4", false);
  // float4 e2m1: codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign
  expect_values(decode(tensor_raw("f4", {5}, kFloat4, bytes({0x72, 0x8F, 0x01}))), {1, 6, -6, -0.0, 0.5},
                "float4e2m1");
}

TEST(OnnxNarrow, TwoBitValuesPackFourAByte) {
  // codes 0,1,2,3 | 1,0,3: x0 | x1 << 2 | x2 << 4 | x3 << 6
  const std::string raw = bytes({0xE4, 0x31});
  expect_values(decode(tensor_raw("i2", {7}, kInt2, raw)), {0, 1, -2, -1, 1, 0, -1}, "int2", false);
  expect_values(decode(tensor_raw("u2", {7}, kUint2, raw)), {0, 1, 2, 3, 1, 0, 3}, "uint2");
}

TEST(OnnxNarrow, SixBitValuesAreABitStreamFourInThreeBytes) {
  // float6 e2m3 codes 8 (1.0), 16 (2.0), 9 (1.125), 63 (-7.5), then 1 (0.125, subnormal) in a fourth byte:
  // byte0 = x0 | (x1 & 3) << 6, byte1 = x1 >> 2 | (x2 & 15) << 4, byte2 = x2 >> 4 | x3 << 2
  expect_values(decode(tensor_raw("f6", {5}, kFloat6E2M3, bytes({0x08, 0x94, 0xFC, 0x01}))),
                {1.0, 2.0, 1.125, -7.5, 0.125}, "float6e2m3");
  // float6 e3m2 (sign, 3 exponent bits, 2 mantissa bits): 0b001100 = 2^(3-3) = 1, 0b111111 = -(2^4 * 1.75)
  expect_values(decode(tensor_raw("f6", {2}, kFloat6E3M2, bytes({0xCC, 0x0F}))), {1.0, -28.0}, "float6e3m2");
}

TEST(OnnxNarrow, Float8AndE8M0CodesDecodeToTheirValues) {
  expect_values(decode(tensor_raw("a", {6}, kE4M3FN, bytes({0x38, 0x7E, 0x7F, 0xFF, 0x01, 0x80}))),
                {1.0, 448.0, nan, nan, 0x1p-9, -0.0}, "e4m3fn");
  expect_values(decode(tensor_raw("b", {4}, kE4M3FNUZ, bytes({0x40, 0x7F, 0x80, 0x00}))),
                {1.0, 240.0, nan, 0.0}, "e4m3fnuz");
  expect_values(decode(tensor_raw("c", {5}, kE5M2, bytes({0x3C, 0x7B, 0x7C, 0xFC, 0x7D}))),
                {1.0, 57344.0, HUGE_VAL, -HUGE_VAL, nan}, "e5m2");
  expect_values(decode(tensor_raw("d", {3}, kE5M2FNUZ, bytes({0x40, 0x7F, 0x80}))), {1.0, 57344.0, nan},
                "e5m2fnuz");
  expect_values(decode(tensor_raw("e", {4}, kE8M0, bytes({0x7F, 0x00, 0xFE, 0xFF}))),
                {1.0, 0x1p-127, 0x1p127, nan}, "e8m0");
}

TEST(OnnxNarrow, Int32DataHoldsPackedBytesOrOneValueAnEntry) {
  expect_values(decode(tensor_int32("i4", {3}, kInt4, {0x21, 0x08})), {1, 2, -8}, "int4 int32_data", false);
  expect_values(decode(tensor_int32("i2", {5}, kInt2, {0xE4, 0x01})), {0, 1, -2, -1, 1}, "int2 int32_data",
                false);
  expect_values(decode(tensor_int32("f8", {2}, kE4M3FN, {0x38, 0xB8})), {1.0, -1.0}, "e4m3fn int32_data");
  expect_values(decode(tensor_int32("f6", {2}, kFloat6E2M3, {8, 63})), {1.0, -7.5}, "float6 int32_data");
}

// Every size mismatch is a FormatError naming the tensor and the field; none reads past the bytes.
TEST(OnnxNarrow, WrongSizesAreFormatErrorsNamingTensorAndField) {
  struct Bad {
    std::string tensor, want;
  };
  const std::vector<Bad> bad = {
      {tensor_raw("w", {5}, kInt4, bytes({0x21, 0x43})), "raw_data: expected 3 bytes of int4"},
      {tensor_raw("w", {5}, kInt4, bytes({1, 2, 3, 4})), "raw_data: expected 3 bytes of int4"},
      {tensor_raw("w", {7}, kUint2, bytes({1})), "raw_data: expected 2 bytes of uint2"},
      {tensor_raw("w", {5}, kFloat6E3M2, bytes({1, 2, 3})), "raw_data: expected 4 bytes of float6e3m2"},
      {tensor_raw("w", {3}, kE5M2, bytes({1, 2})), "raw_data: expected 3 bytes of float8e5m2"},
      {tensor_raw("w", {2}, kE8M0, bytes({1, 2, 3})), "raw_data: expected 2 bytes of float8e8m0"},
      {tensor_int32("w", {5}, kInt4, {1, 2}), "int32_data: expected 3 entries of int4"},
      {tensor_int32("w", {2}, kE4M3FN, {1, 2, 3}), "int32_data: expected 2 entries of float8e4m3fn"},
      {tensor_int32("w", {4}, kInt4, {1, 256}), "int32_data[1]: expected a value in [0, 255]"},
      {tensor_int32("w", {2}, kE4M3FNUZ, {-1, 0}), "int32_data[0]: expected a value in [0, 255]"},
      {tensor_int32("w", {2}, kFloat6E2M3, {1, 64}), "int32_data[1]: expected a value in [0, 63]"},
  };
  for (const Bad& b : bad) {
    // as a tensor file and as a model's initializer
    try {
      decode(b.tensor);
      ADD_FAILURE() << "expected a FormatError: " << b.want;
    } catch (const FormatError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("t.pb: tensor 'w'"), std::string::npos) << m;
      EXPECT_NE(m.find(b.want), std::string::npos) << m;
    }
    const std::string m1 =
        model({node("Relu", {"w"}, {"y"}, "act")}, {b.tensor}, {}, {value_info("y", 1, {"1"})});
    try {
      load_onnx_bytes(as_bytes(m1), "m.onnx", {});
      ADD_FAILURE() << "expected a FormatError: " << b.want;
    } catch (const FormatError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("m.onnx: initializer 'w'"), std::string::npos) << m;
      EXPECT_NE(m.find(b.want), std::string::npos) << m;
    }
  }
}

// One Cast node from a float input of `n` values to `to`, evaluated on the CPU.
std::vector<double> cast(int from, int to, const std::vector<double>& x,
                         std::vector<std::string> attrs = {}) {
  const std::string n = std::to_string(x.size());
  attrs.push_back(attr_int("to", to));
  const std::string bytes = model({node("Cast", {"x"}, {"y"}, "cast", attrs)}, {},
                                  {value_info("x", from, {n})}, {value_info("y", to, {n})}, 21);
  OnnxModel m = load_onnx_bytes(as_bytes(bytes), "cast.onnx", {});
  return reference::evaluate_outputs(m.graph, {{"x", HostTensor({int64_t(x.size())}, x)}})[0].data;
}

TEST(OnnxNarrow, CastToFloat8SaturatesOrNotAsOnnxSays) {
  // 0.3: between 0.28125 and 0.3125 (steps of 2^-5 in [0.25, 0.5)), nearer the latter; 500 > 448
  const std::vector<double> x = {0.3, 500, -HUGE_VAL, nan, -1e-9};
  expect_values(cast(kFloat, kE4M3FN, x), {0.3125, 448, -448, nan, -0.0}, "e4m3fn saturate");
  expect_values(cast(kFloat, kE4M3FN, x, {attr_int("saturate", 0)}), {0.3125, nan, nan, nan, -0.0},
                "e4m3fn no saturate");
  expect_values(cast(kFloat, kE5M2, x, {attr_int("saturate", 0)}), {0.3125, 512, -HUGE_VAL, nan, -0.0},
                "e5m2 no saturate");
  expect_values(cast(kFloat, kE5M2FNUZ, x), {0.3125, 512, -57344, nan, 0.0}, "e5m2fnuz saturate");
  // float4 has neither Inf nor NaN: always saturates; 0.3 is nearer 0.5 than 0
  expect_values(cast(kFloat, kFloat4, x), {0.5, 6, -6, 0, -0.0}, "float4e2m1");
}

TEST(OnnxNarrow, CastToE8M0RoundsByRoundMode) {
  const std::vector<double> x = {3.0, 5.0, 6.0, 0.0};
  expect_values(cast(kFloat, kE8M0, x), {4, 8, 8, 0x1p-127}, "e8m0 up (default)");
  expect_values(cast(kFloat, kE8M0, x, {attr_string("round_mode", "down")}), {2, 4, 4, 0x1p-127}, "down");
  expect_values(cast(kFloat, kE8M0, x, {attr_string("round_mode", "nearest"), attr_int("saturate", 0)}),
                {4, 4, 8, nan}, "nearest, no saturate");
}

TEST(OnnxNarrow, CastToFourAndTwoBitIntegers) {
  // from floats: truncation toward zero, out of range (undefined in ONNX) 0 as ml_dtypes gives
  expect_values(cast(kFloat, kInt4, {-9, -8.7, 7.9, 8, nan, -0.5}), {0, -8, 7, 0, 0, 0}, "int4", false);
  expect_values(cast(kFloat, kUint4, {-1, -0.5, 15.5, 16}), {0, 0, 15, 0}, "uint4", false);
  expect_values(cast(kFloat, kInt2, {-3, -2, 1.5, 2}), {0, -2, 1, 0}, "int2", false);
  // from integers: the high bits are discarded (two's complement)
  expect_values(cast(kInt32, kInt4, {200, -9, 15, -8}), {-8, 7, -1, -8}, "int32 -> int4", false);
  expect_values(cast(kInt32, kUint2, {5, -1, 4}), {1, 3, 0}, "int32 -> uint2", false);
}

TEST(OnnxNarrow, CastFromNarrowTypesIsPlain) {
  // a float8 input is an f32 input holding float8 values; to float it is the value itself
  expect_values(cast(kE4M3FN, kFloat, {0.3125, -448}), {0.3125, -448}, "e4m3fn -> float");
  expect_values(cast(kInt4, kFloat, {-8, 7}), {-8, 7}, "int4 -> float", false);
}

}  // namespace
}  // namespace meganeura
