// load_hf on model folders written here (config.json text, safetensors through the writer, a small
// tokenizer.json by hand): what it reads, the weights it hands out without a copy, dtype conversion, and a
// FormatError naming the file and the field (or tensor) for every malformed or missing piece.
// The logits of loaded models are checked against numpy in tests/oracle/test_hf_model.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "hub/hub_fixture.hpp"
#include "meganeura/core/error.hpp"
#include "meganeura/formats/safetensors.hpp"
#include "meganeura/models/hf.hpp"

using namespace meganeura;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// vocab: <s> </s> a b ab <|im_end|>, merges "a b".
const char* kTokenizer = R"({"version": "1.0", "truncation": null, "padding": null,
  "added_tokens": [{"id": 0, "content": "<s>", "special": true}, {"id": 1, "content": "</s>", "special": true},
                   {"id": 5, "content": "<|im_end|>", "special": true}],
  "normalizer": null, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "post_processor": null, "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {"<s>": 0, "</s>": 1, "a": 2, "b": 3, "ab": 4, "<|im_end|>": 5}, "merges": ["a b"]}})";

json base_config() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", 8},
          {"hidden_size", 8},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 2},
          {"num_key_value_heads", 1},
          {"intermediate_size", 12},
          {"rope_theta", 500000.0},
          {"rms_norm_eps", 1e-5},
          {"tie_word_embeddings", true},
          {"hidden_act", "silu"},
          {"max_position_embeddings", 64},
          {"bos_token_id", 0},
          {"eos_token_id", 1}};
}

// Hugging Face tensor names and shapes of base_config() (hidden 8, 2 heads of 4, 1 kv head, inter 12).
std::vector<std::pair<std::string, Shape>> hf_tensors(bool tied, int layers = 2) {
  std::vector<std::pair<std::string, Shape>> t = {{"model.embed_tokens.weight", {8, 8}},
                                                  {"model.norm.weight", {8}}};
  if (!tied) t.push_back({"lm_head.weight", {8, 8}});
  for (int n = 0; n < layers; ++n) {
    const std::string p = "model.layers." + std::to_string(n) + ".";
    t.insert(t.end(), {{p + "input_layernorm.weight", {8}},
                       {p + "self_attn.q_proj.weight", {8, 8}},
                       {p + "self_attn.k_proj.weight", {4, 8}},
                       {p + "self_attn.v_proj.weight", {4, 8}},
                       {p + "self_attn.o_proj.weight", {8, 8}},
                       {p + "post_attention_layernorm.weight", {8}},
                       {p + "mlp.gate_proj.weight", {12, 8}},
                       {p + "mlp.up_proj.weight", {12, 8}},
                       {p + "mlp.down_proj.weight", {8, 12}}});
  }
  return t;
}

class HfLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("hf_load_" + std::to_string(::getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void put(const std::string& file, const std::string& text) const {
    std::ofstream(dir_ / file, std::ios::binary) << text;
  }

  // Every tensor's values continue a running counter k/64 (k = 1, 2, ...), as F32, or as BF16 by truncation
  // (exact for the first values, which the tests read back).
  void write_weights(std::vector<std::pair<std::string, Shape>> tensors, const std::string& dtype = "F32",
                     const std::function<void(std::vector<SafetensorsTensor>&)>& edit = {}) {
    bufs_.clear();
    std::vector<SafetensorsTensor> ts;
    float counter = 0;
    for (const auto& [name, shape] : tensors) {
      std::vector<float> v(size_t(numel(shape)));
      for (float& x : v) x = (counter += 1.0f) / 64.0f;
      std::vector<std::byte> b(v.size() * (dtype == "F32" ? 4 : 2));
      for (size_t i = 0; i < v.size(); ++i) {
        uint32_t bits;
        std::memcpy(&bits, &v[i], 4);
        if (dtype == "F32")
          std::memcpy(&b[i * 4], &bits, 4);
        else {
          const uint16_t h = uint16_t(bits >> 16);  // bf16: exact for these values (8 significant bits)
          std::memcpy(&b[i * 2], &h, 2);
        }
      }
      bufs_.push_back(std::move(b));
      ts.push_back({name, dtype == "F32" ? DType::F32 : DType::BF16, shape, bufs_.back()});
    }
    if (edit) edit(ts);
    write_safetensors((dir_ / "model.safetensors").string(), ts);
  }
  void write_model(const json& config = base_config()) {
    put("config.json", config.dump());
    put("tokenizer.json", kTokenizer);
    write_weights(hf_tensors(config.value("tie_word_embeddings", false)));
  }
  // The FormatError load_hf throws, after checking that it names every part of `parts`.
  void expect_error(const std::vector<std::string>& parts, const models::HfOptions& o = {}) const {
    try {
      models::load_hf(dir_.string(), o);
      ADD_FAILURE() << "expected a FormatError naming " << ::testing::PrintToString(parts);
    } catch (const FormatError& e) {
      for (const std::string& p : parts)
        EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << "\nlacks: " << p;
    }
  }

  fs::path dir_;
  std::deque<std::vector<std::byte>> bufs_;
};

}  // namespace

