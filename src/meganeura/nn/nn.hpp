#pragma once
// nn layers: small structs that add nodes to a Graph. Each layer creates its parameters through a
// Context, which gives them hierarchical names ("blk3.attn.qkv.weight") and seeded initial values kept on
// the host, and names the layer's output after the layer ("blk3.attn.qkv") with Graph::named.
//
// Initial values depend only on (context seed, parameter name), never on creation order, so adding a
// layer does not change the weights of the others.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "meganeura/ir/graph.hpp"

namespace meganeura::nn {

// The initialisation rules and their generator live in ir/init.hpp (a session applies them at build).
using meganeura::Init;
using meganeura::initialise;

class Context {
 public:
  explicit Context(Graph& g, uint64_t seed = 0) : g_(g), seed_(seed) {}
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Graph& graph() { return g_; }
  uint64_t seed() const { return seed_; }

  // A name prefix for everything created while the guard lives: `auto s = ctx.scope("blk3");`.
  class Scope {
   public:
    Scope(Context& c, const std::string& name) : c_(&c) { c_->stack_.push_back(name); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() { c_->stack_.pop_back(); }

   private:
    Context* c_;
  };
  [[nodiscard]] Scope scope(const std::string& name) { return Scope(*this, name); }

  // "blk3.attn" + "." + leaf; an empty leaf gives the prefix alone.
  std::string qualify(const std::string& leaf) const;

  // A trainable parameter with seeded initial values recorded under its qualified name, and its rule recorded
  // in the graph (Graph::set_init), so that a session built from the graph starts from the same values.
  NodeId parameter(const std::string& leaf, Shape shape, Init init, int64_t fan_in = 1, int64_t fan_out = 1,
                   double std = 1.0);
  // A non-trainable state tensor (running statistics): a graph input with initial host values.
  NodeId buffer(const std::string& leaf, Shape shape, float value);

  // Parameter values by name, ready to upload into a session.
  const std::map<std::string, std::vector<float>>& weights() const { return weights_; }
  // Buffer values (batch-norm running statistics) by name, fed as inputs.
  const std::map<std::string, std::vector<float>>& buffers() const { return buffers_; }

 private:
  Graph& g_;
  uint64_t seed_;
  std::vector<std::string> stack_;
  std::map<std::string, std::vector<float>> weights_, buffers_;
};

// Base for layers: remembers the full name given at construction, so calling a layer later (outside the
// scope it was made in) still names its output correctly.
class Layer {
 public:
  const std::string& name() const { return name_; }

