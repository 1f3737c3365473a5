#include "meganeura/nn/nn.hpp"

#include <cmath>
#include <numbers>

namespace meganeura::nn {

namespace {

std::string join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + "." + b;
}

void check_positive(const char* where, const std::string& name, std::initializer_list<int64_t> values) {
  for (int64_t v : values)
    if (v <= 0)
      throw ShapeError(std::string("[") + where + "] expected positive sizes for '" + name + "', got " +
                       std::to_string(v));
}

}  // namespace

std::string Context::qualify(const std::string& leaf) const {
  std::string prefix;
  for (const auto& s : stack_) prefix = join(prefix, s);
  return join(prefix, leaf);
}

NodeId Context::parameter(const std::string& leaf, Shape shape, Init init, int64_t fan_in, int64_t fan_out,
                          double std) {
  std::string name = qualify(leaf);
  if (weights_.count(name) || buffers_.count(name))
    throw GraphError("[nn::Context::parameter] expected a new parameter name, got '" + name + "' twice");
  weights_[name] = initialise(init, static_cast<size_t>(numel(shape)), fan_in, fan_out, std, seed_, name);
  const NodeId p = g_.parameter(name, std::move(shape));
  g_.set_init(p, ParamInit{init, fan_in, fan_out, std, seed_});
  return p;
}

NodeId Context::buffer(const std::string& leaf, Shape shape, float value) {
  std::string name = qualify(leaf);
  if (weights_.count(name) || buffers_.count(name))
    throw GraphError("[nn::Context::buffer] expected a new buffer name, got '" + name + "' twice");
  buffers_[name] = std::vector<float>(static_cast<size_t>(numel(shape)), value);
  return g_.input(name, std::move(shape));
}

NodeId Layer::name_output(NodeId x, const std::string& leaf) const {
  return ctx_->graph().named(x, join(name_, leaf));
}

// ---------------------------------------------------------------------------------------------- Linear
Linear::Linear(Context& c, const std::string& name, int64_t in_, int64_t out_, bool with_bias, Init init)
    : Layer(c, name), in(in_), out(out_) {
  check_positive("nn::Linear", name_, {in, out});
  weight = c.parameter(join(name, "weight"), {in, out}, init, in, out);
  if (with_bias) {
    // torch's convention: bias drawn from U(-1/sqrt(in), 1/sqrt(in)): Kaiming-uniform sqrt(6/fan_in) with
    // fan_in 6*in
    bias = c.parameter(join(name, "bias"), {out}, Init::KaimingUniform, 6 * in, out);
  }
}

NodeId Linear::operator()(NodeId x) const {
  Graph& g = ctx_->graph();
  NodeId y = g.matmul(x, weight);
  if (bias) y = g.add(y, *bias);
  return name_output(y);
}

// ---------------------------------------------------------------------------------------------- Mlp
static NodeId activate(Graph& g, NodeId x, Activation act) {
  switch (act) {
    case Activation::Relu: return g.relu(x);
    case Activation::Gelu: return g.gelu(x);
    case Activation::Silu: return g.silu(x);
    case Activation::Tanh: return g.tanh(x);
    case Activation::None: return x;
  }
  return x;
}

Mlp::Mlp(Context& c, const std::string& name, std::vector<int64_t> sizes, Activation act_, bool bias)
    : Layer(c, name), act(act_) {
  if (sizes.size() < 2)
    throw ShapeError("[nn::Mlp] expected at least two sizes (input and output) for '" + name_ + "', got " +
                     std::to_string(sizes.size()));
  for (size_t i = 0; i + 1 < sizes.size(); ++i)
    layers.emplace_back(c, join(name, "fc" + std::to_string(i)), sizes[i], sizes[i + 1], bias,
                        i + 2 < sizes.size() ? Init::KaimingUniform : Init::XavierUniform);
}

NodeId Mlp::operator()(NodeId x) const {
  for (size_t i = 0; i < layers.size(); ++i) {
    x = layers[i](x);
    if (i + 1 < layers.size()) x = activate(ctx_->graph(), x, act);
  }
  return name_output(x);
}

