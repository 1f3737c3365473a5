// A random Llama-style model (GQA, RoPE, RMSNorm, SwiGLU, tied embeddings) decoded token by token through the
// KV cache on the GPU, against tests/oracle/llama_numpy.py: an independent numpy forward of the whole
// sequence (Hugging Face Llama semantics) run by the python3 on PATH with the pinned numpy. A missing numpy
// fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "gpu/gpu_fixture.hpp"
#include "meganeura/models/llama.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/session/session.hpp"
#include "paths.hpp"

using namespace meganeura;

class LlamaNumpy : public test::GpuTest {};

TEST_F(LlamaNumpy, DecodeLogitsAtEveryPositionMatchNumpy) {
  models::LlamaConfig c;
  c.vocab = 41;
  c.hidden = 48;
  c.layers = 2;
  c.heads = 6;
  c.kv_heads = 2;
  c.intermediate = 64;
  c.rope_theta = 10000.0;
  c.rms_eps = 1e-5;
  c.max_context = 16;
  const auto w = models::llama_random_weights(c, 21);
  std::mt19937 rng(4);
  std::vector<int32_t> tokens(12);
  for (int32_t& t : tokens) t = int32_t(rng() % uint32_t(c.vocab));

  namespace fs = std::filesystem;
  const fs::path dir = test::work_dir("oracle");
  fs::create_directories(dir);
  const std::string tag = std::to_string(::getpid());
  const fs::path in = dir / ("llama_in." + tag + ".json"), out = dir / ("llama_out." + tag + ".json");
  {
    nlohmann::json doc;
    doc["config"] = {{"vocab", c.vocab},           {"hidden", c.hidden},     {"layers", c.layers},
                     {"heads", c.heads},           {"kv_heads", c.kv_heads}, {"intermediate", c.intermediate},
                     {"rope_theta", c.rope_theta}, {"rms_eps", c.rms_eps},   {"tied", c.tied_embeddings}};
    for (const auto& [name, v] : w) doc["weights"][name] = v;
    doc["tokens"] = tokens;
    std::ofstream(in) << doc.dump();
  }
  const std::string cmd = "python3 '" + test::source_path("tests/oracle/llama_numpy.py").string() + "' '" +
                          in.string() + "' '" + out.string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << " failed (is numpy installed? scripts/install-oracles.sh)";
  nlohmann::json want;
  std::ifstream(out) >> want;
  fs::remove(in);
  fs::remove(out);

  SessionConfig cfg = test::gpu_config();
  cfg.training = false;
  cfg.optimizer.kind = OptimizerKind::None;
  cfg.dump_plan.clear();
  std::shared_ptr<runtime::Device> dev(&test::gpu_device(), [](runtime::Device*) {});
  Session prefill = build(models::build_llama(c, 1, 4).graph, cfg, dev);
  Session decode = build(models::build_llama(c, 1, 1).graph, cfg, prefill);
  for (const auto& [name, v] : w) prefill.set_parameter(name, v);
  // A 3-token prompt in a bucket of 4, then one token a step.
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
  for (size_t k = 0; k < got.size(); ++k) {
    const auto& row = want["logits"].at(k + 2);
    ASSERT_EQ(got[k].size(), row.size());
    for (size_t i = 0; i < row.size(); ++i) {
      const double r = row[i].get<double>();
      ASSERT_NEAR(got[k][i], r, 1e-4 * (1.0 + std::fabs(r))) << "position " << k + 2 << ", logit " << i;
    }
  }
}
