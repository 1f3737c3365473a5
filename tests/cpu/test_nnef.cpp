// load_nnef on hand-written graph.nnef texts and .dat bytes, device-free: the parser (syntax errors name
// line and column), the binary tensor reader, externals as inputs and variables as parameters, compound
// fragments (the standard's and the file's own) expanded, NNEF broadcasting, and ImportError collecting every
// unsupported operation at once. Models converted by nnef-tools: tests/oracle/test_nnef_models.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "meganeura/nnef/nnef.hpp"
#include "meganeura/reference/interpreter.hpp"
#include "nnef_writer.hpp"

namespace meganeura {
namespace {

namespace w = test::nnef_writer;

using Files = std::map<std::string, std::vector<std::byte>>;

NnefModel load(const std::string& text, const Files& files = {}, NnefOptions options = {}) {
  return load_nnef_text(
      text, "graph.nnef",
      [&](const std::string& label) -> std::optional<std::vector<std::byte>> {
        auto it = files.find(label);
        if (it == files.end()) return std::nullopt;
        return it->second;
      },
      options);
}

std::vector<double> run(const NnefModel& m, const std::map<std::string, HostTensor>& inputs,
                        size_t output = 0) {
  reference::Feeds feeds;
  for (const auto& [name, v] : inputs) feeds[name] = v;
  for (const auto& [name, v] : m.parameters) {
    const Shape s = m.graph.node(*m.graph.find(name)).shape;
    feeds[name] = HostTensor(s, std::vector<double>(v.begin(), v.end()));
  }
  return reference::evaluate_outputs(m.graph, feeds)[output].data;
}

std::string error_of(const std::string& text, const Files& files = {}) {
  try {
    load(text, files);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Nnef, LinearReluWithVariablesAsParameters) {
  const std::string text = R"(
version 1.0;
# a comment
graph net( x ) -> ( y )
{
    x = external<scalar>(shape = [2, 2]);
    w = variable<scalar>(shape = [3, 2], label = 'fc/weight');
    b = variable<scalar>(shape = [1, 3], label = 'fc/bias');
    h = linear(x, w, b);
    y = relu(h);
}
)";
  const Files files = {{"fc/weight", w::f32({3, 2}, {1, 0, 0, 1, 1, 1})},
                       {"fc/bias", w::f32({1, 3}, {0.5f, -10, 0})}};
  const NnefModel m = load(text, files);
  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].name, "x");
  EXPECT_EQ(m.inputs[0].shape, (Shape{2, 2}));
  ASSERT_EQ(m.parameters.size(), 2u);  // fine-tunable
  EXPECT_EQ(m.parameters[0].first, "fc/weight");
  EXPECT_TRUE(m.graph.find("h").has_value());  // NNEF identifiers name the nodes
  EXPECT_EQ(m.op_histogram.at("linear"), 1u);
  EXPECT_EQ(m.version, "1.0");
  // row 1: [1, 2] → [1.5, -8, 3]; row 2: [-3, 4] → [-2.5, -6, 1]; relu
  EXPECT_EQ(run(m, {{"x", HostTensor({2, 2}, {1, 2, -3, 4})}}), (std::vector<double>{1.5, 0, 3, 0, 0, 1}));
}

TEST(Nnef, FileFragmentsAndOperatorExpressionsExpand) {
  const std::string text = R"(
version 1.0;
extension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;

fragment scaled_sum( a: tensor<scalar>, b: tensor<scalar>, k: scalar = 2.0 ) -> ( out: tensor<scalar>, n: integer )
{
    s = a + b;
    out = s * k if k > 1.0 else s;
    n = length_of([for i in range_of(shape_of(a)) yield i * 2]);
}

graph g( x ) -> ( y, z )
{
    x = external(shape = [1, 3]);
    (y, n) = scaled_sum(x, constant(shape = [1, 3], value = [1.0, 2.0, 3.0]), k = 3.0);
    z = select(x > 0.0, x, -x);
}
)";
  const NnefModel m = load(text);
  const HostTensor x({1, 3}, {1, -2, 0.5});
  EXPECT_EQ(run(m, {{"x", x}}, 0), (std::vector<double>{6, 0, 10.5}));
  EXPECT_EQ(run(m, {{"x", x}}, 1), (std::vector<double>{1, 2, 0.5}));
}

