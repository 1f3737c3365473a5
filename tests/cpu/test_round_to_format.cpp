// The op round_to_format, device-free: its shape rule's refusals, the straight-through gradient, the GLSL
// template and the text dump. Its values are tested against ml_dtypes and onnx in
// tests/oracle/test_number_format.cpp, its GLSL against the CPU reference in
// tests/gpu/test_round_to_format_gpu.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "meganeura/autodiff/autodiff.hpp"
#include "meganeura/ops/ops.hpp"
#include "meganeura/reference/interpreter.hpp"

namespace meganeura {
namespace {

TEST(RoundToFormat, ShapeRuleRefusesBadAttributesAndOperands) {
  Graph g;
  NodeId x = g.input("x", {4});
  NodeId h = g.cast(x, DType::F16);
  auto refused = [&](NodeId in, std::vector<int64_t> ints, const std::string& want) {
    Attrs a;
    a.ints = std::move(ints);
    try {
      g.make(Op::RoundToFormat, {in}, a, {});
      ADD_FAILURE() << "expected a ShapeError: " << want;
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("round_to_format"), std::string::npos) << e.what();
    }
  };
  refused(x, {int64_t(NumberFormat::Count_), 1, 0}, "got {8, 1, 0}");
  refused(x, {0, 2, 0}, "saturate 0 or 1");
  refused(x, {0, 1, 3}, "rounding 0..2");
  refused(x, {0, 1}, "got {0, 1}");
  refused(h, {0, 1, 0}, "expected an f32 operand, got f16");
  refused(x, {int64_t(NumberFormat::F8E4M3FN), 1, int64_t(FormatRounding::Up)},
          "nearest-even rounding for float8_e4m3fn");
  EXPECT_NO_THROW(g.round_to_format(x, NumberFormat::F8E8M0, false, FormatRounding::Down));
}

// Straight-through inside ±max_finite, zero outside and for NaN.
TEST(RoundToFormat, GradientIsStraightThroughInsideTheRange) {
  Graph g;
  NodeId w = g.parameter("w", {6});
  NodeId c = g.constant({1, 2, 3, 4, 5, 6}, {6});
  NodeId loss = g.sum(g.mul(g.round_to_format(w, NumberFormat::F8E4M3FN), c));
  Graph dg = differentiate(g, loss);
  const reference::Feeds f{{"w", HostTensor({6}, {0.3, -500, 447, 448, 449, std::nan("")})}};
  EXPECT_EQ(reference::evaluate(dg, f, *dg.gradient(w)).data, (std::vector<double>{1, 0, 3, 4, 0, 0}));
}

TEST(RoundToFormat, GlslCallsTheGeneratedFunctionWithTheAttributes) {
  Graph g;
  NodeId x = g.input("x", {4});
  NodeId y = g.round_to_format(x, NumberFormat::F8E8M0, false, FormatRounding::Down);
  EXPECT_EQ(ops::expand_glsl(ops::def(Op::RoundToFormat), g.node(y), {"v"}),
            "mn_round_to_format((v), 5, 0, 2)");
  const std::string prelude = ops::pointwise_glsl_prelude();
  EXPECT_NE(prelude.find("float mn_round_to_format("), std::string::npos);
  // one case per format, its facts from ir/number_format's table
  for (int f = 0; f < int(NumberFormat::Count_); ++f)
    EXPECT_NE(prelude.find(std::string("// ") + format_info(NumberFormat(f)).name), std::string::npos) << f;
  EXPECT_NE(prelude.find("case 0: mbits = 3; emin = -6; maxv = uintBitsToFloat(0x43E00000u)"),
            std::string::npos)
      << "float8_e4m3fn: 3 mantissa bits, smallest normal 2^-6, largest 448";
}

TEST(RoundToFormat, TextNamesFormatSaturationAndRounding) {
  Graph g;
  NodeId x = g.input("x", {4});
  g.set_outputs({g.round_to_format(x, NumberFormat::F4E2M1)});
  const std::string t = g.to_text();
  EXPECT_NE(t.find("round_to_format(%0) f32[4]"), std::string::npos) << t;
  EXPECT_NE(t.find("format=float4_e2m1fn saturate rounding=nearest_even"), std::string::npos) << t;
}

}  // namespace
}  // namespace meganeura
