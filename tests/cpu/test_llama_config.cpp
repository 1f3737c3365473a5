// LlamaConfig's per-parameter dtypes: what a loader asks for is what the step graph's parameters store.
#include <gtest/gtest.h>

#include "meganeura/core/error.hpp"
#include "meganeura/models/llama.hpp"

using namespace meganeura;

TEST(LlamaConfig, TensorDtypesOverrideTheWeightDtypeByName) {
  models::LlamaConfig c = models::LlamaConfig::smollm2_135m();
  c.layers = 1;
  c.weight_dtype = DType::F16;
  c.tensor_dtypes["output_norm.weight"] = DType::F32;
  const Graph g = models::build_llama(c, 1, 1).graph;
  EXPECT_EQ(g.node(*g.find("output_norm.weight")).dtype, DType::F32);
  EXPECT_EQ(g.node(*g.find("blk.0.attn_q.weight")).dtype, DType::F16);
}

TEST(LlamaConfig, ATensorDtypeForNoParameterIsAConfigError) {
  models::LlamaConfig c = models::LlamaConfig::smollm2_135m();
  c.layers = 1;
  c.tensor_dtypes["blk.1.attn_q.weight"] = DType::F16;  // layer 1 does not exist
  try {
    (void)models::build_llama(c, 1, 1);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("blk.1.attn_q.weight"), std::string::npos) << e.what();
  }
}
