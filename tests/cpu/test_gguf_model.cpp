// load_gguf and the GGUF tokenizer adapter on bad input, without a device: each defect is a FormatError that
// names the file and the key or tensor (never a crash or a half-made model). Files are made by our writer.
#include <gtest/gtest.h>

#include <cstring>

#include "meganeura/core/error.hpp"
#include "meganeura/formats/gguf.hpp"
#include "meganeura/formats/gguf_tokenizer.hpp"
#include "meganeura/models/gguf_model.hpp"
#include "meganeura/quant/quant.hpp"

using namespace meganeura;
using gguf::Value;

namespace {

// A tiny F32 llama: hidden 8, 2 heads (kv 1), 1 layer, vocab 5, intermediate 8. `edit` changes the contents.
gguf::Contents tiny_llama(const std::string& arch = "llama") {
  gguf::Contents c;
  auto kv = [&](const std::string& k, Value v) { c.metadata.push_back({k, std::move(v)}); };
  kv("general.architecture", Value::of_string(arch));
  kv(arch + ".context_length", Value::of_u32(16));
  kv(arch + ".embedding_length", Value::of_u32(8));
  kv(arch + ".block_count", Value::of_u32(1));
  kv(arch + ".feed_forward_length", Value::of_u32(8));
  kv(arch + ".attention.head_count", Value::of_u32(2));
  kv(arch + ".attention.head_count_kv", Value::of_u32(1));
  kv(arch + ".rope.freq_base", Value::of_f32(10000.0f));
  kv(arch + ".attention.layer_norm_rms_epsilon", Value::of_f32(1e-5f));
  auto tensor = [&](const std::string& name, std::vector<uint64_t> dims) {
    uint64_t n = 1;
    for (uint64_t d : dims) n *= d;
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = float(i % 7) * 0.25f;
    std::vector<uint8_t> bytes(n * 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    c.tensors.push_back({name, dims, quant::Type::F32, bytes});
  };
  tensor("token_embd.weight", {8, 5});
  tensor("blk.0.attn_norm.weight", {8});
  tensor("blk.0.attn_q.weight", {8, 8});
  tensor("blk.0.attn_k.weight", {8, 4});
  tensor("blk.0.attn_v.weight", {8, 4});
  tensor("blk.0.attn_output.weight", {8, 8});
  tensor("blk.0.ffn_norm.weight", {8});
  tensor("blk.0.ffn_gate.weight", {8, 8});
  tensor("blk.0.ffn_up.weight", {8, 8});
  tensor("blk.0.ffn_down.weight", {8, 8});
  tensor("output_norm.weight", {8});
  return c;
}

gguf::File file_of(const gguf::Contents& c) { return gguf::File::parse(gguf::serialize(c), "tiny.gguf"); }

void set(gguf::Contents& c, const std::string& key, Value v) {
  for (auto& [k, val] : c.metadata)
    if (k == key) {
      val = std::move(v);
      return;
    }
  c.metadata.push_back({key, std::move(v)});
}

// The FormatError's message contains every one of `parts`.
void expect_error(const gguf::Contents& c, std::initializer_list<std::string> parts) {
  try {
    (void)models::load_gguf(file_of(c));
    ADD_FAILURE() << "expected a FormatError mentioning " << *parts.begin();
  } catch (const FormatError& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << "\n  lacks: " << p;
  }
}

}  // namespace

TEST(GgufModel, TinyLlamaLoadsWithItsHyperParameters) {
  const models::LanguageModel m = models::load_gguf(file_of(tiny_llama()));
  EXPECT_EQ(m.config.vocab, 5);
  EXPECT_EQ(m.config.hidden, 8);
  EXPECT_EQ(m.config.heads, 2);
  EXPECT_EQ(m.config.kv_heads, 1);
  EXPECT_EQ(m.config.max_context, 16);
  EXPECT_TRUE(m.config.tied_embeddings);
  EXPECT_FALSE(m.tokenizer.has_value());
  EXPECT_EQ(m.weights.size(), models::llama_parameters(m.config).size());
  for (const auto& w : m.weights) EXPECT_EQ(w.bytes.size(), size_t(numel(w.shape)) * 4) << w.name;
}

// llama.cpp's converter stores HF row s·D/2 + i of a head as row 2i + s (D = 4 here: GGUF rows 0,1,2,3 of a
// head are HF rows 0,2,1,3). attn_q has 2 heads, attn_k one.
TEST(GgufModel, LlamaQKRowsAreUnpermutedPerHead) {
  gguf::Contents c = tiny_llama();
  for (auto& t : c.tensors)
    if (t.name == "blk.0.attn_q.weight" || t.name == "blk.0.attn_k.weight") {
      auto* v = reinterpret_cast<float*>(t.data.data());
      for (size_t r = 0; r < t.dims[1]; ++r)
        for (size_t i = 0; i < 8; ++i) v[r * 8 + i] = float(r);
    }
  const models::LanguageModel m = models::load_gguf(file_of(c));
  auto rows = [&](const std::string& name) {
    for (const auto& w : m.weights)
      if (w.name == name) {
        std::vector<float> out;
        for (int64_t r = 0; r < w.shape[0]; ++r)
          out.push_back(reinterpret_cast<const float*>(w.bytes.data())[r * 8]);
        return out;
      }
    return std::vector<float>{};
  };
  EXPECT_EQ(rows("blk.0.attn_q.weight"), (std::vector<float>{0, 2, 1, 3, 4, 6, 5, 7}));
  EXPECT_EQ(rows("blk.0.attn_k.weight"), (std::vector<float>{0, 2, 1, 3}));
  // qwen2 files are not permuted
  const models::LanguageModel q = models::load_gguf(file_of([&] {
    gguf::Contents d = tiny_llama("qwen2");
    d.tensors = c.tensors;
    return d;
  }()));
  for (const auto& w : q.weights)
    if (w.name == "blk.0.attn_k.weight") {
      const auto* v = reinterpret_cast<const float*>(w.bytes.data());
      EXPECT_EQ((std::vector<float>{v[0], v[8], v[16], v[24]}), (std::vector<float>{0, 1, 2, 3}));
    }
}

TEST(GgufModel, UnknownArchitectureListsTheSupportedOnes) {
  gguf::Contents c = tiny_llama();
  set(c, "general.architecture", Value::of_string("mamba"));
  expect_error(c, {"tiny.gguf", "general.architecture", "llama, qwen2", "mamba"});
}

TEST(GgufModel, MissingOrInconsistentHyperParametersNameTheKey) {
  gguf::Contents c = tiny_llama();
  c.metadata.erase(c.metadata.begin() + 1);  // llama.context_length
  expect_error(c, {"tiny.gguf", "llama.context_length"});
  c = tiny_llama();
  set(c, "llama.attention.head_count", Value::of_u32(3));
  expect_error(c, {"llama.attention.head_count", "3"});
  c = tiny_llama();
  set(c, "llama.rope.dimension_count", Value::of_u32(2));
  expect_error(c, {"llama.rope.dimension_count", "partial RoPE"});
  c = tiny_llama();
  set(c, "llama.rope.scaling.type", Value::of_string("yarn"));
  expect_error(c, {"llama.rope.scaling.type", "yarn"});
  c = tiny_llama();
  set(c, "llama.vocab_size", Value::of_u32(6));
  expect_error(c, {"llama.vocab_size", "token_embd.weight"});
  c = tiny_llama();
  set(c, "llama.block_count",
      Value::of_u64(uint64_t(1) << 39));  // fuzz find: was a 2^39-entry parameter list
  expect_error(c, {"llama.block_count", "at most 1 blocks"});
  c = tiny_llama();
  set(c, "llama.embedding_length", Value::of_string("8"));
  expect_error(c, {"llama.embedding_length", "string"});
}

TEST(GgufModel, MissingExtraOrMisshapenTensorsAreNamed) {
  gguf::Contents c = tiny_llama();
  c.tensors.erase(c.tensors.begin() + 5);  // blk.0.attn_output.weight
  expect_error(c, {"blk.0.attn_output.weight", "no such tensor"});
  c = tiny_llama();
  c.tensors.push_back({"rope_freqs.weight", {2}, quant::Type::F32, std::vector<uint8_t>(8)});
  expect_error(c, {"rope_freqs.weight", "not modelled"});
  c = tiny_llama();
  c.tensors[3].dims = {8, 2};  // attn_k [2, 8] for kv_heads 1 × head_dim 4
  c.tensors[3].data.resize(64);
  expect_error(c, {"blk.0.attn_k.weight", "[4,8]"});
}

TEST(GgufTokenizer, BadMetadataIsAFormatErrorNamingTheKey) {
  auto with = [](std::initializer_list<std::pair<std::string, Value>> kvs) {
    gguf::Contents c;
    c.metadata = kvs;
    return file_of(c);
  };
  auto expect = [](const gguf::File& f, const std::string& key, const std::string& part) {
    try {
      (void)gguf::tokenizer_data(f);
      ADD_FAILURE() << "expected a FormatError for " << key;
    } catch (const FormatError& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find(key), std::string::npos) << w;
      EXPECT_NE(w.find(part), std::string::npos) << w;
    }
  };
  const Value toks = Value::string_array({"a", "b", "ab"});
  expect(with({{"tokenizer.ggml.model", Value::of_string("bert")}, {"tokenizer.ggml.tokens", toks}}),
         "tokenizer.ggml.model", "gpt2, llama");
  expect(with({{"tokenizer.ggml.model", Value::of_string("llama")}, {"tokenizer.ggml.tokens", toks}}),
         "tokenizer.ggml.scores", "no such key");
  expect(with({{"tokenizer.ggml.model", Value::of_string("llama")},
               {"tokenizer.ggml.tokens", toks},
               {"tokenizer.ggml.scores", Value::array_of(gguf::ValueType::F32, std::vector<float>{0, 1})}}),
         "tokenizer.ggml.scores", "3 elements");
  expect(with({{"tokenizer.ggml.model", Value::of_string("gpt2")},
               {"tokenizer.ggml.tokens", toks},
               {"tokenizer.ggml.token_type",
                Value::array_of(gguf::ValueType::I32, std::vector<int32_t>{1, 9, 1})}}),
         "tokenizer.ggml.token_type", "9");
  expect(with({{"tokenizer.ggml.model", Value::of_string("gpt2")},
               {"tokenizer.ggml.tokens", toks},
               {"tokenizer.ggml.merges", Value::string_array({"a b"})},
               {"tokenizer.ggml.pre", Value::of_string("deepseek-coder")}}),
         "tokenizer.ggml.pre", "deepseek-coder");
  expect(with({{"tokenizer.ggml.model", Value::of_string("gpt2")}, {"tokenizer.ggml.tokens", toks}}),
         "tokenizer.ggml.merges", "no such key");
  expect(with({{"tokenizer.ggml.model", Value::of_string("gpt2")},
               {"tokenizer.ggml.tokens", toks},
               {"tokenizer.ggml.merges", Value::string_array({"a b"})},
               {"tokenizer.ggml.pre", Value::of_string("smollm")},
               {"tokenizer.ggml.add_bos_token", Value::of_bool(true)}}),
         "tokenizer.ggml.add_bos_token", "bos_token_id");
}

