#pragma once
// A GGUF file as a LanguageModel: the architecture and every hyper-parameter from its metadata, the weights
// from its tensors, the tokenizer it embeds. "A GGUF file needs nothing alongside it."
//
// Architectures: `llama` (SmolLM2, TinyLlama, Llama 2/3 layouts) and `qwen2` (the same block with q/k/v
// biases). llama.cpp's converter permutes the rows of a `llama` file's attn_q / attn_k (and their biases)
// within each head for its interleaved-pair RoPE; the loader undoes that so the graph's rotate-halves RoPE
// applies (llama.hpp). `qwen2` files are written unpermuted (llama.cpp runs them with NeoX-style RoPE, which
// is rotate-halves), so their rows are taken as they are.
//
// Weights: F32, F16, BF16 and the block types the kernels read (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K,
// Q6_K) are views into the file's mapping (no copy) unless permuted (whole rows of blocks move), and stay in
// that type on the device (WeightView::dtype names it). Other block types are dequantized on the host to F16
// in a buffer `storage` owns.
#include <string>

#include "meganeura/formats/gguf.hpp"
#include "meganeura/models/language_model.hpp"

namespace meganeura::models {

// The architectures load_gguf accepts.
std::vector<std::string> gguf_architectures();

// The LlamaConfig a file describes (no weights read). FormatError naming the file and the key or tensor for a
// missing or inconsistent hyper-parameter, an unsupported architecture (listing the supported ones) or a
// feature the graph does not model (partial RoPE, RoPE scaling, a head size other than hidden / heads).
LlamaConfig gguf_llama_config(const gguf::File& file);

LanguageModel load_gguf(const std::string& path);
LanguageModel load_gguf(gguf::File file);

}  // namespace meganeura::models
