// Tokenizers against PyPI `tokenizers` (tests/oracle/tokenizer_oracle.py, run by the python3 on PATH):
// byte-level BPE tokenizers trained there with SmolLM2's and Llama-3's pipelines, one with added-token flags,
// and a SentencePiece-style vocabulary whose Hugging Face conversion is the oracle for the llama.cpp
// algorithm. Every string of the corpus (>= 2,000) must give the same ids and the same decoded text. A
// missing python package fails the test (it never skips).
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "meganeura/core/error.hpp"
#include "meganeura/formats/gguf_tokenizer.hpp"
#include "meganeura/tokenizer/tokenizer.hpp"
#include "paths.hpp"

using namespace meganeura;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Runs the oracle once per build (again when the script or what it imports is newer than its output).
const fs::path& oracle_dir() {
  static const fs::path dir = [] {
    const fs::path script = test::source_path("tests/oracle/tokenizer_oracle.py");
    const fs::path out = test::work_dir("oracle") / "tokenizer";
    const fs::path stamp = out / "spm.expected.json";
    std::error_code ec;
    bool stale = !fs::exists(stamp);
    for (const fs::path& dep : {script, test::source_path("scripts/tokenizer_corpus.py"),
                                test::source_path("scripts/gguf_tokenizer.py")})
      if (!stale && fs::last_write_time(stamp, ec) < fs::last_write_time(dep)) stale = true;
    if (stale) {
      const fs::path tmp = out.string() + "." + std::to_string(::getpid());
      fs::create_directories(tmp);
      const fs::path err = tmp / "stderr.txt";
      const std::string cmd =
          "python3 '" + script.string() + "' '" + tmp.string() + "' 2>'" + err.string() + "'";
      const int rc = std::system(cmd.c_str());
      if (rc != 0) {
        std::ifstream e(err);
        std::stringstream text;
        text << e.rdbuf();
        throw std::runtime_error("tokenizer_oracle.py failed (exit " + std::to_string(rc) +
                                 "); run scripts/install-oracles.sh\n" + text.str());
      }
      fs::remove_all(out, ec);
      fs::rename(tmp, out);
    }
    return out;
  }();
  return dir;
}

json read_json(const fs::path& p) {
  std::ifstream in(p);
  if (!in) throw std::runtime_error("missing " + p.string());
  return json::parse(in);
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TokenizerData data_of(const json& j) {
  TokenizerData d;
  d.model = j.at("model") == "llama" ? TokenizerData::Model::Spm : TokenizerData::Model::Bpe;
  d.tokens = j.at("tokens").get<std::vector<std::string>>();
  d.scores = j.at("scores").get<std::vector<float>>();
  d.token_types = j.at("token_types").get<std::vector<int32_t>>();
  d.merges = j.at("merges").get<std::vector<std::string>>();
  d.pre = j.at("pre").get<std::string>();
  d.bos_id = j.at("bos_id"), d.eos_id = j.at("eos_id"), d.unk_id = j.at("unk_id"), d.pad_id = j.at("pad_id");
  d.add_bos = j.at("add_bos"), d.add_eos = j.at("add_eos"), d.add_space_prefix = j.at("add_space_prefix");
  return d;
}

std::string show(const std::vector<int32_t>& v) {
  std::string s = "[";
  for (size_t k = 0; k < v.size(); ++k) s += (k ? "," : "") + std::to_string(v[k]);
  return s + "]";
}

// Compares everything the oracle recorded for one case; reports the first few differences of each kind.
void check_case(const std::string& name, const Tokenizer& t) {
  const json corpus = read_json(oracle_dir() / "corpus.json");
  const json want = read_json(oracle_dir() / (name + ".expected.json"));
  ASSERT_GE(corpus.size(), 2000u);
  ASSERT_EQ(want.at("ids").size(), corpus.size());
  int bad_ids = 0, bad_plain = 0, bad_text = 0, bad_skip = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i];
    const auto ids = t.encode(text);
    const auto want_ids = want["ids"][i].get<std::vector<int32_t>>();
    if (ids != want_ids && ++bad_ids <= 5)
      ADD_FAILURE() << name << " string " << i << " " << json(text).dump() << "\n  ours  " << show(ids)
                    << "\n  tokenizers " << show(want_ids);
    const auto plain = t.encode(text, {.add_special = false});
    if (plain != want["ids_no_special"][i].get<std::vector<int32_t>>() && ++bad_plain <= 5)
      ADD_FAILURE() << name << " string " << i << " without the post-processor's tokens";
    const std::string dec = t.decode(want_ids);
    if (dec != want["decoded"][i].get<std::string>() && ++bad_text <= 5)
      ADD_FAILURE() << name << " decode " << i << ": ours " << json(dec).dump() << ", tokenizers "
                    << want["decoded"][i].dump();
    if (t.decode(want_ids, true) != want["decoded_skip_special"][i].get<std::string>() && ++bad_skip <= 5)
      ADD_FAILURE() << name << " decode (skipping special tokens) " << i;
  }
  int bad_random = 0;
  for (size_t i = 0; i < want["random_ids"].size(); ++i) {
    const auto ids = want["random_ids"][i].get<std::vector<int32_t>>();
    const std::string dec = t.decode(ids);
    if (dec != want["random_decoded"][i].get<std::string>() && ++bad_random <= 5)
      ADD_FAILURE() << name << " decode of " << show(ids) << ": ours " << json(dec).dump() << ", tokenizers "
                    << want["random_decoded"][i].dump();
  }
  EXPECT_EQ(bad_ids + bad_plain + bad_text + bad_skip + bad_random, 0)
      << name << ": " << bad_ids << " id lists, " << bad_plain << " without specials, " << bad_text << " + "
      << bad_skip << " decodes, " << bad_random << " random decodes differ";
}

