// nn layers: parameter and output names, seeded initialisation, shapes, errors.
#include <gtest/gtest.h>

#include <cmath>

#include "meganeura/nn/nn.hpp"
#include "meganeura/reference/interpreter.hpp"

using namespace meganeura;
using namespace meganeura::nn;

namespace {

const Shape& shape_of(Graph& g, NodeId id) { return g.node(id).shape; }

}  // namespace

TEST(Nn, LinearNamesParametersAndOutputUnderScopes) {
  Graph g;
  Context c(g, 7);
  auto x = g.input("x", {2, 4});
  NodeId y;
  {
    auto s = c.scope("blk3");
    auto s2 = c.scope("attn");
    Linear qkv(c, "qkv", 4, 6);
    y = qkv(x);
    EXPECT_EQ(qkv.name(), "blk3.attn.qkv");
  }
  EXPECT_EQ(shape_of(g, y), (Shape{2, 6}));
  EXPECT_EQ(g.find("blk3.attn.qkv"), y);
  EXPECT_EQ(g.node(y).prov.name, "blk3.attn.qkv");
  ASSERT_TRUE(c.weights().count("blk3.attn.qkv.weight"));
  ASSERT_TRUE(c.weights().count("blk3.attn.qkv.bias"));
  EXPECT_EQ(c.weights().at("blk3.attn.qkv.weight").size(), 24u);
  EXPECT_EQ(c.weights().at("blk3.attn.qkv.bias").size(), 6u);
  EXPECT_TRUE(g.find("blk3.attn.qkv.weight").has_value());
  EXPECT_EQ(c.qualify("after"), "after");  // scopes ended
}

TEST(Nn, LayerCalledOutsideItsScopeKeepsItsName) {
  Graph g;
  Context c(g);
  std::optional<Linear> l;
  {
    auto s = c.scope("enc");
    l.emplace(c, "fc", 3, 3, false);
  }
  NodeId y = (*l)(g.input("x", {1, 3}));
  EXPECT_EQ(g.node(y).prov.name, "enc.fc");
}

TEST(Nn, InitialisationIsSeededAndIndependentOfCreationOrder) {
  auto make = [](uint64_t seed, bool swap) {
    Graph g;
    Context c(g, seed);
    if (swap) {
      Linear b(c, "b", 8, 8);
      Linear a(c, "a", 16, 8);
    } else {
      Linear a(c, "a", 16, 8);
      Linear b(c, "b", 8, 8);
    }
    return c.weights();
  };
  auto w1 = make(42, false), w2 = make(42, true), w3 = make(43, false);
  EXPECT_EQ(w1, w2);
  EXPECT_NE(w1.at("a.weight"), w3.at("a.weight"));
  EXPECT_NE(w1.at("a.weight"), w1.at("b.weight"));
}

TEST(Nn, InitialiserDistributions) {
  const size_t n = 20000;
  auto stats = [](const std::vector<float>& v) {
    double m = 0, s = 0, mx = 0;
    for (float x : v) m += x;
    m /= double(v.size());
    for (float x : v) {
      s += (x - m) * (x - m);
      mx = std::max(mx, std::abs(double(x)));
    }
    return std::array<double, 3>{m, std::sqrt(s / double(v.size())), mx};
  };
  // Kaiming uniform: U(-b, b), b = sqrt(6 / fan_in) = 0.5 for fan_in 24; std = b / sqrt(3)
  auto ku = stats(initialise(Init::KaimingUniform, n, 24, 1, 1.0, 1, "w"));
  EXPECT_LE(ku[2], 0.5);
  EXPECT_NEAR(ku[0], 0.0, 0.01);
  EXPECT_NEAR(ku[1], 0.5 / std::sqrt(3.0), 0.01);
  // Xavier normal: std = sqrt(2 / (fan_in + fan_out)) = 0.25 for 16 + 16
  auto xn = stats(initialise(Init::XavierNormal, n, 16, 16, 1.0, 1, "w"));
  EXPECT_NEAR(xn[1], 0.25, 0.01);
  auto nn = stats(initialise(Init::Normal, n, 1, 1, 0.02, 1, "w"));
  EXPECT_NEAR(nn[1], 0.02, 0.001);
  auto kn = stats(initialise(Init::KaimingNormal, n, 8, 1, 1.0, 1, "w"));
  EXPECT_NEAR(kn[1], 0.5, 0.01);
  for (float v : initialise(Init::Ones, 5, 1, 1, 1.0, 1, "w")) EXPECT_EQ(v, 1.0f);
  for (float v : initialise(Init::Zeros, 5, 1, 1, 1.0, 1, "w")) EXPECT_EQ(v, 0.0f);
}