// ---------------------------------------------------------------------------------------------- Conv2d
Conv2d::Conv2d(Context& c, const std::string& name, int64_t cin, int64_t cout, int64_t kernel,
               int64_t stride_, int64_t padding_, int64_t dilation_, int64_t groups_, bool with_bias)
    : Layer(c, name), stride(stride_), padding(padding_), dilation(dilation_), groups(groups_) {
  check_positive("nn::Conv2d", name_, {cin, cout, kernel, stride, dilation, groups});
  if (cin % groups || cout % groups)
    throw ShapeError("[nn::Conv2d] expected channels divisible by groups=" + std::to_string(groups) +
                     " for '" + name_ + "', got in=" + std::to_string(cin) + " out=" + std::to_string(cout));
  const int64_t fan_in = cin / groups * kernel * kernel;
  const int64_t fan_out = cout / groups * kernel * kernel;
  weight = c.parameter(join(name, "weight"), {cout, cin / groups, kernel, kernel}, Init::KaimingUniform,
                       fan_in, fan_out);
  if (with_bias) bias = c.parameter(join(name, "bias"), {cout}, Init::KaimingUniform, 6 * fan_in, fan_out);
}

NodeId Conv2d::operator()(NodeId x) const {
  Graph& g = ctx_->graph();
  NodeId y = g.conv2d(x, weight, {stride, stride}, {padding, padding}, {dilation, dilation}, groups);
  if (bias) {
    const int64_t cout = g.node(weight).shape[0];
    y = g.add(y, g.reshape(*bias, {cout, 1, 1}));
  }
  return name_output(y);
}

// ---------------------------------------------------------------------------------------------- pooling
MaxPool2d::MaxPool2d(Context& c, const std::string& name, int64_t kernel_, int64_t stride_, int64_t padding_)
    : Layer(c, name), kernel(kernel_), stride(stride_ > 0 ? stride_ : kernel_), padding(padding_) {
  check_positive("nn::MaxPool2d", name_, {kernel, stride, padding + 1});
}

NodeId MaxPool2d::operator()(NodeId x) const {
  return name_output(ctx_->graph().max_pool2d(x, {kernel, kernel}, {stride, stride}, {padding, padding}));
}

AvgPool2d::AvgPool2d(Context& c, const std::string& name, int64_t kernel_, int64_t stride_, int64_t padding_)
    : Layer(c, name), kernel(kernel_), stride(stride_ > 0 ? stride_ : kernel_), padding(padding_) {
  check_positive("nn::AvgPool2d", name_, {kernel, stride, padding + 1});
}

NodeId AvgPool2d::operator()(NodeId x) const {
  return name_output(ctx_->graph().avg_pool2d(x, {kernel, kernel}, {stride, stride}, {padding, padding}));
}

// ---------------------------------------------------------------------------------------------- norms
BatchNorm2d::BatchNorm2d(Context& c, const std::string& name, int64_t channels, bool training_, double eps_)
    : Layer(c, name), training(training_), eps(eps_) {
  check_positive("nn::BatchNorm2d", name_, {channels});
  weight = c.parameter(join(name, "weight"), {channels}, Init::Ones);
  bias = c.parameter(join(name, "bias"), {channels}, Init::Zeros);
  running_mean = c.buffer(join(name, "running_mean"), {channels}, 0.0f);
  running_var = c.buffer(join(name, "running_var"), {channels}, 1.0f);
}

NodeId BatchNorm2d::operator()(NodeId x) const {
  return name_output(ctx_->graph().batch_norm(x, weight, bias, running_mean, running_var, training, eps));
}

std::pair<NodeId, NodeId> BatchNorm2d::batch_statistics(NodeId x) const {
  Graph& g = ctx_->graph();
  const Shape& xs = g.node(x).shape;
  if (xs.size() < 2)
    throw ShapeError("[nn::BatchNorm2d::batch_statistics] expected x [N, C, ...] for '" + name_ + "', got " +
                     shape_str(xs));
  std::vector<int64_t> axes{0};
  int64_t n = xs[0];
  for (size_t i = 2; i < xs.size(); ++i) {
    axes.push_back(int64_t(i));
    n *= xs[i];
  }
  NodeId mean = g.named(g.mean(x, axes), sub("batch_mean"));
  // unbiased, as torch's running_var expects
  NodeId var = g.mul(g.variance(x, axes), g.scalar(n > 1 ? double(n) / double(n - 1) : 1.0));
  return {mean, g.named(var, sub("batch_var"))};
}