Tokenizer from_json_case(const std::string& name) {
  return Tokenizer::from_json(read_text(oracle_dir() / (name + ".tokenizer.json")), name + ".tokenizer.json");
}
Tokenizer from_data_case(const std::string& name) {
  return Tokenizer::from_data(data_of(read_json(oracle_dir() / (name + ".data.json"))));
}

}  // namespace

// The oracle's GGUF-array cases as the tokenizer.ggml.* keys of a GGUF file (our writer), read back by the
// GGUF adapter: the same fields, then the same ids as tokenizers on the whole corpus.
Tokenizer from_gguf_case(const std::string& name) {
  const json j = read_json(oracle_dir() / (name + ".data.json"));
  using gguf::Value;
  gguf::Contents c;
  auto& md = c.metadata;
  md.push_back({"general.architecture", Value::of_string("llama")});
  md.push_back({"tokenizer.ggml.model", Value::of_string(j.at("model").get<std::string>())});
  md.push_back(
      {"tokenizer.ggml.tokens", Value::string_array(j.at("tokens").get<std::vector<std::string>>())});
  if (!j.at("scores").empty())
    md.push_back({"tokenizer.ggml.scores",
                  Value::array_of(gguf::ValueType::F32, j.at("scores").get<std::vector<float>>())});
  if (!j.at("token_types").empty())
    md.push_back({"tokenizer.ggml.token_type",
                  Value::array_of(gguf::ValueType::I32, j.at("token_types").get<std::vector<int32_t>>())});
  if (j.at("model") == "gpt2") {
    md.push_back(
        {"tokenizer.ggml.merges", Value::string_array(j.at("merges").get<std::vector<std::string>>())});
    md.push_back({"tokenizer.ggml.pre", Value::of_string(j.at("pre").get<std::string>())});
  }
  for (const char* k : {"bos", "eos", "unk", "pad"})
    if (j.at(std::string(k) + "_id").get<int>() >= 0)
      md.push_back({std::string("tokenizer.ggml.") +
                        (k == std::string("unk")   ? "unknown"
                         : k == std::string("pad") ? "padding"
                                                   : k) +
                        "_token_id",
                    Value::of_u32(j.at(std::string(k) + "_id").get<uint32_t>())});
  md.push_back({"tokenizer.ggml.add_bos_token", Value::of_bool(j.at("add_bos"))});
  md.push_back({"tokenizer.ggml.add_eos_token", Value::of_bool(j.at("add_eos"))});
  md.push_back({"tokenizer.ggml.add_space_prefix", Value::of_bool(j.at("add_space_prefix"))});
  md.push_back({"tokenizer.chat_template", Value::of_string("{{ messages }}")});
  const gguf::File f = gguf::File::parse(gguf::serialize(c), name + ".gguf");
  const TokenizerData got = gguf::tokenizer_data(f), want = data_of(j);
  EXPECT_EQ(got.model, want.model);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.scores, want.scores);
  EXPECT_EQ(got.token_types, want.token_types);
  EXPECT_EQ(got.merges, want.merges);
  if (want.model == TokenizerData::Model::Bpe) {
    EXPECT_EQ(got.pre, want.pre);
  }
  EXPECT_EQ(got.bos_id, want.bos_id);
  EXPECT_EQ(got.eos_id, want.eos_id);
  EXPECT_EQ(got.unk_id, want.unk_id);
  EXPECT_EQ(got.pad_id, want.pad_id);
  EXPECT_EQ(got.add_bos, want.add_bos);
  EXPECT_EQ(got.add_eos, want.add_eos);
  EXPECT_EQ(got.chat_template, "{{ messages }}");
  return Tokenizer::from_data(got);
}

TEST(TokenizerOracle, SmolLM2PipelineFromTokenizerJson) { check_case("smollm2", from_json_case("smollm2")); }
TEST(TokenizerOracle, SmolLM2PipelineFromGgufArrays) { check_case("smollm2", from_data_case("smollm2")); }
TEST(TokenizerOracle, SmolLM2PipelineFromGgufMetadata) { check_case("smollm2", from_gguf_case("smollm2")); }
TEST(TokenizerOracle, SentencePieceStyleFromGgufMetadata) { check_case("spm", from_gguf_case("spm")); }
TEST(TokenizerOracle, Llama3SplitFromTokenizerJson) { check_case("llama3", from_json_case("llama3")); }
TEST(TokenizerOracle, Llama3SplitFromGgufArrays) { check_case("llama3", from_data_case("llama3")); }
TEST(TokenizerOracle, PrefixSpaceAndAddedTokenFlags) { check_case("gpt2", from_json_case("gpt2")); }
// llama.cpp's score-ordered bigram merging against the Hugging Face conversion of the same vocabulary.
TEST(TokenizerOracle, SentencePieceStyleFromGgufArrays) { check_case("spm", from_data_case("spm")); }
// The conversion itself (normalizer Prepend/Replace, BPE byte fallback, Replace/ByteFallback/Fuse/Strip).
TEST(TokenizerOracle, SentencePieceConversionFromTokenizerJson) { check_case("spm", from_json_case("spm")); }

TEST(TokenizerOracle, ChatMLMatchesSmolLM2Template) {
  const json cases = read_json(oracle_dir() / "chatml.json");
  ASSERT_EQ(cases.size(), 8u);
  for (const auto& c : cases) {
    std::vector<ChatMessage> messages;
    for (const auto& m : c["messages"]) messages.push_back({m["role"], m["content"]});
    EXPECT_EQ(apply_chatml(messages, c["add_generation_prompt"], kSmolLM2DefaultSystem),
              c["text"].get<std::string>())
        << c["messages"].dump();
  }
}