TEST_F(HfLoad, ReadsConfigWeightsAndTokenizerFiles) {
  write_model();
  put("tokenizer_config.json",
      R"({"bos_token": {"content": "<s>", "special": true}, "eos_token": "<|im_end|>", "add_bos_token": true,
          "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  put("generation_config.json", R"({"eos_token_id": [1, 5]})");
  const models::LanguageModel m = models::load_hf(dir_.string());
  EXPECT_EQ(m.architecture, "llama");
  EXPECT_EQ(m.config.vocab, 8);
  EXPECT_EQ(m.config.kv_heads, 1);
  EXPECT_EQ(m.config.rope_theta, 500000.0);
  EXPECT_EQ(m.config.rms_eps, 1e-5);
  EXPECT_EQ(m.config.max_context, 64);
  EXPECT_TRUE(m.config.tied_embeddings);
  EXPECT_EQ(m.bos_id, 0);
  EXPECT_EQ(m.eos_ids, (std::vector<int32_t>{1, 5}));
  EXPECT_TRUE(m.add_bos);  // the post-processor adds nothing itself
  EXPECT_EQ(m.chat_template, "D");
  ASSERT_TRUE(m.tokenizer);
  EXPECT_EQ(m.tokenizer->encode("ab")[0], 4);
  // Views in the order of llama_parameters, pointing at the values written (no copy, stored dtype).
  const auto params = models::llama_parameters(m.config);
  ASSERT_EQ(m.weights.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(m.weights[i].name, params[i].first);
    EXPECT_EQ(m.weights[i].shape, params[i].second);
    EXPECT_EQ(m.weights[i].dtype, DType::F32);
    EXPECT_EQ(m.weights[i].bytes.size(), size_t(numel(params[i].second)) * 4);
  }
  // embed_tokens is the first tensor written: values 1/64, 2/64, ...; q_proj of layer 1 follows the 10
  // tensors before it (embed 64, norm 8, then layer 0's 8+64+32+32+64+8+96+96+96, then layer 1's norm 8).
  float first[2];
  std::memcpy(first, m.weights[0].bytes.data(), 8);
  EXPECT_EQ(first[0], 1.0f / 64);
  EXPECT_EQ(first[1], 2.0f / 64);
  const auto q1 = std::find_if(m.weights.begin(), m.weights.end(),
                               [](const auto& w) { return w.name == "blk.1.attn_q.weight"; });
  ASSERT_NE(q1, m.weights.end());
  std::memcpy(first, q1->bytes.data(), 4);
  EXPECT_EQ(first[0], float(64 + 8 + 8 + 64 + 32 + 32 + 64 + 8 + 96 + 96 + 96 + 8 + 1) / 64);
}

TEST_F(HfLoad, WeightsKeepTheirStoredDtypeOrConvert) {
  put("config.json", base_config().dump());
  // BF16 everywhere but the norms (F32), as some exports mix them.
  write_weights(hf_tensors(true), "BF16", [&](std::vector<SafetensorsTensor>& ts) {
    for (auto& t : ts)
      if (t.name.find("norm") != std::string::npos) {
        std::vector<float> v(size_t(numel(t.shape)), 1.0f);
        bufs_.emplace_back(v.size() * 4);
        std::memcpy(bufs_.back().data(), v.data(), v.size() * 4);
        t.dtype = DType::F32;
        t.bytes = bufs_.back();
      }
  });
  models::LanguageModel m = models::load_hf(dir_.string());
  EXPECT_EQ(m.config.weight_dtype, DType::BF16);
  EXPECT_EQ(m.config.tensor_dtypes.size(), 5u);  // 2 layers × 2 norms + output_norm
  EXPECT_EQ(m.config.dtype_of("blk.0.ffn_norm.weight"), DType::F32);
  EXPECT_FALSE(m.tokenizer);  // no tokenizer.json: none
  // To f16: 1/64 = 0x2400, 2/64 = 0x2800 in binary16; norms 1.0 = 0x3C00 (IEEE 754 encodings).
  models::HfOptions o;
  o.weight_dtype = DType::F16;
  m = models::load_hf(dir_.string(), o);
  EXPECT_EQ(m.config.weight_dtype, DType::F16);
  EXPECT_TRUE(m.config.tensor_dtypes.empty());
  uint16_t h[2];
  std::memcpy(h, m.weights[0].bytes.data(), 4);
  EXPECT_EQ(h[0], 0x2400);
  EXPECT_EQ(h[1], 0x2800);
  std::memcpy(h, m.weights[1].bytes.data(), 2);  // blk.0.attn_norm.weight
  EXPECT_EQ(h[0], 0x3C00);
  EXPECT_EQ(m.weights[0].bytes.size(), 64u * 2);
}

TEST_F(HfLoad, IgnoresInvFreqAndATiedLmHead) {
  put("config.json", base_config().dump());
  auto t = hf_tensors(false);
  t.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", {2}});
  write_weights(t);
  const models::LanguageModel m = models::load_hf(dir_.string());
  EXPECT_EQ(m.weights.size(), models::llama_parameters(m.config).size());
  EXPECT_TRUE(m.config.tied_embeddings);
}

TEST_F(HfLoad, MalformedConfigNamesFileAndField) {
  write_model();
  struct Case {
    std::function<void(json&)> edit;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j.erase("vocab_size"); }, {"config.json", "vocab_size", "got none"}},
      {[](json& j) { j["hidden_size"] = "8"; }, {"config.json", "hidden_size", "integer"}},
      {[](json& j) { j["num_hidden_layers"] = -2; }, {"num_hidden_layers", "-2"}},
      {[](json& j) { j["vocab_size"] = 1LL << 40; }, {"vocab_size", "1099511627776"}},
      {[](json& j) { j["num_key_value_heads"] = 3; }, {"num_key_value_heads", "divisor"}},
      {[](json& j) { j["num_attention_heads"] = 3; }, {"num_attention_heads", "divisor of hidden_size 8"}},
      {[](json& j) { j["head_dim"] = 8; }, {"head_dim", "4"}},
      {[](json& j) { j["model_type"] = "gpt2"; }, {"model_type", "\"gpt2\""}},
      {[](json& j) { j["model_type"] = "qwen2"; }, {"model_type", "Qwen2"}},
      {[](json& j) { j["hidden_act"] = "gelu"; }, {"hidden_act", "gelu"}},
      {[](json& j) {
         j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
       },
       {"rope_scaling", "linear"}},
      {[](json& j) { j["attention_bias"] = true; }, {"attention_bias"}},
      {[](json& j) { j["rms_norm_eps"] = -1; }, {"rms_norm_eps", "positive"}},
      {[](json& j) { j["tie_word_embeddings"] = 1; }, {"tie_word_embeddings", "boolean"}},
      {[](json& j) { j["eos_token_id"] = 8; }, {"eos_token_id", "[0, 8)"}},
      {[](json& j) { j["architectures"] = "LlamaForCausalLM"; }, {"architectures", "array"}},
  };
  for (const Case& c : cases) {
    json j = base_config();
    c.edit(j);
    put("config.json", j.dump());
    expect_error(c.parts);
  }
  put("config.json", "{\"vocab_size\": 8,");
  expect_error({"config.json", "JSON"});
  put("config.json", "[1, 2]");
  expect_error({"config.json", "object"});
  fs::remove(dir_ / "config.json");
  expect_error({"config.json", "got none"});
}