// llama.cpp's defaults: a SentencePiece vocabulary without the keys has <unk> 0, <s> 1, </s> 2 and adds BOS;
// an id outside the vocabulary keeps the default.
TEST(GgufTokenizer, SentencePieceDefaultsAreLlamaCpps) {
  gguf::Contents c;
  c.metadata = {
      {"tokenizer.ggml.model", Value::of_string("llama")},
      {"tokenizer.ggml.tokens", Value::string_array({"<unk>", "<s>", "</s>",
                                                     "\xe2\x96\x81"
                                                     "a"})},
      {"tokenizer.ggml.scores", Value::array_of(gguf::ValueType::F32, std::vector<float>{0, 0, 0, -1})},
      {"tokenizer.ggml.eos_token_id", Value::of_u32(99)}};
  const TokenizerData d = gguf::tokenizer_data(file_of(c));
  EXPECT_EQ(d.model, TokenizerData::Model::Spm);
  EXPECT_EQ(d.unk_id, 0);
  EXPECT_EQ(d.bos_id, 1);
  EXPECT_EQ(d.eos_id, 2);
  EXPECT_TRUE(d.add_bos);
  EXPECT_TRUE(d.add_space_prefix);
  EXPECT_EQ(Tokenizer::from_data(d).encode("a"), (std::vector<int32_t>{1, 3}));
}
