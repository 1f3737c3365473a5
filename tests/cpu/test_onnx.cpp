// load_onnx on models written byte by byte here (a minimal protobuf writer), device-free: the wire reader,
// initializers as parameters, symbolic dims, names, load-time shape evaluation, and ImportError collecting
// every unsupported (op, attribute, node) at once. The conformance suite is
// tests/oracle/test_onnx_conformance.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "meganeura/onnx/onnx.hpp"
#include "meganeura/reference/interpreter.hpp"
#include "onnx_writer.hpp"

namespace meganeura {
namespace {

using namespace test::onnx_writer;

TEST(Onnx, LowersGemmReluWithParametersAndSymbolicDims) {
  const std::string bytes =
      model({node("Gemm", {"x", "W", "b"}, {"h"}, "fc", {attr_int("transB", 1)}),
             node("Relu", {"h"}, {"r"}, "act")},
            {tensor_f32("W", {3, 2}, {1, 0, 0, 1, 1, 1}), tensor_f32("b", {3}, {0.5f, -10, 0})},
            {value_info("x", 1, {"batch", "2"})}, {value_info("r", 1, {"batch", "3"})});
  OnnxOptions o;
  o.dims["batch"] = 2;
  OnnxModel m = load_onnx_bytes(as_bytes(bytes), "mlp", o);
  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].shape, (Shape{2, 2}));
  ASSERT_EQ(m.parameters.size(), 2u);  // W and b, fine-tunable
  EXPECT_TRUE(m.graph.find("W").has_value());
  EXPECT_TRUE(m.graph.find("h").has_value());  // ONNX value names name the nodes
  reference::Feeds feeds;
  feeds["x"] = HostTensor({2, 2}, {1, 2, -3, 4});
  for (const auto& [name, v] : m.parameters) {
    const Shape s = m.graph.node(*m.graph.find(name)).shape;
    feeds[name] = HostTensor(s, std::vector<double>(v.begin(), v.end()));
  }
  const HostTensor y = reference::evaluate_outputs(m.graph, feeds)[0];
  // row 1: [1, 2] → [1.5, -8, 3] → relu; row 2: [-3, 4] → [-2.5, -6, 1] → relu
  EXPECT_EQ(y.data, (std::vector<double>{1.5, 0, 3, 0, 0, 1}));
}

TEST(Onnx, UnboundSymbolicDimIsAnImportErrorNamingIt) {
  const std::string bytes = model({node("Relu", {"x"}, {"y"}, "act")}, {}, {value_info("x", 1, {"n", "2"})},
                                  {value_info("y", 1, {"n", "2"})});
  try {
    load_onnx_bytes(as_bytes(bytes), "m", {});
    FAIL() << "expected ImportError";
  } catch (const ImportError& e) {
    EXPECT_NE(std::string(e.what()).find("'n'"), std::string::npos) << e.what();
  }
}

TEST(Onnx, ShapesOptionBindsInputsWhoseDimensionsShareAName) {
  // paddle2onnx names a text crop's height and width both "?": OnnxOptions::dims cannot bind them apart
  const std::string bytes =
      model({node("Relu", {"x"}, {"y"}, "act")}, {}, {value_info("x", 1, {"1", "?", "?"})},
            {value_info("y", 1, {"1", "?", "?"})});
  OnnxOptions o;
  o.shapes["x"] = {1, 48, 192};
  OnnxModel m = load_onnx_bytes(as_bytes(bytes), "m", o);
  EXPECT_EQ(m.inputs.at(0).shape, (Shape{1, 48, 192}));
  o.shapes["x"] = {2, 48, 192};  // the fixed first dimension is 1
  try {
    load_onnx_bytes(as_bytes(bytes), "m", o);
    FAIL() << "expected ImportError";
  } catch (const ImportError& e) {
    EXPECT_NE(std::string(e.what()).find("'x'"), std::string::npos) << e.what();
  }
}

TEST(Onnx, ConstantWeightsBecomeParametersOnRequest) {
  // y = x * w + s with w a Constant tensor (a weight as paddle2onnx writes it) and s a Constant scalar
  const std::string bytes =
      model({node("Constant", {}, {"w"}, "weight", {attr_tensor("value", tensor_f32("", {2}, {2, 3}))}),
             node("Constant", {}, {"s"}, "shift", {attr_tensor("value", tensor_f32("", {}, {1}))}),
             node("Mul", {"x", "w"}, {"xw"}, "mul"), node("Add", {"xw", "s"}, {"y"}, "add")},
            {}, {value_info("x", 1, {"2"})}, {value_info("y", 1, {"2"})});
  EXPECT_TRUE(load_onnx_bytes(as_bytes(bytes), "m", {}).parameters.empty());
  OnnxOptions o;
  o.constants_as_parameters = true;
  OnnxModel m = load_onnx_bytes(as_bytes(bytes), "m", o);
  ASSERT_EQ(m.parameters.size(), 1u);  // the scalar stays a constant
  EXPECT_EQ(m.parameters[0].first, "w");
  EXPECT_EQ(m.parameters[0].second, (std::vector<float>{2, 3}));
  reference::Feeds feeds;
  feeds["x"] = HostTensor({2}, {1, -1});
  feeds["w"] = HostTensor({2}, {2, 3});
  EXPECT_EQ(reference::evaluate_outputs(m.graph, feeds)[0].data, (std::vector<double>{3, -2}));
}