TEST_F(HfLoad, WrongOrMissingTensorsAreNamed) {
  put("config.json", base_config().dump());
  put("tokenizer.json", kTokenizer);
  auto t = hf_tensors(true);
  t.erase(std::find_if(t.begin(), t.end(),
                       [](const auto& x) { return x.first == "model.layers.1.mlp.up_proj.weight"; }));
  write_weights(t);
  expect_error({"model.safetensors", "model.layers.1.mlp.up_proj.weight", "blk.1.ffn_up.weight", "got none"});

  t = hf_tensors(true);
  t[3].second = {8, 4};  // layer 0's q_proj
  write_weights(t);
  expect_error({"model.safetensors", "model.layers.0.self_attn.q_proj.weight", "[8,8]", "[8,4]"});

  t = hf_tensors(true);
  t.push_back({"model.layers.0.self_attn.q_proj.bias", {8}});
  write_weights(t);
  expect_error({"model.safetensors", "model.layers.0.self_attn.q_proj.bias", "unknown"});

  write_weights(hf_tensors(true, 3));  // a third layer the config does not have
  expect_error({"model.layers.2.input_layernorm.weight", "2 layers"});

  json untied = base_config();
  untied["tie_word_embeddings"] = false;
  put("config.json", untied.dump());
  write_weights(hf_tensors(true));
  expect_error({"lm_head.weight", "tie_word_embeddings"});

  put("config.json", base_config().dump());
  write_weights(hf_tensors(true), "F32",
                [](std::vector<SafetensorsTensor>& ts) { ts[1].dtype = DType::I32; });
  expect_error({"model.norm.weight", "F32, F16 or BF16", "I32"});

  fs::remove(dir_ / "model.safetensors");
  expect_error({"model.safetensors", "got neither"});
}