TEST(Nn, MlpShapesAndNames) {
  Graph g;
  Context c(g, 1);
  Mlp mlp(c, "mlp", {784, 128, 10});
  NodeId y = mlp(g.input("x", {32, 784}));
  EXPECT_EQ(shape_of(g, y), (Shape{32, 10}));
  EXPECT_EQ(g.node(y).prov.name, "mlp");
  EXPECT_TRUE(g.find("mlp.fc0").has_value());
  EXPECT_TRUE(c.weights().count("mlp.fc1.weight"));
  EXPECT_EQ(c.weights().size(), 4u);
  EXPECT_THROW(Mlp(c, "bad", {3}), ShapeError);
}

TEST(Nn, ConvBatchNormShapes) {
  Graph g;
  Context c(g, 1);
  Conv2d conv(c, "conv1", 3, 8, 3, 2, 1);
  BatchNorm2d bn(c, "bn1", 8, true);
  NodeId y = bn(conv(g.input("img", {2, 3, 9, 9})));
  EXPECT_EQ(shape_of(g, y), (Shape{2, 8, 5, 5}));
  EXPECT_EQ(c.weights().at("conv1.weight").size(), size_t(8 * 3 * 3 * 3));
  EXPECT_EQ(c.buffers().at("bn1.running_var"), std::vector<float>(8, 1.0f));
  EXPECT_EQ(c.weights().at("bn1.weight"), std::vector<float>(8, 1.0f));
  EXPECT_FALSE(c.weights().count("bn1.running_mean"));              // state, not trainable
  EXPECT_THROW(Conv2d(c, "bad", 3, 8, 3, 1, 0, 1, 2), ShapeError);  // 3 channels, 2 groups
}

TEST(Nn, TransformerBlockShapesAndNames) {
  Graph g;
  Context c(g, 3);
  AttentionConfig cfg;
  cfg.dim = 16;
  cfg.heads = 4;
  cfg.kv_heads = 2;
  NodeId x = g.input("x", {2, 5, 16});
  NodeId y;
  {
    auto s = c.scope("blk3");
    TransformerBlock blk(c, "", cfg, 24);
    y = blk(x);
  }
  EXPECT_EQ(shape_of(g, y), (Shape{2, 5, 16}));
  EXPECT_EQ(g.node(y).prov.name, "blk3");
  for (const char* n : {"blk3.attn.qkv", "blk3.attn.q", "blk3.attn.k_rope", "blk3.attn", "blk3.ffn.gate",
                        "blk3.ffn", "blk3.attn_norm", "blk3.attn_residual"})
    EXPECT_TRUE(g.find(n).has_value()) << n;
  // q: 4 heads x 4, k and v: 2 heads x 4 each
  EXPECT_EQ(shape_of(g, *g.find("blk3.attn.qkv")), (Shape{2, 5, 32}));
  EXPECT_EQ(shape_of(g, *g.find("blk3.attn.k")), (Shape{2, 2, 5, 4}));
  for (const char* p :
       {"blk3.attn.qkv.weight", "blk3.attn.o.weight", "blk3.ffn.up.weight", "blk3.ffn_norm.weight"})
    EXPECT_TRUE(c.weights().count(p)) << p;
  EXPECT_EQ(c.weights().size(), 7u);
}

TEST(Nn, EmbeddingAndNorms) {
  Graph g;
  Context c(g, 5);
  Embedding emb(c, "tok", 10, 6, 0.02);
  LayerNorm ln(c, "ln", 6);
  RMSNorm rn(c, "rn", 6);
  NodeId t = emb(g.input("ids", {2, 3}, DType::I32));
  EXPECT_EQ(shape_of(g, t), (Shape{2, 3, 6}));
  EXPECT_EQ(shape_of(g, rn(ln(t))), (Shape{2, 3, 6}));
  EXPECT_EQ(g.node(t).prov.name, "tok");
}

