#include "meganeura/models/llama.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "meganeura/core/error.hpp"

namespace meganeura::models {

LlamaConfig LlamaConfig::smollm2_135m() {
  LlamaConfig c;
  c.vocab = 49152;
  c.hidden = 576;
  c.layers = 30;
  c.heads = 9;
  c.kv_heads = 3;
  c.intermediate = 1536;
  c.rope_theta = 100000.0;
  c.rms_eps = 1e-5;
  c.tied_embeddings = true;
  c.max_context = 2048;
  return c;
}

namespace {

void check(const LlamaConfig& c, int64_t batch, int64_t seq) {
  auto fail = [](const std::string& what) { throw ConfigError("[models::build_llama] expected " + what); };
  if (c.vocab <= 0 || c.hidden <= 0 || c.layers <= 0 || c.heads <= 0 || c.kv_heads <= 0 ||
      c.intermediate <= 0)
    fail("positive sizes, got vocab " + std::to_string(c.vocab) + ", hidden " + std::to_string(c.hidden) +
         ", layers " + std::to_string(c.layers) + ", heads " + std::to_string(c.heads) + ", kv_heads " +
         std::to_string(c.kv_heads) + ", intermediate " + std::to_string(c.intermediate));
  if (c.hidden % c.heads)
    fail("hidden a multiple of heads, got " + std::to_string(c.hidden) + " and " + std::to_string(c.heads));
  if (c.heads % c.kv_heads)
    fail("heads a multiple of kv_heads, got " + std::to_string(c.heads) + " and " +
         std::to_string(c.kv_heads));
  if (c.head_dim() % 2) fail("an even head_dim, got " + std::to_string(c.head_dim()));
  if (!c.tensor_dtypes.empty()) {
    const auto params = llama_parameters(c);
    for (const auto& [name, dtype] : c.tensor_dtypes)
      if (std::none_of(params.begin(), params.end(), [&](const auto& p) { return p.first == name; }))
        fail("tensor_dtypes to name parameters of this config, got \"" + name + "\"");
  }
  if (batch <= 0 || seq <= 0 || seq > c.max_context)
    fail("batch > 0 and 0 < seq <= max_context " + std::to_string(c.max_context) + ", got batch " +
         std::to_string(batch) + ", seq " + std::to_string(seq));
}

std::string blk(int64_t n, const std::string& leaf) { return "blk." + std::to_string(n) + "." + leaf; }

}  // namespace

std::vector<std::pair<std::string, Shape>> llama_parameters(const LlamaConfig& c) {
  const int64_t d = c.head_dim();
  std::vector<std::pair<std::string, Shape>> p = {{"token_embd.weight", {c.vocab, c.hidden}}};
  for (int64_t n = 0; n < c.layers; ++n) {
    p.push_back({blk(n, "attn_norm.weight"), {c.hidden}});
    p.push_back({blk(n, "attn_q.weight"), {c.heads * d, c.hidden}});
    p.push_back({blk(n, "attn_k.weight"), {c.kv_heads * d, c.hidden}});
    p.push_back({blk(n, "attn_v.weight"), {c.kv_heads * d, c.hidden}});
    if (c.attn_bias) {
      p.push_back({blk(n, "attn_q.bias"), {c.heads * d}});
      p.push_back({blk(n, "attn_k.bias"), {c.kv_heads * d}});
      p.push_back({blk(n, "attn_v.bias"), {c.kv_heads * d}});
    }
    p.push_back({blk(n, "attn_output.weight"), {c.hidden, c.heads * d}});
    p.push_back({blk(n, "ffn_norm.weight"), {c.hidden}});
    p.push_back({blk(n, "ffn_gate.weight"), {c.intermediate, c.hidden}});
    p.push_back({blk(n, "ffn_up.weight"), {c.intermediate, c.hidden}});
    p.push_back({blk(n, "ffn_down.weight"), {c.hidden, c.intermediate}});
  }
  p.push_back({"output_norm.weight", {c.hidden}});
  if (!c.tied_embeddings) p.push_back({"output.weight", {c.vocab, c.hidden}});
  return p;
}

DType LlamaConfig::dtype_of(const std::string& parameter) const {
  const auto it = tensor_dtypes.find(parameter);
  return it == tensor_dtypes.end() ? weight_dtype : it->second;
}

std::map<std::string, std::vector<float>> llama_random_weights(const LlamaConfig& c, uint64_t seed) {
  std::map<std::string, std::vector<float>> w;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::uniform_real_distribution<float> near_one(0.9f, 1.1f);
  for (const auto& [name, shape] : llama_parameters(c)) {
    std::vector<float> v(size_t(numel(shape)));
    const bool norm = name.find("norm") != std::string::npos;
    for (float& x : v) x = norm ? near_one(rng) : normal(rng);
    w[name] = std::move(v);
  }
  return w;
}

LlamaStep build_llama(const LlamaConfig& c, int64_t batch, int64_t seq) {
  check(c, batch, seq);  // before the tokens input's shape is checked
  LlamaStep out;
  out.batch = batch;
  out.seq = seq;
  Graph& g = out.graph;
  const NodeId tokens = g.input("tokens", {batch, seq}, DType::I32);
  g.set_outputs({llama_logits(g, c, batch, seq, tokens)});
  return out;
}

NodeId llama_logits(Graph& g, const LlamaConfig& c, int64_t batch, int64_t seq, NodeId tokens) {
  check(c, batch, seq);
  const int64_t B = batch, S = seq, T = c.max_context, D = c.head_dim(), H = c.heads, Hkv = c.kv_heads;
  std::map<std::string, NodeId> p;
  for (const auto& [name, shape] : llama_parameters(c)) p[name] = g.parameter(name, shape, c.dtype_of(name));
  const NodeId start = g.input("start", {B}, DType::I32);
  const NodeId last = g.input("last", {B}, DType::I32);

  // Activations are f32 whatever the weights' dtype: x·Wᵀ of an f16 weight reads it through a 16-bit load.
  auto f32 = [&](NodeId x) { return g.node(x).dtype == DType::F32 ? x : g.cast(x, DType::F32); };
  auto linear = [&](NodeId x, const std::string& w) { return g.matmul(x, p.at(w), false, true); };
  auto projection = [&](NodeId x, int64_t n,
                        const char* which) {  // attn_q/k/v, with its bias where the config has one
    const NodeId y = linear(x, blk(n, std::string(which) + ".weight"));
    return c.attn_bias ? g.add(y, f32(p.at(blk(n, std::string(which) + ".bias")))) : y;
  };
  auto heads = [&](NodeId x, int64_t h) { return g.permute(g.reshape(x, {B, S, h, D}), {0, 2, 1, 3}); };

  // Key t of a sequence is visible to its query s when t <= start + s (0 where visible, -inf elsewhere).
  std::vector<float> ts(static_cast<size_t>(T)), ss(static_cast<size_t>(S));
  for (int64_t t = 0; t < T; ++t) ts[size_t(t)] = float(t);
  for (int64_t s = 0; s < S; ++s) ss[size_t(s)] = float(s);
  const NodeId query_pos =
      g.add(g.reshape(g.cast(start, DType::F32), {B, 1, 1, 1}), g.constant(ss, {1, 1, S, 1}));
  const NodeId visible = g.le(g.constant(ts, {1, 1, 1, T}), query_pos);
  const NodeId mask = g.named(g.where(visible, g.scalar(0.0), g.scalar(-INFINITY)), "attn_mask");

  NodeId x = g.named(f32(g.embedding(p.at("token_embd.weight"), tokens)), "embd");
  for (int64_t n = 0; n < c.layers; ++n) {
    const NodeId h = g.rms_norm(x, p.at(blk(n, "attn_norm.weight")), c.rms_eps);
    const NodeId q = g.rope(heads(projection(h, n, "attn_q"), H), start, c.rope_theta);
    const NodeId k = g.rope(heads(projection(h, n, "attn_k"), Hkv), start, c.rope_theta);
    const NodeId v = heads(projection(h, n, "attn_v"), Hkv);
    const NodeId kc = g.write_slice(g.state(blk(n, "k_cache"), {B, Hkv, T, D}, c.cache_dtype), k, start, 2);
    const NodeId vc = g.write_slice(g.state(blk(n, "v_cache"), {B, Hkv, T, D}, c.cache_dtype), v, start, 2);
    const NodeId a = g.scaled_dot_product_attention(q, kc, vc, false, mask);
    const NodeId merged = g.reshape(g.permute(a, {0, 2, 1, 3}), {B, S, H * D});
    x = g.add(x, linear(merged, blk(n, "attn_output.weight")));
    const NodeId h2 = g.rms_norm(x, p.at(blk(n, "ffn_norm.weight")), c.rms_eps);
    const NodeId act =
        g.mul(g.silu(linear(h2, blk(n, "ffn_gate.weight"))), linear(h2, blk(n, "ffn_up.weight")));
    x = g.named(g.add(x, linear(act, blk(n, "ffn_down.weight"))), blk(n, "out"));
  }
  // Only each sequence's `last` row reaches the norm and the head: row b·S + last[b] of x as [B·S, hidden].
  std::vector<float> row0(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) row0[size_t(b)] = float(b * S);
  const NodeId rows = g.cast(g.add(g.constant(row0, {B}), g.cast(last, DType::F32)), DType::I32);
  const NodeId xl = g.gather(g.reshape(x, {B * S, c.hidden}), rows);
  const NodeId xn = g.rms_norm(xl, p.at("output_norm.weight"), c.rms_eps);
  const NodeId head = c.tied_embeddings ? p.at("token_embd.weight") : p.at("output.weight");
  return g.named(g.matmul(xn, head, false, true), "logits");
}

}  // namespace meganeura::models
