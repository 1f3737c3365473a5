// Hugging Face model folders through load_hf, end to end on the GPU: tests/oracle/hf_tiny_model.py writes a
// tiny random Llama with PyPI's safetensors and tokenizers (config.json, weights one-file or sharded,
// tokenizer.json, tokenizer_config.json, generation_config.json) and the logits of a float64 numpy forward
// written from LlamaForCausalLM's definition in Hugging Face names. Our tokenizer must give the ids
// `tokenizers` gave, and prefill + cached decode the numpy logits at every position.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpu/gpu_fixture.hpp"
#include "meganeura/models/hf.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/session/session.hpp"
#include "paths.hpp"

using namespace meganeura;

namespace {

class HfModel : public test::GpuTest {};

namespace fs = std::filesystem;

fs::path make_model(const std::string& variant) {
  const fs::path dir = test::work_dir("oracle") / ("hf_tiny_" + variant + "." + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string cmd = "python3 '" + test::source_path("tests/oracle/hf_tiny_model.py").string() + "' '" +
                          dir.string() + "' " + variant;
  if (std::system(cmd.c_str()) != 0)
    throw std::runtime_error(cmd + " failed (are numpy, safetensors, tokenizers installed? scripts/install-oracles.sh)");
  return dir;
}

SessionConfig inference() {
  SessionConfig cfg = test::gpu_config();
  cfg.training = false;
  cfg.optimizer.kind = OptimizerKind::None;
  cfg.dump_plan.clear();
  return cfg;
}

void check_variant(const std::string& variant, DType stored) {
  const fs::path dir = make_model(variant);
  nlohmann::json want;
  std::ifstream(dir / "expected.json") >> want;
  const models::LanguageModel m = models::load_hf(dir.string());
  fs::remove_all(dir);  // the weights stay mapped: `storage` keeps the files open

  const models::LlamaConfig& c = m.config;
  EXPECT_EQ(m.architecture, "llama");
  EXPECT_EQ(c.vocab, want["vocab"].get<int64_t>());
  EXPECT_EQ(c.hidden, 48);
  EXPECT_EQ(c.layers, 2);
  EXPECT_EQ(c.heads, 6);
  EXPECT_EQ(c.kv_heads, 2);
  EXPECT_EQ(c.intermediate, 64);
  EXPECT_EQ(c.max_context, 32);
  EXPECT_EQ(c.tied_embeddings, want["tied"].get<bool>());
  EXPECT_EQ(c.weight_dtype, stored);
  EXPECT_TRUE(c.tensor_dtypes.empty());
  ASSERT_EQ(m.weights.size(), models::llama_parameters(c).size());
  for (const auto& w : m.weights) EXPECT_EQ(w.dtype, stored) << w.name;
  EXPECT_EQ(m.bos_id, 1);  // tokenizer_config's bos_token <|im_start|>
  EXPECT_EQ(m.eos_ids, (std::vector<int32_t>{2, 0}));  // generation_config's list, then eos_token (2 again)
  EXPECT_FALSE(m.add_bos);
  EXPECT_EQ(m.chat_template, want["template"].get<std::string>());

  ASSERT_TRUE(m.tokenizer.has_value());
  const std::vector<int32_t> ids = want["ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(m.tokenizer->encode(want["prompt"].get<std::string>()), ids);

  std::shared_ptr<runtime::Device> dev(&test::gpu_device(), [](runtime::Device*) {});
  Session prefill = build(models::build_llama(c, 1, 8).graph, inference(), dev);
  Session decode = build(models::build_llama(c, 1, 1).graph, inference(), prefill);
  for (const auto& w : m.weights) prefill.set_parameter_bytes(w.name, w.bytes);
  // A 5-token prompt in a bucket of 8, then one token a step through the cache.
  std::vector<int32_t> bucket(8, 0);
  std::copy(ids.begin(), ids.begin() + 5, bucket.begin());
  prefill.set_input("tokens", bucket);
  prefill.set_input("start", std::vector<int32_t>{0});
  prefill.set_input("last", std::vector<int32_t>{4});
  prefill.run();
  std::vector<std::vector<float>> got = {prefill.read_output("logits")};
  for (int32_t p = 5; p < int32_t(ids.size()); ++p) {
    decode.set_input("tokens", std::vector<int32_t>{ids[size_t(p)]});
    decode.set_input("start", std::vector<int32_t>{p});
    decode.set_input("last", std::vector<int32_t>{0});
    decode.run();
    got.push_back(decode.read_output("logits"));
  }
  for (size_t k = 0; k < got.size(); ++k) {
    const auto& row = want["logits"].at(k + 4);
    ASSERT_EQ(got[k].size(), row.size());
    for (size_t i = 0; i < row.size(); ++i) {
      const double r = row[i].get<double>();
      ASSERT_NEAR(got[k][i], r, 1e-4 * (1.0 + std::fabs(r))) << variant << ": position " << k + 4 << ", logit " << i;
    }
  }
}

}  // namespace

TEST_F(HfModel, SingleFileF32TiedLogitsMatchNumpy) { check_variant("f32", DType::F32); }

// f16 weights stay f16 on the device; the numpy forward reads the same f16 values, so the tolerance is f32's.
TEST_F(HfModel, ShardedF16UntiedLogitsMatchNumpy) { check_variant("f16-sharded", DType::F16); }