void update_running(std::vector<float>& running, const std::vector<float>& batch, double momentum) {
  if (running.size() != batch.size())
    throw ShapeError("[nn::update_running] expected batch statistics of " + std::to_string(running.size()) +
                     " values, got " + std::to_string(batch.size()));
  for (size_t i = 0; i < running.size(); ++i)
    running[i] = float((1.0 - momentum) * double(running[i]) + momentum * double(batch[i]));
}

LayerNorm::LayerNorm(Context& c, const std::string& name, int64_t dim, double eps_)
    : Layer(c, name), eps(eps_) {
  check_positive("nn::LayerNorm", name_, {dim});
  weight = c.parameter(join(name, "weight"), {dim}, Init::Ones);
  bias = c.parameter(join(name, "bias"), {dim}, Init::Zeros);
}

NodeId LayerNorm::operator()(NodeId x) const {
  return name_output(ctx_->graph().layer_norm(x, weight, bias, eps));
}

RMSNorm::RMSNorm(Context& c, const std::string& name, int64_t dim, double eps_) : Layer(c, name), eps(eps_) {
  check_positive("nn::RMSNorm", name_, {dim});
  weight = c.parameter(join(name, "weight"), {dim}, Init::Ones);
}

NodeId RMSNorm::operator()(NodeId x) const { return name_output(ctx_->graph().rms_norm(x, weight, eps)); }

Embedding::Embedding(Context& c, const std::string& name, int64_t vocab, int64_t dim, double std)
    : Layer(c, name) {
  check_positive("nn::Embedding", name_, {vocab, dim});
  weight = c.parameter(join(name, "weight"), {vocab, dim}, Init::Normal, vocab, dim, std);
}

NodeId Embedding::operator()(NodeId indices) const {
  return name_output(ctx_->graph().embedding(weight, indices));
}

// ---------------------------------------------------------------------------------------------- attention
static int64_t checked_head_dim(const std::string& name, const AttentionConfig& cfg) {
  check_positive("nn::MultiHeadAttention", name, {cfg.dim, cfg.heads, cfg.kv_heads});
  if (cfg.dim % cfg.heads || cfg.heads % cfg.kv_heads)
    throw ShapeError("[nn::MultiHeadAttention] expected dim % heads == 0 and heads % kv_heads == 0 for '" +
                     name + "', got dim=" + std::to_string(cfg.dim) + " heads=" + std::to_string(cfg.heads) +
                     " kv_heads=" + std::to_string(cfg.kv_heads));
  const int64_t hd = cfg.dim / cfg.heads;
  if (cfg.rope && hd % 2)
    throw ShapeError("[nn::MultiHeadAttention] expected an even head dimension for RoPE in '" + name +
                     "', got " + std::to_string(hd));
  return hd;
}

MultiHeadAttention::MultiHeadAttention(Context& c, const std::string& name, AttentionConfig cfg_)
    : Layer(c, name),
      cfg(cfg_),
      head_dim(checked_head_dim(name_, cfg_)),
      qkv(c, join(name, "qkv"), cfg_.dim, (cfg_.heads + 2 * cfg_.kv_heads) * head_dim, cfg_.bias,
          Init::XavierUniform),
      o(c, join(name, "o"), cfg_.heads * head_dim, cfg_.dim, cfg_.bias, Init::XavierUniform) {}