 protected:
  Layer(Context& c, const std::string& leaf) : ctx_(&c), name_(c.qualify(leaf)) {}
  NodeId name_output(NodeId x, const std::string& leaf = "") const;
  std::string sub(const std::string& leaf) const { return name_ + "." + leaf; }
  Context* ctx_;
  std::string name_;
};

// y = x·W + b with W [in, out]; x may have any leading dimensions.
class Linear : public Layer {
 public:
  Linear(Context& c, const std::string& name, int64_t in, int64_t out, bool bias = true,
         Init init = Init::KaimingUniform);
  NodeId operator()(NodeId x) const;
  NodeId weight;
  std::optional<NodeId> bias;
  int64_t in, out;
};

enum class Activation { Relu, Gelu, Silu, Tanh, None };

// Linear layers fc0, fc1, ... of the given sizes with an activation between them (not after the last).
class Mlp : public Layer {
 public:
  Mlp(Context& c, const std::string& name, std::vector<int64_t> sizes, Activation act = Activation::Relu,
      bool bias = true);
  NodeId operator()(NodeId x) const;
  std::vector<Linear> layers;
  Activation act;
};

// NCHW convolution; weight [Cout, Cin/groups, K, K], bias [Cout].
class Conv2d : public Layer {
 public:
  Conv2d(Context& c, const std::string& name, int64_t in_channels, int64_t out_channels, int64_t kernel,
         int64_t stride = 1, int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1, bool bias = true);
  NodeId operator()(NodeId x) const;
  NodeId weight;
  std::optional<NodeId> bias;
  int64_t stride, padding, dilation, groups;
};

// Square-window pooling over NCHW (no parameters; the layer names its output). stride 0 means stride =
// kernel.
class MaxPool2d : public Layer {
 public:
  MaxPool2d(Context& c, const std::string& name, int64_t kernel, int64_t stride = 0, int64_t padding = 0);
  NodeId operator()(NodeId x) const;
  int64_t kernel, stride, padding;
};

// Padded cells count in the divisor (torch's count_include_pad default).
class AvgPool2d : public Layer {
 public:
  AvgPool2d(Context& c, const std::string& name, int64_t kernel, int64_t stride = 0, int64_t padding = 0);
  NodeId operator()(NodeId x) const;
  int64_t kernel, stride, padding;
};

// Training mode normalises by batch statistics; evaluation mode by the running statistics, which are graph
// inputs named <name>.running_mean / <name>.running_var (the trainer owns their update).
class BatchNorm2d : public Layer {
 public:
  BatchNorm2d(Context& c, const std::string& name, int64_t channels, bool training, double eps = 1e-5);
  NodeId operator()(NodeId x) const;
  // The batch's per-channel mean and unbiased variance (what torch folds into the running statistics),
  // named <name>.batch_mean / <name>.batch_var, for a trainer to read and pass to update_running().
  std::pair<NodeId, NodeId> batch_statistics(NodeId x) const;
  NodeId weight, bias, running_mean, running_var;
  bool training;
  double eps;
};

// running = (1 - momentum) * running + momentum * batch, torch's convention (momentum 0.1 by default).
void update_running(std::vector<float>& running, const std::vector<float>& batch, double momentum = 0.1);

class LayerNorm : public Layer {
 public:
  LayerNorm(Context& c, const std::string& name, int64_t dim, double eps = 1e-5);
  NodeId operator()(NodeId x) const;
  NodeId weight, bias;
  double eps;
};

class RMSNorm : public Layer {
 public:
  RMSNorm(Context& c, const std::string& name, int64_t dim, double eps = 1e-6);
  NodeId operator()(NodeId x) const;
  NodeId weight;
  double eps;
};

class Embedding : public Layer {
 public:
  Embedding(Context& c, const std::string& name, int64_t vocab, int64_t dim, double std = 1.0);
  NodeId operator()(NodeId indices) const;  // I32 indices [...] -> [..., dim]
  NodeId weight;
};

struct AttentionConfig {
  int64_t dim = 64;
  int64_t heads = 4;
  int64_t kv_heads = 4;  // fewer than heads: grouped-query attention
  bool causal = true;
  bool rope = true;
  double rope_theta = 10000.0;
  bool bias = false;
};

// x [B, S, dim] -> [B, S, dim]. One fused projection "qkv", split into q/k/v heads, RoPE on q and k,
// scaled dot-product attention, output projection "o".
class MultiHeadAttention : public Layer {
 public:
  MultiHeadAttention(Context& c, const std::string& name, AttentionConfig cfg);
  NodeId operator()(NodeId x, int64_t position_offset = 0, std::optional<NodeId> mask = std::nullopt) const;
  AttentionConfig cfg;
  int64_t head_dim;
  Linear qkv, o;
};

// down(silu(gate(x)) * up(x)), no biases.
class SwiGluFfn : public Layer {
 public:
  SwiGluFfn(Context& c, const std::string& name, int64_t dim, int64_t hidden);
  NodeId operator()(NodeId x) const;
  Linear gate, up, down;
};

// Pre-norm block: h = x + attn(attn_norm(x)); y = h + ffn(ffn_norm(h)).
class TransformerBlock : public Layer {
 public:
  TransformerBlock(Context& c, const std::string& name, AttentionConfig attn, int64_t ffn_hidden,
                   double norm_eps = 1e-6);
  NodeId operator()(NodeId x, int64_t position_offset = 0) const;
  RMSNorm attn_norm;
  MultiHeadAttention attn;
  RMSNorm ffn_norm;
  SwiGluFfn ffn;
};

// A Llama-style decoder (SmolLM2's architecture): token embedding, `layers` pre-norm TransformerBlocks with
// RoPE, grouped-query attention and SwiGLU, a final RMSNorm, and the head tied to the embedding
// (logits = h · embedᵀ). Names: embed.weight, blk{i}.*, norm.weight.
struct CausalLmConfig {
  int64_t vocab = 49152, dim = 576, layers = 30, heads = 9, kv_heads = 3, ffn_hidden = 1536;
  double rope_theta = 100000.0, norm_eps = 1e-5, embed_std = 0.02;
  static CausalLmConfig smollm2_135m() { return {}; }
};

class CausalLm : public Layer {
 public:
  CausalLm(Context& c, const std::string& name, CausalLmConfig cfg);
  NodeId operator()(NodeId tokens, int64_t position_offset = 0) const;  // I32 [B, S] -> logits [B, S, vocab]
  CausalLmConfig cfg;
  Embedding embed;
  std::vector<TransformerBlock> blocks;
  RMSNorm norm;
};

}  // namespace meganeura::nn
