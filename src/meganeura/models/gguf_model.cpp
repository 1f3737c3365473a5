#include "meganeura/models/gguf_model.hpp"

#include <algorithm>
#include <cstring>
#include <list>

#include "meganeura/core/error.hpp"
#include "meganeura/formats/gguf_tokenizer.hpp"
#include "meganeura/quant/half.hpp"
#include "meganeura/quant/quant.hpp"

namespace meganeura::models {

namespace {

[[noreturn]] void fail(const gguf::File& f, const std::string& what) {
  throw FormatError("[models::load_gguf] " + f.origin() + ": " + what);
}

std::string list(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

int64_t positive(const gguf::File& f, const std::string& key) {
  const uint64_t v = f.get_uint(key);
  if (v == 0 || v > (uint64_t(1) << 40))
    fail(f, "key '" + key + "': expected a positive size, got " + std::to_string(v));
  return static_cast<int64_t>(v);
}

// What the file keeps, and the buffers made from it; WeightView::bytes point into one of these.
struct Storage {
  gguf::File file;
  std::list<std::vector<uint8_t>> buffers;  // a list: adding one never moves another
};

// llama.cpp's converter stores row s·D/2 + i of each head (D rows) as row 2i + s; this puts them back.
std::vector<uint8_t> unpermute_rows(std::span<const uint8_t> src, int64_t rows, int64_t heads) {
  const int64_t d = rows / heads, half = d / 2;
  const size_t row_bytes = src.size() / size_t(rows);
  std::vector<uint8_t> out(src.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t s = 0; s < 2; ++s)
        std::memcpy(out.data() + size_t(h * d + s * half + i) * row_bytes,
                    src.data() + size_t(h * d + 2 * i + s) * row_bytes, row_bytes);
  return out;
}

DType plain_dtype(quant::Type t, bool* quantized) {
  *quantized = false;
  switch (t) {
    case quant::Type::F32: return DType::F32;
    case quant::Type::F16: return DType::F16;
    case quant::Type::BF16: return DType::BF16;
    // Block types the kernels read as they are (kept quantized on the device).
    case quant::Type::Q4_0: return DType::Q4_0;
    case quant::Type::Q4_1: return DType::Q4_1;
    case quant::Type::Q5_0: return DType::Q5_0;
    case quant::Type::Q5_1: return DType::Q5_1;
    case quant::Type::Q8_0: return DType::Q8_0;
    case quant::Type::Q4_K: return DType::Q4_K;
    case quant::Type::Q5_K: return DType::Q5_K;
    case quant::Type::Q6_K: return DType::Q6_K;
    // Others the CPU can dequantize but no kernel reads: F16 on the host (see gguf_model.hpp).
    default: *quantized = true; return DType::F16;
  }
}

}  // namespace

std::vector<std::string> gguf_architectures() { return {"llama", "qwen2"}; }

LlamaConfig gguf_llama_config(const gguf::File& f) {
  const std::string arch = f.architecture();
  const auto supported = gguf_architectures();
  if (std::find(supported.begin(), supported.end(), arch) == supported.end())
    fail(f, "key 'general.architecture': expected one of " + list(supported) + ", got \"" + arch + "\"");
  const std::string a = arch + ".";
  LlamaConfig c;
  c.tensor_dtypes.clear();
  c.hidden = positive(f, a + "embedding_length");
  c.layers = positive(f, a + "block_count");
  // Nine tensors a block: a count the file cannot back is refused before any per-layer list is made.
  if (uint64_t(c.layers) > f.tensors().size() / 9)
    fail(f, "key '" + a + "block_count': expected at most " + std::to_string(f.tensors().size() / 9) +
                " blocks for " + std::to_string(f.tensors().size()) + " tensors, got " +
                std::to_string(c.layers));
  c.intermediate = positive(f, a + "feed_forward_length");
  c.heads = positive(f, a + "attention.head_count");
  c.kv_heads = f.find(a + "attention.head_count_kv") ? positive(f, a + "attention.head_count_kv") : c.heads;
  c.max_context = positive(f, a + "context_length");
  c.rope_theta = f.find(a + "rope.freq_base") ? f.get_float(a + "rope.freq_base") : 10000.0;
  c.rms_eps = f.get_float(a + "attention.layer_norm_rms_epsilon");
  if (!(c.rope_theta > 0.0))
    fail(f, "key '" + a + "rope.freq_base': expected a positive base, got " + std::to_string(c.rope_theta));
  if (!(c.rms_eps >= 0.0))
    fail(f,
         "key '" + a + "attention.layer_norm_rms_epsilon': expected >= 0, got " + std::to_string(c.rms_eps));
  if (c.hidden % c.heads || (c.hidden / c.heads) % 2)
    fail(f, "key '" + a + "attention.head_count': expected a head count dividing " + a + "embedding_length " +
                std::to_string(c.hidden) + " into even head sizes, got " + std::to_string(c.heads));
  if (c.heads % c.kv_heads)
    fail(f, "key '" + a + "attention.head_count_kv': expected a divisor of head_count " +
                std::to_string(c.heads) + ", got " + std::to_string(c.kv_heads));
  const int64_t d = c.hidden / c.heads;
  for (const char* k : {"rope.dimension_count", "attention.key_length", "attention.value_length"})
    if (f.find(a + k) && f.get_uint(a + k) != uint64_t(d))
      fail(f, "key '" + a + k + "': expected embedding_length / head_count = " + std::to_string(d) +
                  " (partial RoPE and other head sizes are not modelled), got " +
                  std::to_string(f.get_uint(a + k)));
  if (f.find(a + "rope.scaling.type")) {
    const std::string& s = f.get_string(a + "rope.scaling.type");
    const bool unit =
        s == "linear" && f.find(a + "rope.scaling.factor") && f.get_float(a + "rope.scaling.factor") == 1.0;
    if (s != "none" && !unit)
      fail(f, "key '" + a + "rope.scaling.type': expected none (RoPE scaling is not modelled), got \"" + s +
                  "\"");
  }

  const gguf::TensorInfo& embd = f.tensor("token_embd.weight");
  if (embd.dims.size() != 2 || embd.dims[0] != uint64_t(c.hidden))
    fail(f, "tensor 'token_embd.weight': expected [vocab, " + std::to_string(c.hidden) + "], got " +
                shape_str(embd.shape()));
  c.vocab = embd.shape()[0];
  if (f.find(a + "vocab_size") && f.get_uint(a + "vocab_size") != uint64_t(c.vocab))
    fail(f, "key '" + a + "vocab_size': expected the rows of token_embd.weight (" + std::to_string(c.vocab) +
                "), got " + std::to_string(f.get_uint(a + "vocab_size")));
  if (const gguf::Value* tokens = f.find("tokenizer.ggml.tokens");
      tokens && tokens->count > uint64_t(c.vocab))
    fail(f, "key 'tokenizer.ggml.tokens': expected at most " + std::to_string(c.vocab) +
                " tokens (rows of token_embd.weight), got " + std::to_string(tokens->count));
  c.tied_embeddings = f.find_tensor("output.weight") == nullptr;
  c.attn_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;

  bool quantized = false;
  c.weight_dtype = plain_dtype(f.tensor("blk.0.attn_q.weight").type, &quantized);
  for (const auto& [name, shape] : llama_parameters(c)) {
    const gguf::TensorInfo* t = f.find_tensor(name);
    if (!t) fail(f, "expected tensor '" + name + "' of " + shape_str(shape) + ", got no such tensor");
    if (t->shape() != shape)
      fail(f, "tensor '" + name + "': expected shape " + shape_str(shape) + ", got " + shape_str(t->shape()));
    const DType dt = plain_dtype(t->type, &quantized);
    if (dt != c.weight_dtype) c.tensor_dtypes[name] = dt;
  }
  const size_t expected = llama_parameters(c).size();
  if (f.tensors().size() != expected) {
    std::vector<std::string> extra;
    const auto params = llama_parameters(c);
    for (const auto& t : f.tensors())
      if (std::none_of(params.begin(), params.end(), [&](const auto& p) { return p.first == t.name; }) &&
          extra.size() < 5)
        extra.push_back(t.name);
    fail(f, "expected the " + std::to_string(expected) + " tensors of a " + arch + " model, got " +
                std::to_string(f.tensors().size()) + " (not modelled: " + list(extra) + ")");
  }
  return c;
}

LanguageModel load_gguf(const std::string& path) { return load_gguf(gguf::File::open(path)); }

LanguageModel load_gguf(gguf::File file) {
  auto storage = std::make_shared<Storage>(Storage{std::move(file), {}});
  const gguf::File& f = storage->file;
  LanguageModel m;
  m.source = f.origin();
  m.architecture = f.architecture();
  m.config = gguf_llama_config(f);
  const LlamaConfig& c = m.config;
  const bool permuted = m.architecture == "llama";
  for (const auto& [name, shape] : llama_parameters(c)) {
    const gguf::TensorInfo& t = f.tensor(name);
    std::span<const uint8_t> bytes = f.tensor_data(t);
    const bool q = name.find(".attn_q.") != std::string::npos, k = name.find(".attn_k.") != std::string::npos;
    if (permuted && (q || k)) {
      storage->buffers.push_back(unpermute_rows(bytes, shape[0], q ? c.heads : c.kv_heads));
      bytes = storage->buffers.back();
    }
    bool quantized = false;
    const DType dt = plain_dtype(t.type, &quantized);
    if (quantized) {
      // A block type no kernel reads: dequantized to F16 on the host.
      const std::vector<float> v = quant::dequantize(t.type, bytes);
      std::vector<uint8_t> half(v.size() * 2);
      for (size_t i = 0; i < v.size(); ++i) {
        const uint16_t h = quant::f32_to_f16(v[i]);
        std::memcpy(half.data() + 2 * i, &h, 2);
      }
      storage->buffers.push_back(std::move(half));
      bytes = storage->buffers.back();
    }
    m.weights.push_back({name, dt, shape, std::as_bytes(bytes)});
  }

  if (f.find("tokenizer.ggml.model")) {
    const TokenizerData d = gguf::tokenizer_data(f);
    try {
      m.tokenizer = Tokenizer::from_data(d);
    } catch (const DataError& e) {
      fail(f, std::string("the embedded tokenizer: ") + e.what());
    }
    m.bos_id = d.bos_id;
    m.add_bos = d.add_bos;
    m.eos_ids = gguf::end_of_generation_ids(f, d);
    m.chat_template = d.chat_template;
  }
  m.storage = std::shared_ptr<const void>(storage, storage.get());
  return m;
}

}  // namespace meganeura::models