NodeId MultiHeadAttention::operator()(NodeId x, int64_t position_offset, std::optional<NodeId> mask) const {
  Graph& g = ctx_->graph();
  const Shape& xs = g.node(x).shape;
  if (xs.size() != 3 || xs[2] != cfg.dim)
    throw ShapeError("[nn::MultiHeadAttention] expected x [B, S, " + std::to_string(cfg.dim) + "] for '" +
                     name_ + "', got " + shape_str(xs));
  const int64_t B = xs[0], S = xs[1], hq = cfg.heads, hkv = cfg.kv_heads, hd = head_dim;
  NodeId p = qkv(x);
  auto heads = [&](int64_t start, int64_t count, const char* leaf) {
    NodeId t = g.slice(p, 2, start * hd, (start + count) * hd);
    t = g.permute(g.reshape(t, {B, S, count, hd}), {0, 2, 1, 3});  // [B, H, S, hd]
    return g.named(t, sub(leaf));
  };
  NodeId q = heads(0, hq, "q");
  NodeId k = heads(hq, hkv, "k");
  NodeId v = heads(hq + hkv, hkv, "v");
  if (cfg.rope) {
    q = g.named(g.rope(q, cfg.rope_theta, position_offset), sub("q_rope"));
    k = g.named(g.rope(k, cfg.rope_theta, position_offset), sub("k_rope"));
  }
  NodeId a = g.scaled_dot_product_attention(q, k, v, cfg.causal, mask);
  a = g.named(g.reshape(g.permute(a, {0, 2, 1, 3}), {B, S, hq * hd}), sub("heads"));
  return name_output(o(a));
}

SwiGluFfn::SwiGluFfn(Context& c, const std::string& name, int64_t dim, int64_t hidden)
    : Layer(c, name),
      gate(c, join(name, "gate"), dim, hidden, false, Init::XavierUniform),
      up(c, join(name, "up"), dim, hidden, false, Init::XavierUniform),
      down(c, join(name, "down"), hidden, dim, false, Init::XavierUniform) {}

NodeId SwiGluFfn::operator()(NodeId x) const {
  Graph& g = ctx_->graph();
  return name_output(down(g.mul(g.silu(gate(x)), up(x))));
}

TransformerBlock::TransformerBlock(Context& c, const std::string& name, AttentionConfig acfg,
                                   int64_t ffn_hidden, double norm_eps)
    : Layer(c, name),
      attn_norm(c, join(name, "attn_norm"), acfg.dim, norm_eps),
      attn(c, join(name, "attn"), acfg),
      ffn_norm(c, join(name, "ffn_norm"), acfg.dim, norm_eps),
      ffn(c, join(name, "ffn"), acfg.dim, ffn_hidden) {}

NodeId TransformerBlock::operator()(NodeId x, int64_t position_offset) const {
  Graph& g = ctx_->graph();
  NodeId h = g.named(g.add(x, attn(attn_norm(x), position_offset)), sub("attn_residual"));
  return name_output(g.add(h, ffn(ffn_norm(h))));
}

// ---------------------------------------------------------------------------------------------- CausalLm
static std::vector<TransformerBlock> causal_lm_blocks(Context& c, const std::string& name,
                                                      const CausalLmConfig& cfg) {
  check_positive("nn::CausalLm", name, {cfg.vocab, cfg.layers, cfg.ffn_hidden});
  AttentionConfig a;
  a.dim = cfg.dim;
  a.heads = cfg.heads;
  a.kv_heads = cfg.kv_heads;
  a.rope_theta = cfg.rope_theta;
  std::vector<TransformerBlock> blocks;
  for (int64_t i = 0; i < cfg.layers; ++i)
    blocks.emplace_back(c, join(name, "blk" + std::to_string(i)), a, cfg.ffn_hidden, cfg.norm_eps);
  return blocks;
}

// Parameters are created in declaration order: embed, blk0.., norm.
CausalLm::CausalLm(Context& c, const std::string& name, CausalLmConfig cfg_)
    : Layer(c, name),
      cfg(cfg_),
      embed(c, join(name, "embed"), cfg_.vocab, cfg_.dim, cfg_.embed_std),
      blocks(causal_lm_blocks(c, name, cfg_)),
      norm(c, join(name, "norm"), cfg_.dim, cfg_.norm_eps) {}

NodeId CausalLm::operator()(NodeId tokens, int64_t position_offset) const {
  Graph& g = ctx_->graph();
  NodeId h = embed(tokens);
  for (const TransformerBlock& b : blocks) h = b(h, position_offset);
  return name_output(g.matmul(norm(h), embed.weight, false, true), "logits");
}

}  // namespace meganeura::nn
