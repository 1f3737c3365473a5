#pragma once
// The models the profiling tools (profile_session, pipeline_stats) build, as training graphs with a loss:
//   mlp          the README's 784-128-10 MLP (nn::Mlp "mlp")
//   cnn          the Fashion-MNIST CNN of examples/mnist.cpp --model cnn (cnn_logits: conv 3x3 1->32, pool,
//                conv 3x3 32->64, pool, 3136-128-10), built from nn layers so that dispatches carry layer
//                names
//   transformer  one nn::TransformerBlock "blk0" (sequence 16, width 64, 4 heads, SwiGLU FFN 128, RoPE,
//                causal) with a mean-squared-error loss
// Inputs get seeded random values (labels one-hot) by feed_random.
#include <random>
#include <string>

#include "meganeura/meganeura.hpp"
#include "meganeura/nn/nn.hpp"

namespace meganeura::examples {

// The Fashion-MNIST CNN's logits [batch, 10] from flat images x [batch, 784]: conv 3x3 1->32, relu, pool 2,
// conv 3x3 32->64, relu, pool 2, 3136-128 relu, 128-10. Parameters conv1.weight, conv1.bias, .., fc2.bias
// (the names examples/mnist.cpp checkpoints under).
inline NodeId cnn_logits(Graph& g, nn::Context& ctx, NodeId x, int64_t batch) {
  nn::Conv2d conv1(ctx, "conv1", 1, 32, 3, 1, 1);
  nn::MaxPool2d pool1(ctx, "pool1", 2);
  nn::Conv2d conv2(ctx, "conv2", 32, 64, 3, 1, 1);
  nn::MaxPool2d pool2(ctx, "pool2", 2);
  nn::Linear fc1(ctx, "fc1", 64 * 7 * 7, 128);
  nn::Linear fc2(ctx, "fc2", 128, 10);
  NodeId t = g.reshape(x, {batch, 1, 28, 28});
  t = pool1(g.relu(conv1(t)));
  t = pool2(g.relu(conv2(t)));
  t = g.relu(fc1(g.reshape(t, {batch, 64 * 7 * 7})));
  return fc2(t);
}

inline NodeId build_model(Graph& g, nn::Context& ctx, const std::string& model, int64_t batch) {
  if (model == "mlp") {
    NodeId x = g.input("x", {batch, 784});
    NodeId y = g.input("labels", {batch, 10});
    nn::Mlp mlp(ctx, "mlp", {784, 128, 10});
    return g.named(g.cross_entropy_loss(mlp(x), y), "loss");
  }
  if (model == "cnn") {
    NodeId logits = cnn_logits(g, ctx, g.input("x", {batch, 784}), batch);
    return g.named(g.cross_entropy_loss(logits, g.input("labels", {batch, 10})), "loss");
  }
  if (model == "transformer") {
    constexpr int64_t seq = 16, dim = 64;
    nn::AttentionConfig attn;
    attn.dim = dim;
    attn.heads = 4;
    attn.kv_heads = 4;
    nn::TransformerBlock block(ctx, "blk0", attn, 128);
    NodeId x = g.input("x", {batch, seq, dim});
    return g.named(g.mse_loss(block(x), g.input("target", {batch, seq, dim})), "loss");
  }
  throw ConfigError("[build_model] expected a model mlp, cnn or transformer, got '" + model + "'");
}

// Seeded values in [-1, 1) for every input; an input named "labels" [batch, classes] gets one-hot rows.
inline void feed_random(Session& s, uint32_t seed = 7) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (NodeId in : s.graph().inputs()) {
    const Node& n = s.graph().node(in);
    std::vector<float> v(size_t(numel(n.shape)));
    for (float& f : v) f = u(rng);
    if (n.prov.name == "labels") {
      const int64_t classes = n.shape.back();
      std::fill(v.begin(), v.end(), 0.0f);
      for (int64_t r = 0; r < n.shape.front(); ++r)
        v[size_t(r * classes + int64_t(rng() % uint32_t(classes)))] = 1.0f;
    }
    s.set_input(n.prov.name, v);
  }
}

}  // namespace meganeura::examples