TEST_F(HfLoad, MalformedTokenizerFilesAreNamed) {
  write_model();
  put("tokenizer_config.json", R"({"bos_token": "<nope>"})");
  expect_error({"tokenizer_config.json", "bos_token", "<nope>"});
  put("tokenizer_config.json", R"({"eos_token": 5, "bos_token": "<s>"})");
  expect_error({"tokenizer_config.json", "eos_token", "string"});
  put("tokenizer_config.json", R"({"chat_template": 7})");
  expect_error({"tokenizer_config.json", "chat_template"});
  put("tokenizer_config.json", R"({"add_bos_token": "yes"})");
  expect_error({"tokenizer_config.json", "add_bos_token", "boolean"});
  put("tokenizer_config.json", "{}");
  put("generation_config.json", R"({"eos_token_id": [1, -3]})");
  expect_error({"generation_config.json", "eos_token_id"});
  fs::remove(dir_ / "generation_config.json");
  put("tokenizer.json", R"({"model": {"type": "WordPiece"}})");
  expect_error({"tokenizer.json", "WordPiece"});
  fs::remove(dir_ / "tokenizer.json");
  put("tokenizer_config.json", R"({"bos_token": "<s>"})");
  expect_error({"tokenizer_config.json", "bos_token", "tokenizer.json"});
}

TEST(HfSource, NeitherFolderNorRepoId) {
  try {
    models::load_hf("./no/such/folder");
    ADD_FAILURE() << "expected a FormatError";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("./no/such/folder"), std::string::npos) << e.what();
  }
  EXPECT_THROW(models::load_hf(""), FormatError);
  // A repo id with nothing cached, offline: the hub's error, not a crash.
  models::HfOptions o;
  o.hub = hf::HubConfig{};
  o.hub->home = (fs::path(::testing::TempDir()) / ("hf_offline_" + std::to_string(::getpid()))).string();
  o.hub->offline = true;
  o.download.progress = hf::ProgressStyle::Off;
  try {
    models::load_hf("NoOrg/no-model", o);
    ADD_FAILURE() << "expected a HubError";
  } catch (const HubError& e) {
    EXPECT_EQ(e.kind(), HubError::Kind::Offline) << e.what();
  }
  fs::remove_all(o.hub->home);
}

// A repository id goes through the hub into the Hugging Face cache (tests/hub/hub_server.py stands in for
// the hub): config.json, tokenizer.json, the weights, tokenizer_config.json and generation_config.json of one
// commit; the model loads from the snapshot, and again offline from the cache alone.
class HfHub : public test::HubTest {};