TEST(Onnx, ShapeComputationsFoldAtLoadTime) {
  // Reshape(x, Concat(Shape(x)[0:1], [-1])) with the shape computed at load time
  const std::string bytes =
      model({node("Shape", {"x"}, {"s"}, "shape"), node("Slice", {"s", "zero", "one"}, {"s0"}, "first"),
             node("Concat", {"s0", "minus_one"}, {"target"}, "cat", {attr_int("axis", 0)}),
             node("Reshape", {"x", "target"}, {"y"}, "reshape")},
            {tensor_i64("zero", {0}), tensor_i64("one", {1}), tensor_i64("minus_one", {-1})},
            {value_info("x", 1, {"2", "3", "4"})}, {value_info("y", 1, {"2", "12"})});
  OnnxModel m = load_onnx_bytes(as_bytes(bytes), "m", {});
  EXPECT_EQ(m.graph.node(m.graph.outputs()[0]).shape, (Shape{2, 12}));
  EXPECT_TRUE(m.parameters.empty());
}

TEST(Onnx, EveryUnsupportedOpAndAttributeIsReportedAtOnce) {
  const std::string bytes = model(
      {node("Relu", {"x"}, {"a"}, "ok"), node("FancyOp", {"a"}, {"b"}, "first_unknown"),
       node("Elu", {"x"}, {"c"}, "elu_with_extra", {attr_float("alpha", 1.0f), attr_int("bogus", 3)}),
       node("OtherOp", {"x"}, {"d"}, "second_unknown"), node("Add", {"b", "c"}, {"e"}, "after_unknown")},
      {}, {value_info("x", 1, {"2"})}, {value_info("e", 1, {"2"}), value_info("d", 1, {"2"})});
  try {
    load_onnx_bytes(as_bytes(bytes), "m", {});
    FAIL() << "expected ImportError";
  } catch (const ImportError& e) {
    ASSERT_EQ(e.items().size(), 3u) << e.what();
    EXPECT_EQ(e.items()[0].op, "FancyOp");
    EXPECT_EQ(e.items()[0].node, "first_unknown");
    EXPECT_EQ(e.items()[1].op, "Elu");
    EXPECT_EQ(e.items()[1].attribute, "bogus");
    EXPECT_EQ(e.items()[2].op, "OtherOp");
    EXPECT_NE(std::string(e.what()).find("second_unknown"), std::string::npos);
  }
}

// Fuzz find: a Conv whose weight has no rank read its kernel size past the end of an empty shape.
TEST(Onnx, ConvWithARankZeroWeightIsAnImportError) {
  std::string w0 = tensor_f32("W", {}, {1.0f});
  const std::string bytes =
      model({node("Conv", {"x", "W"}, {"y"}, "conv")}, {w0}, {value_info("x", 1, {"1", "1", "4", "4"})},
            {value_info("y", 1, {"1", "1", "4", "4"})});
  try {
    load_onnx_bytes(as_bytes(bytes), "m", {});
    FAIL() << "expected ImportError";
  } catch (const ImportError& e) {
    ASSERT_EQ(e.items().size(), 1u) << e.what();
    EXPECT_EQ(e.items()[0].op, "Conv");
    EXPECT_NE(e.items()[0].reason.find("weight of one rank"), std::string::npos) << e.what();
  }
}

TEST(Onnx, MalformedBytesAreFormatErrorsNamingTheField) {
  const std::string good = model({node("Relu", {"x"}, {"y"}, "act")}, {}, {value_info("x", 1, {"2"})},
                                 {value_info("y", 1, {"2"})});
  for (size_t cut = 1; cut < good.size(); cut += 3) {
    try {
      load_onnx_bytes(as_bytes(good.substr(0, cut)), "cut", {});
    } catch (const Error&) {
      continue;  // FormatError or ImportError: never a crash
    }
  }
  const std::string bad_length = field_bytes(7, field_bytes(1, "x")).substr(0, 4) + "\x7f";
  try {
    load_onnx_bytes(as_bytes(bad_length), "bad", {});
    FAIL() << "expected FormatError";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("model.graph"), std::string::npos) << e.what();
  }
  // an initializer whose raw data does not match its dims
  std::string t =
      field_varint(1, 4) + field_varint(2, 1) + field_bytes(8, "w") + field_bytes(9, std::string(8, '\0'));
  const std::string short_init =
      model({node("Relu", {"w"}, {"y"}, "act")}, {t}, {}, {value_info("y", 1, {"4"})});
  try {
    load_onnx_bytes(as_bytes(short_init), "short", {});
    FAIL() << "expected FormatError";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("initializer 'w'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected 16 bytes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace meganeura
