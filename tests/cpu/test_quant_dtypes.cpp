// Block-quantized parameter dtypes (Q4_0 .. Q6_K) in the IR: sizes from the GGUF block table (not numel ×
// dtype_size), shapes whose last dimension is not whole blocks refused, and every use other than matmul and
// gather's table refused, naming the node and the builder line; no gradient of a quantized parameter.
#include <gtest/gtest.h>

#include "meganeura/autodiff/autodiff.hpp"
#include "meganeura/ir/graph.hpp"
#include "meganeura/ir/storage.hpp"
#include "meganeura/reference/interpreter.hpp"

using namespace meganeura;

namespace {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(QuantDtypes, BlockSizesAreTheGgufTable) {
  // (elements, bytes) of one block, from the GGUF specification's block structs.
  const std::pair<DType, std::pair<uint32_t, uint32_t>> table[] = {
      {DType::Q4_0, {32, 18}},   {DType::Q4_1, {32, 20}},  {DType::Q5_0, {32, 22}},
      {DType::Q5_1, {32, 24}},   {DType::Q8_0, {32, 34}},  {DType::Q4_K, {256, 144}},
      {DType::Q5_K, {256, 176}}, {DType::Q6_K, {256, 210}}};
  for (const auto& [t, eb] : table) {
    EXPECT_TRUE(is_quantized(t)) << dtype_name(t);
    EXPECT_EQ(dtype_block_elems(t), eb.first) << dtype_name(t);
    EXPECT_EQ(dtype_block_bytes(t), eb.second) << dtype_name(t);
    EXPECT_EQ(storage_bytes(t, 3 * int64_t(eb.first)), 3u * eb.second) << dtype_name(t);
    EXPECT_THROW(storage_bytes(t, int64_t(eb.first) + 1), ShapeError) << dtype_name(t);
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  }
  EXPECT_EQ(parse_dtype("Q4_K"), DType::Q4_K);
  EXPECT_THROW(parse_dtype("q3_k"), ConfigError);
  EXPECT_FALSE(is_quantized(DType::F16));
  EXPECT_EQ(storage_bytes(DType::F16, 5), 10u);
  // 576 x 1536 in Q4_1: 27648 blocks of 20 bytes.
  EXPECT_EQ(storage_bytes(DType::Q4_1, 576 * 1536), 552960u);
}

TEST(QuantDtypes, LastDimensionMustBeWholeBlocks) {
  Graph g;
  EXPECT_NO_THROW(g.parameter("ok", {3, 64}, DType::Q8_0));
  const std::string e = error_of([&] { g.parameter("w", {64, 100}, DType::Q4_0); });
  EXPECT_NE(e.find("multiple of 32"), std::string::npos) << e;
  EXPECT_NE(e.find("'w'"), std::string::npos) << e;
  EXPECT_NE(e.find("test_quant_dtypes.cpp"), std::string::npos) << e;
  EXPECT_THROW(g.parameter("k", {4, 128}, DType::Q6_K), GraphError);  // K types: blocks of 256
  EXPECT_NO_THROW(g.parameter("k2", {4, 512}, DType::Q6_K));
}

TEST(QuantDtypes, OnlyMatmulAndGatherReadQuantizedValues) {
  Graph g;
  const NodeId w = g.parameter("w", {8, 64}, DType::Q4_1);
  const NodeId x = g.input("x", {2, 64});
  const NodeId idx = g.input("idx", {3}, DType::I32);
  const NodeId y = g.matmul(x, w, false, true);
  EXPECT_EQ(g.node(y).dtype, DType::F32);
  const NodeId rows = g.embedding(w, idx);
  EXPECT_EQ(g.node(rows).dtype, DType::F32);
  EXPECT_EQ(g.node(rows).shape, (Shape{3, 64}));
  const std::string e = error_of([&] { g.relu(w); });
  EXPECT_NE(e.find("[relu]"), std::string::npos) << e;
  EXPECT_NE(e.find("'w'"), std::string::npos) << e;
  EXPECT_NE(e.find("q4_1"), std::string::npos) << e;
  EXPECT_THROW(g.add(w, w), GraphError);
  EXPECT_THROW(g.transpose(w, 0, 1), GraphError);
  EXPECT_THROW(g.cast(w, DType::F32), GraphError);
  EXPECT_THROW(g.cast(x, DType::Q8_0), GraphError);
  EXPECT_THROW(g.input("xq", {2, 64}, DType::Q8_0), GraphError);
  EXPECT_THROW(g.state("cache", {2, 64}, DType::Q8_0), GraphError);
  EXPECT_THROW(g.fill(1.0, {2, 64}, DType::Q8_0), GraphError);
}

TEST(QuantDtypes, NoGradientOfAQuantizedParameterUnlessFrozen) {
  Graph g;
  const NodeId w = g.parameter("w", {8, 64}, DType::Q8_0);
  const NodeId b = g.parameter("b", {2, 8});
  const NodeId x = g.input("x", {2, 64});
  const NodeId loss = g.sum(g.mul(g.matmul(x, w, false, true), b));
  const std::string e = error_of([&] { differentiate(g, loss); });
  EXPECT_NE(e.find("'w'"), std::string::npos) << e;
  EXPECT_NE(e.find("q8_0"), std::string::npos) << e;
  // Frozen (left out of wrt): the gradient of b flows through the quantized product.
  const Graph d = differentiate(g, loss, {b});
  EXPECT_TRUE(d.gradient(b).has_value());
}

// The reference interpreter takes a quantized parameter's dequantized values as its value.
TEST(QuantDtypes, ReferenceReadsTheDequantizedFeed) {
  Graph g;
  const NodeId w = g.parameter("w", {2, 32}, DType::Q8_0);
  const NodeId x = g.input("x", {1, 32});
  g.set_outputs({g.matmul(x, w, false, true)});
  std::vector<float> wv(64);
  for (size_t i = 0; i < 64; ++i) wv[i] = float(int(i % 7) - 3) * 0.25f;
  const std::vector<float> deq = from_storage(to_storage(wv, DType::Q8_0).data(), 64, DType::Q8_0);
  reference::Feeds f;
  f["w"] = HostTensor({2, 32}, std::vector<double>(deq.begin(), deq.end()));
  f["x"] = HostTensor({1, 32}, 1.0);
  const HostTensor out = reference::evaluate_outputs(g, f)[0];
  double want0 = 0, want1 = 0;
  for (size_t k = 0; k < 32; ++k) {
    want0 += deq[k];
    want1 += deq[32 + k];
  }
  EXPECT_DOUBLE_EQ(out.data.at(0), want0);
  EXPECT_DOUBLE_EQ(out.data.at(1), want1);
}