TEST_F(HfHub, RepoIdDownloadsIntoTheCacheAndLoads) {
  const std::string repo = "HuggingFaceTB/SmolLM2-135M-Instruct";
  const fs::path snap = root_ / "HuggingFaceTB" / "SmolLM2-135M-Instruct" / test::kCommitB;
  fs::create_directories(snap);
  test::put(snap / "config.json", base_config().dump());
  test::put(snap / "tokenizer.json", kTokenizer);
  test::put(snap / "tokenizer_config.json",
            R"({"bos_token": "<s>", "eos_token": "<|im_end|>", "chat_template": "C"})");
  test::put(snap / "generation_config.json", R"({"eos_token_id": 1})");
  std::vector<float> values;
  std::deque<std::vector<float>> bufs;
  std::vector<SafetensorsTensor> ts;
  for (const auto& [name, shape] : hf_tensors(true)) {
    bufs.emplace_back(size_t(numel(shape)));
    for (float& x : bufs.back()) x = float(values.size() % 97) / 8.0f, values.push_back(x);
    ts.push_back({name, DType::F32, shape, std::as_bytes(std::span<const float>(bufs.back()))});
  }
  write_safetensors((snap / "model.safetensors").string(), ts);
  const std::string served = test::slurp(snap / "model.safetensors");
  test::put(root_ / "HuggingFaceTB" / "SmolLM2-135M-Instruct" / "refs" / "main", test::kCommitB);
  start();

  models::HfOptions o;
  o.hub = config_;
  o.download = options_;
  models::LanguageModel m = models::load_hf(repo, o);
  const fs::path cached = repo_dir(repo) / "snapshots" / test::kCommitB;
  for (const char* f : {"config.json", "tokenizer.json", "model.safetensors", "tokenizer_config.json",
                        "generation_config.json"})
    EXPECT_EQ(test::slurp(cached / f), test::slurp(snap / f)) << f;
  EXPECT_EQ(m.source, repo + "@" + test::kCommitB);
  EXPECT_EQ(m.bos_id, 0);
  EXPECT_EQ(m.eos_ids, (std::vector<int32_t>{1, 5}));
  EXPECT_EQ(m.chat_template, "C");
  ASSERT_TRUE(m.tokenizer);
  // The views hold the bytes the server sent, tensor by tensor.
  const SafetensorsFile file((cached / "model.safetensors").string());
  const auto embed = file.tensor("model.embed_tokens.weight");
  ASSERT_EQ(m.weights[0].bytes.size(), embed.bytes.size());
  EXPECT_TRUE(std::equal(embed.bytes.begin(), embed.bytes.end(), m.weights[0].bytes.begin()));
  const auto down = file.tensor("model.layers.1.mlp.down_proj.weight");
  const auto it = std::find_if(m.weights.begin(), m.weights.end(),
                               [](const auto& w) { return w.name == "blk.1.ffn_down.weight"; });
  ASSERT_NE(it, m.weights.end());
  EXPECT_TRUE(std::equal(down.bytes.begin(), down.bytes.end(), it->bytes.begin(), it->bytes.end()));
  EXPECT_EQ(test::slurp(cached / "model.safetensors"), served);

  // Offline, from the cache alone.
  stop();
  o.hub->offline = true;
  m = models::load_hf(repo, o);
  EXPECT_EQ(m.weights.size(), models::llama_parameters(m.config).size());
  EXPECT_EQ(m.eos_ids, (std::vector<int32_t>{1, 5}));
}

// A repository without tokenizer_config.json / generation_config.json loads (they are optional); a
// malformed config.json in the snapshot is a FormatError naming it, not a hub error.
TEST_F(HfHub, OptionalFilesMayBeAbsentAndBadConfigIsAFormatError) {
  start();
  models::HfOptions o;
  o.hub = config_;
  o.download = options_;
  try {
    models::load_hf("org/tiny", o);  // the fixture's repo: config.json {"hidden_size": 8}
    ADD_FAILURE() << "expected a FormatError";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("model_type"), std::string::npos) << e.what();
  }
  bool asked = false;
  for (const std::string& l : requests()) asked |= test::contains(l, "generation_config.json");
  EXPECT_TRUE(asked);
}
