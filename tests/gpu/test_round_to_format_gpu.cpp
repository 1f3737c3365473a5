// round_to_format's GLSL (generated from ir/number_format's table, ops/elementwise.cpp) against its CPU
// reference, bit for bit, for every format, saturation and rounding mode, over every code's value and its
// negation, the halfway points between neighbours and the f32 values next to them, overflow, ±0, ±Inf, NaNs
// and random f32 values. The CPU reference is itself checked against ml_dtypes and onnx
// (tests/oracle/test_number_format.cpp).
//
// One allowance: Vulkan lets a device flush f32 subnormals to zero, so for an f32-subnormal x the GPU may
// return what the reference gives for ±0 (the only difference it makes, to E8M0 rounding up without
// saturation; counted and printed).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "gpu_opcheck.hpp"

namespace meganeura {
namespace {

class RoundToFormatGpu : public test::GpuTest {};

std::vector<float> inputs_for(NumberFormat f) {
  std::set<double> finite;
  for (uint32_t c = 0; c < (1u << format_info(f).bits); ++c) {
    const double v = decode_format(c, f);
    if (std::isfinite(v)) finite.insert(std::fabs(v));
  }
  std::vector<double> xs(finite.begin(), finite.end());
  const std::vector<double> values = xs;
  for (size_t k = 0; k + 1 < values.size(); ++k) xs.push_back((values[k] + values[k + 1]) / 2);
  const double max = values.back(), step = max - values[values.size() - 2];
  for (double v :
       {max + step / 2, max + step, 2 * max, 1e6, 3.4e38, values[1] / 2, values[1] / 4, 1e-30, 1e-40})
    xs.push_back(v);
  std::vector<float> out;
  for (double v : xs) {
    const float x = float(v);
    if (!std::isfinite(x)) continue;
    for (float y : {x, std::nextafter(x, HUGE_VALF), std::nextafter(x, -HUGE_VALF)}) {
      out.push_back(y);
      out.push_back(-y);
    }
  }
  for (uint32_t b :
       {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0x00000001u, 0x80400000u})
    out.push_back(std::bit_cast<float>(b));
  std::mt19937 rng(25 + unsigned(f));
  std::uniform_real_distribution<double> e(std::log2(values[1]) - 4, std::log2(max) + 4);
  for (int k = 0; k < 2000; ++k) out.push_back(float(std::exp2(e(rng)) * (k % 2 ? -1 : 1)));
  for (int k = 0; k < 500; ++k) out.push_back(std::bit_cast<float>(uint32_t(rng())));
  return out;
}

std::string hex(float v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08X", std::bit_cast<uint32_t>(v));
  return b;
}

TEST_F(RoundToFormatGpu, GlslEqualsTheCpuReferenceBitForBit) {
  size_t compared = 0, flushed = 0;
  for (int fi = 0; fi < int(NumberFormat::Count_); ++fi) {
    const NumberFormat f = NumberFormat(fi);
    const std::vector<float> xs = inputs_for(f);
    const int64_t n = int64_t(xs.size());
    for (bool saturate : {false, true}) {
      std::vector<FormatRounding> modes = {FormatRounding::NearestEven};
      if (f == NumberFormat::F8E8M0)
        modes = {FormatRounding::NearestEven, FormatRounding::Up, FormatRounding::Down};
      for (FormatRounding r : modes) {
        Graph g;
        NodeId x = g.input("x", {n});
        g.set_outputs({g.round_to_format(x, f, saturate, r)});
        Session s = test::build_gpu(g, false);
        s.set_input("x", xs);
        s.run();
        const std::vector<float> got = s.read_output(0);
        ASSERT_EQ(got.size(), xs.size());
        int bad = 0;
        for (size_t k = 0; k < xs.size(); ++k) {
          const float want = round_to_format(xs[k], f, saturate, r);
          ++compared;
          if (std::bit_cast<uint32_t>(got[k]) == std::bit_cast<uint32_t>(want)) continue;
          const bool subnormal = xs[k] != 0 && std::fabs(xs[k]) < 0x1p-126f;
          const float as_zero = round_to_format(std::copysign(0.0f, xs[k]), f, saturate, r);
          if (subnormal && std::bit_cast<uint32_t>(got[k]) == std::bit_cast<uint32_t>(as_zero)) {
            ++flushed;
            continue;
          }
          if (bad++ < 8)
            ADD_FAILURE() << format_info(f).name << (saturate ? " saturate" : "") << " rounding " << int(r)
                          << ": x = " << xs[k] << " (" << hex(xs[k]) << "): gpu " << got[k] << " ("
                          << hex(got[k]) << "), cpu " << want << " (" << hex(want) << ")";
        }
      }
    }
  }
  std::printf("[round_to_format] %zu values compared, %zu f32-subnormal inputs read as zero by the device\n",
              compared, flushed);
  EXPECT_GT(compared, 50000u);
}

}  // namespace
}  // namespace meganeura
