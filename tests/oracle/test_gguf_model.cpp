// load_gguf on small random `llama` and `qwen2` files written by PyPI gguf the way llama.cpp's converter
// writes them (tests/oracle/gguf_llama_oracle.py: permuted Q/K rows for llama, q/k/v biases for qwen2, Q8_0 /
// Q4_1 / Q5_0 / F16 / BF16 / F32 tensors, an embedded SentencePiece vocabulary), run on the GPU through a
// prefill and a cached decode session, against the logits of an independent numpy forward of the Hugging Face
// layout of the same weights (tests/oracle/llama_numpy.py). A missing numpy or gguf fails the test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf_oracle.hpp"
#include "gpu/gpu_fixture.hpp"
#include "meganeura/models/gguf_model.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/session/session.hpp"

using namespace meganeura;

namespace {

class GgufModelNumpy : public test::GpuTest {};

const test::fs::path& model_dir() {
  static const test::fs::path dir = [] {
    const test::fs::path d = test::gguf_scratch("models");
    const std::string cmd = test::gguf_python() + " '" +
                            test::source_path("tests/oracle/gguf_llama_oracle.py").string() + "' '" +
                            d.string() + "'";
    if (std::system(cmd.c_str()) != 0)
      throw std::runtime_error(cmd + " failed; are numpy and gguf installed (scripts/install-oracles.sh)?");
    return d;
  }();
  return dir;
}

// Prompt of 3 tokens in a bucket of 4, then one decode step per remaining token; every position's logits
// against numpy. Quantized tensors stay in their block type on the device (the kernels dequantize them
// exactly as the oracle does); the bound is 1e-3 (1 + |want|).
void check_case(const std::string& name) {
  const nlohmann::json want = nlohmann::json::parse(std::ifstream(model_dir() / (name + ".json")));
  const models::LanguageModel m = models::load_gguf((model_dir() / (name + ".gguf")).string());
  const auto& wc = want["config"];
  const models::LlamaConfig& c = m.config;
  // The file's Q8_0 / Q4_1 / Q5_0 tensors arrive in their block types, not expanded.
  EXPECT_TRUE(std::any_of(m.weights.begin(), m.weights.end(), [](const auto& w) {
    return is_quantized(w.dtype);
  })) << name;
  EXPECT_EQ(m.architecture, wc["arch"].get<std::string>());
  EXPECT_EQ(c.vocab, wc["vocab"].get<int64_t>());
  EXPECT_EQ(c.hidden, wc["hidden"].get<int64_t>());
  EXPECT_EQ(c.layers, wc["layers"].get<int64_t>());
  EXPECT_EQ(c.heads, wc["heads"].get<int64_t>());
  EXPECT_EQ(c.kv_heads, wc["kv_heads"].get<int64_t>());
  EXPECT_EQ(c.intermediate, wc["intermediate"].get<int64_t>());
  EXPECT_EQ(c.max_context, wc["context"].get<int64_t>());
  EXPECT_FLOAT_EQ(float(c.rope_theta), wc["rope_theta"].get<float>());
  EXPECT_FLOAT_EQ(float(c.rms_eps), wc["rms_eps"].get<float>());
  EXPECT_EQ(c.tied_embeddings, wc["tied"].get<bool>());
  EXPECT_EQ(c.attn_bias, wc["bias"].get<bool>());
  ASSERT_EQ(m.weights.size(), models::llama_parameters(c).size());
  for (const auto& w : m.weights) EXPECT_EQ(w.dtype, c.dtype_of(w.name)) << w.name;

  SessionConfig cfg = test::gpu_config();
  cfg.training = false;
  cfg.optimizer.kind = OptimizerKind::None;
  cfg.dump_plan.clear();
  std::shared_ptr<runtime::Device> dev(&test::gpu_device(), [](runtime::Device*) {});
  Session prefill = build(models::build_llama(c, 1, 4).graph, cfg, dev);
  Session decode = build(models::build_llama(c, 1, 1).graph, cfg, prefill);
  for (const auto& w : m.weights) prefill.set_parameter_bytes(w.name, w.bytes);
  const auto tokens = want["tokens"].get<std::vector<int32_t>>();
  prefill.set_input("tokens", std::vector<int32_t>{tokens[0], tokens[1], tokens[2], 0});
  prefill.set_input("start", std::vector<int32_t>{0});
  prefill.set_input("last", std::vector<int32_t>{2});
  prefill.run();
  std::vector<std::vector<float>> got = {prefill.read_output("logits")};
  for (int32_t p = 3; p < int32_t(tokens.size()); ++p) {
    decode.set_input("tokens", std::vector<int32_t>{tokens[size_t(p)]});
    decode.set_input("start", std::vector<int32_t>{p});
    decode.set_input("last", std::vector<int32_t>{0});
    decode.run();
    got.push_back(decode.read_output("logits"));
  }
  double worst = 0.0;
  for (size_t k = 0; k < got.size(); ++k) {
    const auto& row = want["logits"].at(k + 2);
    ASSERT_EQ(got[k].size(), row.size());
    for (size_t i = 0; i < row.size(); ++i) {
      const double r = row[i].get<double>();
      worst = std::max(worst, std::fabs(got[k][i] - r) / (1.0 + std::fabs(r)));
      ASSERT_NEAR(got[k][i], r, 1e-3 * (1.0 + std::fabs(r)))
          << name << " position " << k + 2 << ", logit " << i;
    }
  }
  std::cout << name << ": worst relative logit difference " << worst << "\n";
}

}  // namespace

TEST_F(GgufModelNumpy, LlamaWithPermutedQKAndMixedQuantTypesMatchesNumpy) {
  check_case("llama_mixed");
  const models::LanguageModel m = models::load_gguf((model_dir() / "llama_mixed.gguf").string());
  ASSERT_TRUE(m.tokenizer.has_value());
  EXPECT_EQ(m.bos_id, 1);
  EXPECT_TRUE(m.add_bos);  // llama.cpp's default for a SentencePiece vocabulary without add_bos_token
  EXPECT_EQ(m.eos_ids, (std::vector<int32_t>{2, 3}));  // </s>, then <|im_end|> by its text
  EXPECT_EQ(m.chat_template, "{% for m in messages %}{{ m['content'] }}{% endfor %}");
  EXPECT_EQ(m.tokenizer->encode("a"), (std::vector<int32_t>{1, 4}));  // <s> ▁a
}

TEST_F(GgufModelNumpy, Qwen2WithQkvBiasesAndOwnOutputMatchesNumpy) {
  check_case("qwen2_bias");
  const models::LanguageModel m = models::load_gguf((model_dir() / "qwen2_bias.gguf").string());
  EXPECT_FALSE(m.tokenizer.has_value());
}