TEST(Nnef, BroadcastAppendsTrailingAxesAndStandardCompoundsExpand) {
  // batch_normalization is a compound fragment of the standard: its [1, C] statistics broadcast against
  // [N, C, H, W] with trailing singleton axes (NNEF's rule, not numpy's leading one)
  const std::string text = R"(
version 1.0;
graph g( x ) -> ( y )
{
    x = external(shape = [1, 2, 1, 2]);
    m = constant(shape = [1, 2], value = [1.0, -1.0]);
    v = constant(shape = [1, 2], value = [4.0, 1.0]);
    o = constant(shape = [1, 2], value = [0.0, 10.0]);
    s = constant(shape = [1, 2], value = [2.0, 1.0]);
    y = batch_normalization(x, m, v, o, s, epsilon = 0.0);
}
)";
  const NnefModel m = load(text);
  // channel 0: (x - 1) / 2 * 2; channel 1: (x + 1) / 1 + 10
  EXPECT_EQ(run(m, {{"x", HostTensor({1, 2, 1, 2}, {3, 5, 0, 1})}}), (std::vector<double>{2, 4, 11, 12}));
}

TEST(Nnef, ReshapeTransposeSplitConcatReduce) {
  const std::string text = R"(
version 1.0;
graph g( x ) -> ( a, b, c )
{
    x = external(shape = [2, 3]);
    r = reshape(x, shape = [0, 3, 1]);
    t = transpose(r, axes = [1, 0]);
    [p, q] = split(x, axis = 1, ratios = [1, 2]);
    a = concat([q, p], axis = 1);
    b = squeeze(sum_reduce(t, axes = [1]), axes = [1, 2]);
    c = unsqueeze(max_reduce(x, axes = [0]), axes = [0]);
}
)";
  const NnefModel m = load(text);
  const HostTensor x({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(m.outputs[2].shape, (Shape{1, 1, 3}));
  EXPECT_EQ(run(m, {{"x", x}}, 0), (std::vector<double>{2, 3, 1, 5, 6, 4}));
  EXPECT_EQ(run(m, {{"x", x}}, 1), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(run(m, {{"x", x}}, 2), (std::vector<double>{4, 5, 6}));
}

TEST(Nnef, SyntaxErrorsNameLineAndColumn) {
  const std::string head = "version 1.0;\ngraph g( x ) -> ( y )\n{\n";
  // a missing ';' at the end of line 4 is found at the start of line 5
  EXPECT_NE(error_of(head + "    x = external(shape = [1])\n    y = relu(x);\n}\n")
                .find("graph.nnef:5:5: expected ';'"),
            std::string::npos)
      << error_of(head + "    x = external(shape = [1])\n    y = relu(x);\n}\n");
  EXPECT_NE(
      error_of(head + "    x = external(shape = [1]);\n    y = relu(x $ 2);\n}\n").find("graph.nnef:5:16"),
      std::string::npos);
  EXPECT_NE(error_of(head + "    x = external(shape = [1]);\n    y = relu('x);\n}\n").find("graph.nnef:5:14"),
            std::string::npos);
  EXPECT_NE(
      error_of(
          "version 1.0;\ngraph g( x ) -> ( y )\n{\n    x = external(shape = [1]);\n    y = relu(z);\n}\n")
          .find("graph.nnef:5:14: expected a defined identifier, got 'z'"),
      std::string::npos);
  EXPECT_NE(error_of("graph g() -> ()\n{}\n").find("graph.nnef:1:1: expected 'version'"), std::string::npos);
  EXPECT_NE(error_of("version 1.0;\ngraph g( x ) -> ( y )\n{\n    x = external(shape = [1]);\n")
                .find("graph.nnef:5:1: expected '}', got end of file"),
            std::string::npos);
  // deep nesting is an error, not a stack overflow
  const std::string deep = head + "    y = " + std::string(100000, '(') + "1" + "\n}\n";
  EXPECT_NE(error_of(deep).find("nested at most"), std::string::npos);
  // a recursive fragment is bounded too
  EXPECT_NE(error_of("version 1.0;\nfragment f( a: tensor<scalar> ) -> ( b: tensor<scalar> ) { b = f(a); }\n"
                     "graph g( x ) -> ( y ) { x = external(shape = [1]); y = f(x); }\n")
                .find("nested at most 64"),
            std::string::npos);
  // each identifier is assigned once
  EXPECT_NE(error_of(head + "    x = external(shape = [1]);\n    x = relu(x);\n    y = x;\n}\n")
                .find("graph.nnef:5:5: expected 'x' to be assigned once"),
            std::string::npos);
}

TEST(Nnef, UnsupportedOperationsAreListedTogether) {
  const std::string text = R"(
version 1.0;
fragment my_op( x: tensor<scalar> ) -> ( y: tensor<scalar> );
graph g( x ) -> ( y )
{
    x = external(shape = [1, 2, 4, 4]);
    a = my_op(x);
    b = floor(x);
    c = deconv(b, x);
    d = max_pool(x, size = [2, 1, 1, 1]);
    y = add(a, d);
}
)";
  try {
    load(text);
    FAIL() << "expected ImportError";
  } catch (const ImportError& e) {
    ASSERT_EQ(e.items().size(), 3u) << e.what();  // c depends on b: reported through b only
    EXPECT_EQ(e.items()[0].op, "my_op");
    EXPECT_EQ(e.items()[0].node, "a");
    EXPECT_EQ(e.items()[1].op, "floor");
    EXPECT_EQ(e.items()[2].op, "max_pool");
    EXPECT_EQ(e.items()[2].node, "d");
  }
}

TEST(Nnef, TensorFileReaderChecksEveryField) {
  const NnefTensor t = read_nnef_tensor_bytes(w::f32({2, 2}, {1, 2, 3, 4}), "t.dat");
  EXPECT_EQ(t.value.shape, (Shape{2, 2}));
  EXPECT_EQ(t.value.data, (std::vector<double>{1, 2, 3, 4}));
  const NnefTensor i = read_nnef_tensor_bytes(w::i32({3}, {-5, 0, 7}), "i.dat");
  EXPECT_EQ(i.item_type, NnefTensor::Int);
  EXPECT_EQ(i.value.data, (std::vector<double>{-5, 0, 7}));
  // logicals packed one bit each, most significant bit first
  std::vector<std::byte> bits = w::header({10}, 1, 5, 2);
  bits.push_back(std::byte{0xA0});
  bits.push_back(std::byte{0x40});
  EXPECT_EQ(read_nnef_tensor_bytes(bits, "b.dat").value.data,
            (std::vector<double>{1, 0, 1, 0, 0, 0, 0, 0, 0, 1}));

  auto err = [](std::vector<std::byte> b) {
    try {
      read_nnef_tensor_bytes(b, "bad.dat");
    } catch (const FormatError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  std::vector<std::byte> good = w::f32({2}, {1, 2});
  auto bad = good;
  bad[1] = std::byte{0};
  EXPECT_NE(err(bad).find("magic"), std::string::npos);
  bad = good;
  bad[2] = std::byte{2};
  EXPECT_NE(err(bad).find("version 1.0, got 2.0"), std::string::npos);
  bad = good;
  bad.pop_back();
  EXPECT_NE(err(bad).find("bad.dat: expected 136 bytes"), std::string::npos);
  bad = good;
  w::put_u32(bad, 8, 9);
  EXPECT_NE(err(bad).find("rank of at most 8, got 9"), std::string::npos);
  bad = good;
  w::put_u32(bad, 44, 12);
  EXPECT_NE(err(bad).find("16, 32 or 64 bits"), std::string::npos);
  bad = good;
  w::put_u32(bad, 4, 4);
  EXPECT_NE(err(bad).find("data length of 8"), std::string::npos);
  EXPECT_NE(err(std::vector<std::byte>(10)).find("at least 128 bytes"), std::string::npos);
}

TEST(Nnef, VariableFilesAreCheckedAgainstTheirDeclaration) {
  const std::string text =
      "version 1.0;\ngraph g( x ) -> ( y )\n{\n    x = external(shape = [2]);\n"
      "    w = variable(shape = [3], label = 'w');\n    y = mul(x, w);\n}\n";
  EXPECT_NE(error_of(text).find("graph.nnef:5:9: expected the tensor file 'w.dat'"), std::string::npos)
      << error_of(text);
  EXPECT_NE(error_of(text, {{"w", w::f32({2}, {1, 2})}}).find("hold shape [3] as declared, got [2]"),
            std::string::npos);
  NnefOptions o;
  o.allow_missing_tensors = true;  // the graph alone (inspect): zeros
  EXPECT_NO_THROW(
      load("version 1.0;\ngraph g( x ) -> ( y )\n{\n    x = external(shape = [3]);\n"
           "    w = variable(shape = [3], label = 'w');\n    y = mul(x, w);\n}\n",
           {}, o));
}

TEST(Nnef, ConvAndPoolsFollowNnefPadding) {
  // 'same' padding (empty padding) on a 3x3 conv; avg_pool with border 'ignore' averages inside cells only
  const std::string text = R"(
version 1.0;
graph g( x ) -> ( c, p, q )
{
    x = external(shape = [1, 1, 2, 2]);
    f = constant(shape = [1, 1, 3, 3], value = [1.0]);
    c = conv(x, f, 1.0);
    p = avg_pool(x, size = [1, 1, 2, 2], padding = [(0, 0), (0, 0), (1, 0), (1, 0)], stride = [1, 1, 1, 1],
                 border = 'ignore');
    q = max_pool(x, size = [1, 1, 3, 3], border = 'ignore');
}
)";
  const NnefModel m = load(text);
  const HostTensor x({1, 1, 2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(run(m, {{"x", x}}, 0), (std::vector<double>{11, 11, 11, 11}));
  EXPECT_EQ(run(m, {{"x", x}}, 1), (std::vector<double>{1, 1.5, 2, 2.5}));
  EXPECT_EQ(run(m, {{"x", x}}, 2), (std::vector<double>{4, 4, 4, 4}));
}

TEST(Nnef, SupportedOpsListIsSortedAndCoversTheTestModels) {
  const std::vector<std::string> ops = nnef_supported_ops();
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
  for (const char* op : {"conv", "linear", "matmul", "batch_normalization", "max_pool", "avg_pool", "softmax",
                         "reshape", "transpose", "concat", "split", "mean_reduce", "pad", "clamp"})
    EXPECT_TRUE(std::find(ops.begin(), ops.end(), op) != ops.end()) << op;
}

TEST(Nnef, FolderLoadsAndInspectListsUnsupportedInsteadOfThrowing) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("nnef_test_" + std::to_string(::getpid()));
  fs::create_directories(dir / "fc");
  {
    std::ofstream(dir / "graph.nnef") << "version 1.0;\ngraph g( x ) -> ( y, z )\n{\n"
                                         "    x = external(shape = [1, 2]);\n"
                                         "    w = variable(shape = [1, 2], label = 'fc/w');\n"
                                         "    y = mul(x, w);\n    z = floor(y);\n}\n";
    const auto bytes = test::nnef_writer::f32({1, 2}, {2, 3});
    std::ofstream(dir / "fc" / "w.dat", std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  EXPECT_THROW(load_nnef(dir.string()), ImportError);
  const NnefInspection info = inspect_nnef((dir / "graph.nnef").string());
  ASSERT_EQ(info.unsupported.size(), 1u);
  EXPECT_EQ(info.unsupported[0].op, "floor");
  ASSERT_EQ(info.parameters.size(), 1u);
  EXPECT_EQ(info.parameters[0].name, "fc/w");
  const std::string text = describe(info);
  EXPECT_NE(text.find("x [1,2]"), std::string::npos) << text;
  EXPECT_NE(text.find("unsupported: 1"), std::string::npos) << text;
  EXPECT_NE(text.find("mul 1"), std::string::npos) << text;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace meganeura