TEST(Nn, PoolingLayersShapesAndNames) {
  Graph g;
  Context c(g, 1);
  auto s = c.scope("blk");
  MaxPool2d mp(c, "pool", 2);
  AvgPool2d ap(c, "avg", 3, 2, 1);
  NodeId x = g.input("img", {2, 3, 9, 8});
  NodeId y = mp(x);
  EXPECT_EQ(shape_of(g, y), (Shape{2, 3, 4, 4}));
  EXPECT_EQ(g.node(y).prov.name, "blk.pool");
  EXPECT_EQ(g.node(y).op, Op::MaxPool2d);
  NodeId z = ap(x);
  EXPECT_EQ(shape_of(g, z), (Shape{2, 3, 5, 4}));
  EXPECT_EQ(g.node(z).prov.name, "blk.avg");
  EXPECT_TRUE(c.weights().empty());
  EXPECT_THROW(MaxPool2d(c, "bad", 0), ShapeError);
  EXPECT_THROW(AvgPool2d(c, "bad", 2, 1, -1), ShapeError);
}

TEST(Nn, ConfigurationErrors) {
  Graph g;
  Context c(g);
  AttentionConfig cfg;
  cfg.dim = 12;
  cfg.heads = 4;
  cfg.kv_heads = 3;
  EXPECT_THROW(MultiHeadAttention(c, "a", cfg), ShapeError);
  cfg.kv_heads = 2;
  cfg.dim = 4;  // head_dim 1: odd, RoPE impossible
  EXPECT_THROW(MultiHeadAttention(c, "b", cfg), ShapeError);
  Linear(c, "dup", 2, 2);
  EXPECT_THROW(Linear(c, "dup", 2, 2), GraphError);
  EXPECT_THROW(Linear(c, "zero", 0, 2), ShapeError);
}

TEST(Nn, LinearComputesXWPlusBFromItsHostWeights) {
  Graph g;
  Context c(g, 9);
  Linear l(c, "fc", 3, 2);
  NodeId y = l(g.input("x", {2, 3}));
  reference::Feeds f{{"x", HostTensor({2, 3}, std::vector<double>{1, 2, 3, -1, 0, 0.5})}};
  for (const auto& [name, v] : c.weights())
    f[name] = HostTensor(g.node(*g.find(name)).shape, {v.begin(), v.end()});
  const auto& w = c.weights().at("fc.weight");  // [in, out] row-major
  const auto& b = c.weights().at("fc.bias");
  HostTensor got = reference::evaluate(g, f, y);
  const auto& x = f.at("x").data;
  for (int r = 0; r < 2; ++r)
    for (int o = 0; o < 2; ++o) {
      double want = b[o];
      for (int i = 0; i < 3; ++i) want += x[r * 3 + i] * double(w[i * 2 + o]);
      EXPECT_NEAR(got.data[r * 2 + o], want, 1e-12);
    }
  // torch's bias bound 1/sqrt(in)
  for (float v : b) EXPECT_LE(std::abs(v), 1.0 / std::sqrt(3.0));
}

TEST(Nn, BatchNormBatchStatisticsAndRunningUpdate) {
  Graph g;
  Context c(g);
  BatchNorm2d bn(c, "bn", 1, true);
  auto [mean, var] = bn.batch_statistics(g.input("x", {2, 1, 1, 2}));
  EXPECT_EQ(g.find("bn.batch_mean"), mean);
  reference::Feeds f{{"x", HostTensor({2, 1, 1, 2}, std::vector<double>{1, 2, 3, 6})}};
  auto v = reference::evaluate(g, f, {mean, var});
  EXPECT_NEAR(v[0].data.at(0), 3.0, 1e-12);
  EXPECT_NEAR(v[1].data.at(0), 14.0 / 3.0, 1e-12);  // (4 + 1 + 0 + 9) / (4 - 1)
  std::vector<float> running{1.0f};
  update_running(running, {3.0f}, 0.1);
  EXPECT_FLOAT_EQ(running[0], 1.2f);
  EXPECT_THROW(update_running(running, {1.0f, 2.0f}), ShapeError);
}
