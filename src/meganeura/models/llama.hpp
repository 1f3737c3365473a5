#pragma once
// A Llama-family decoder (SmolLM2, TinyLlama, Llama 2/3 layouts): token embedding, `layers` blocks of
// RMSNorm → grouped-query attention with RoPE → residual, RMSNorm → SwiGLU MLP → residual, a final RMSNorm
// and the head (tied to the embedding or its own). build_llama makes one step graph over a KV cache of
// `max_context` positions per layer; a prefill graph (S = prompt bucket) and a decode graph (S = 1) built
// from one config have the same parameter and state names, so a decode session built with share_with = the
// prefill session uses the same weights and cache (meganeura::build(g, config, share_with)).
//
// Parameter names follow GGUF / llama.cpp. Linear weights are [out, in] row-major (GGUF's ne = {in, out}, the
// Hugging Face nn.Linear layout); the graph multiplies x·Wᵀ.
//
//   ours / GGUF                 shape            Hugging Face (LlamaForCausalLM)
//   token_embd.weight           [vocab, hidden]  model.embed_tokens.weight
//   blk.N.attn_norm.weight      [hidden]         model.layers.N.input_layernorm.weight
//   blk.N.attn_q.weight         [H·D, hidden]    model.layers.N.self_attn.q_proj.weight
//   blk.N.attn_k.weight         [Hkv·D, hidden]  model.layers.N.self_attn.k_proj.weight
//   blk.N.attn_v.weight         [Hkv·D, hidden]  model.layers.N.self_attn.v_proj.weight
//   blk.N.attn_{q,k,v}.bias     [H·D], [Hkv·D]   model.layers.N.self_attn.{q,k,v}_proj.bias  (attn_bias:
//   Qwen2) blk.N.attn_output.weight    [hidden, H·D]    model.layers.N.self_attn.o_proj.weight
//   blk.N.ffn_norm.weight       [hidden]         model.layers.N.post_attention_layernorm.weight
//   blk.N.ffn_gate.weight       [inter, hidden]  model.layers.N.mlp.gate_proj.weight
//   blk.N.ffn_up.weight         [inter, hidden]  model.layers.N.mlp.up_proj.weight
//   blk.N.ffn_down.weight       [hidden, inter]  model.layers.N.mlp.down_proj.weight
//   output_norm.weight          [hidden]         model.norm.weight
//   output.weight               [vocab, hidden]  lm_head.weight (absent when tied)
//
// RoPE rotates halves (pairs i, i + D/2 of each head), as Hugging Face's Llama does. llama.cpp's converter
// permutes the rows of attn_q and attn_k within each head to its interleaved-pair rotation; a GGUF loader
// undoes that permutation (row 2i of a head's GGUF block is HF row i, row 2i+1 is HF row i + D/2).
//
// States: blk.N.k_cache and blk.N.v_cache, [batch, kv_heads, max_context, head_dim].
// Inputs of a step: tokens i32 [batch, S]; start i32 [batch], the number of cached positions of each sequence
// before this step (its tokens go to positions start .. start + S - 1); last i32 [batch], the row of each
// sequence whose logits are returned (0..S-1: the last real token of a padded prompt, 0 in decode).
// Output: logits f32 [batch, vocab]. A query at position p attends to cache positions 0..p of its sequence,
// so cache rows beyond a sequence's length (padding written by a bucketed prefill) are never seen before a
// later step overwrites them.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "meganeura/ir/graph.hpp"

namespace meganeura::models {

struct LlamaConfig {
  int64_t vocab = 49152, hidden = 576, layers = 30, heads = 9, kv_heads = 3, intermediate = 1536;
  double rope_theta = 100000.0, rms_eps = 1e-5;
  bool tied_embeddings = true;
  bool attn_bias = false;  // q, k and v projections add a bias (Qwen2)
  int64_t max_context = 2048;
  DType weight_dtype = DType::F32;  // parameters as stored on the device (loaders keep a checkpoint's dtype)
  DType cache_dtype = DType::F32;   // KV cache
  // Per-parameter storage dtype where it differs from weight_dtype (a GGUF file mixes types: f32 norms,
  // Q6_K output, Q4_1 elsewhere). Keys are parameter names; names that are not parameters are a ConfigError.
  std::map<std::string, DType> tensor_dtypes;
  DType dtype_of(const std::string& parameter) const;
  int64_t head_dim() const { return hidden / heads; }
  static LlamaConfig smollm2_135m();  // HuggingFaceTB/SmolLM2-135M's config.json
};

struct LlamaStep {
  Graph graph;
  int64_t batch = 1, seq = 1;
};

// The step graph for `batch` sequences of `seq` tokens each. Throws ConfigError for an inconsistent config
// (hidden not a multiple of heads, heads not a multiple of kv_heads, odd head_dim, seq > max_context).
LlamaStep build_llama(const LlamaConfig& config, int64_t batch, int64_t seq);
// The same step inside `g`, reading token ids from `tokens` (i32 [batch, seq]: the `tokens` input, or a state
// that a sampler writes, models/generate.cpp); adds the parameters, states and the start and last inputs, and
// returns the logits node.
NodeId llama_logits(Graph& g, const LlamaConfig& config, int64_t batch, int64_t seq, NodeId tokens);

// Every parameter's name and shape, in a fixed order (for loaders and random initialisation).
std::vector<std::pair<std::string, Shape>> llama_parameters(const LlamaConfig& config);

// Seeded random weights for every parameter (normal, std 0.02; norm weights 1 ± 0.1), for tests and
// benchmarks.
std::map<std::string, std::vector<float>> llama_random_weights(const LlamaConfig& config, uint64_t seed);

}  // namespace meganeura::models
