// Autodiff: gradients by handle and name, chaining, stop_gradient, unused parameters, compact backward.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "gradcheck.hpp"
#include "meganeura/autodiff/autodiff.hpp"
#include "meganeura/reference/interpreter.hpp"

namespace meganeura {
namespace {

using test::gradcheck;
using test::random_tensor;

TEST(Autodiff, HeadlineExampleGradcheck) {
  Graph g;
  auto x = g.input("x", {4, 6});
  auto labels = g.input("labels", {4, 3});
  auto w1 = g.parameter("w1", {6, 5});
  auto h = g.relu(g.matmul(x, w1));
  auto w2 = g.parameter("w2", {5, 3});
  auto logits = g.matmul(h, w2);
  auto loss = g.cross_entropy_loss(logits, labels);
  g.set_outputs({loss});
  std::mt19937_64 rng(7);
  reference::Feeds f;
  f["x"] = random_tensor({4, 6}, rng);
  f["w1"] = random_tensor({6, 5}, rng);
  f["w2"] = random_tensor({5, 3}, rng);
  HostTensor t({4, 3});
  for (int r = 0; r < 4; ++r) t[size_t(r * 3 + r % 3)] = 1.0;
  f["labels"] = t;
  EXPECT_TRUE(gradcheck(g, loss, f, {w1, w2}));
}

TEST(Autodiff, GradientsAreFoundByHandleAndNamed) {
  Graph g;
  auto a = g.parameter("a", {3});
  auto b = g.parameter("b", {3});
  auto x = g.input("x", {3});
  auto loss = g.sum(g.mul(b, x));  // uses b only; a comes first so position would mislead
  Graph dg = differentiate(g, loss);
  ASSERT_TRUE(dg.gradient(a).has_value());
  ASSERT_TRUE(dg.gradient(b).has_value());
  EXPECT_EQ(dg.find("grad/a"), dg.gradient(a));
  EXPECT_EQ(dg.find("grad/b"), dg.gradient(b));
  reference::Feeds f{{"a", HostTensor({3}, {1, 1, 1})},
                     {"b", HostTensor({3}, {1, 2, 3})},
                     {"x", HostTensor({3}, {4, 5, 6})}};
  auto gb = reference::evaluate(dg, f, *dg.gradient(b));
  EXPECT_EQ(gb.data, (std::vector<double>{4, 5, 6}));
  // The original graph is untouched and its ids keep their meaning.
  EXPECT_FALSE(g.gradient(b).has_value());
  for (uint32_t i = 0; i < g.size(); ++i) EXPECT_EQ(dg.node(NodeId{i}).op, g.node(NodeId{i}).op);
}

TEST(Autodiff, UnusedParameterGetsAnExactZeroFillAndNoWork) {
  Graph g;
  auto used = g.parameter("used", {4});
  auto unused = g.parameter("unused", {64, 64});
  auto loss = g.sum(g.square(used));
  Graph dg = differentiate(g, loss);
  NodeId gz = *dg.gradient(unused);
  const Node& n = dg.node(gz);
  EXPECT_EQ(n.op, Op::Fill);
  EXPECT_EQ(n.attrs.reals, std::vector<double>{0.0});
  EXPECT_EQ(n.shape, (Shape{64, 64}));
  // Nothing else was built for it: only the used parameter's chain and this fill are new.
  Graph only_used = differentiate(g, loss, {used});
  EXPECT_EQ(dg.size(), only_used.size() + 1);
}

TEST(Autodiff, StopGradientBlocksThePath) {
  Graph g;
  auto w = g.parameter("w", {3});
  auto loss = g.sum(g.mul(g.stop_gradient(w), w));
  Graph dg = differentiate(g, loss);
  reference::Feeds f{{"w", HostTensor({3}, {1, -2, 3})}};
  // d/dw [sg(w) w] = sg(w) = w, not 2w.
  EXPECT_EQ(reference::evaluate(dg, f, *dg.gradient(w)).data, (std::vector<double>{1, -2, 3}));
  // And a graph whose only path is stopped gets a zero fill.
  auto loss2 = g.sum(g.stop_gradient(g.square(w)));
  Graph dg2 = differentiate(g, loss2);
  EXPECT_EQ(dg2.node(*dg2.gradient(w)).op, Op::Fill);
  // The checker sees the difference to the finite-difference derivative (2w): it can fail.
  EXPECT_FALSE(gradcheck(g, loss, f, {w}));
}

TEST(Autodiff, GradientOfAnInputThatAsks) {
  Graph g;
  auto x = g.input("x", {2, 3});
  auto w = g.parameter("w", {3, 2});
  auto loss = g.sum(g.tanh(g.matmul(x, w)));
  std::mt19937_64 rng(3);
  reference::Feeds f{{"x", random_tensor({2, 3}, rng)}, {"w", random_tensor({3, 2}, rng)}};
  EXPECT_TRUE(gradcheck(g, loss, f, {x, w}));
  Graph dg = differentiate(g, loss, {x});
  EXPECT_TRUE(dg.find("grad/x").has_value());
  EXPECT_FALSE(dg.gradient(w).has_value());
}

TEST(Autodiff, LossMustBeAScalar) {
  Graph g;
  auto w = g.parameter("w", {3});
  EXPECT_THROW(differentiate(g, g.square(w)), ShapeError);
}

TEST(Autodiff, BackwardNodesCarryTheForwardLineAndRule) {
  Graph g;
  auto x = g.input("x", {2, 3});
  auto w = g.parameter("w", {3, 4});
  int line = __LINE__ + 1;
  auto h = g.matmul(x, w);
  auto loss = g.sum(h);
  Graph dg = differentiate(g, loss);
  const Node& gw = dg.node(*dg.gradient(w));
  EXPECT_EQ(gw.op, Op::MatMul);
  EXPECT_TRUE(gw.attrs.flag_a);  // x^T G without a materialised transpose
  EXPECT_EQ(gw.prov.rule, "autodiff");
  EXPECT_EQ(gw.prov.loc.line(), uint32_t(line));
  EXPECT_EQ(gw.prov.derived_from, std::vector<NodeId>{h});
  for (uint32_t i = uint32_t(g.size()); i < dg.size(); ++i) EXPECT_NE(dg.node(NodeId{i}).op, Op::Permute);
}

// The backward of softmax cross-entropy at a large vocabulary stays a few pointwise/row nodes: no ones
// matrix, no one-hot constant of the logits' size, no matmul.
TEST(Autodiff, CrossEntropyBackwardIsCompact) {
  const int64_t N = 64, V = 49152;
  for (bool index : {false, true}) {
    Graph g;
    auto h = g.input("h", {N, 32});
    auto w = g.parameter("w", {32, V});
    auto logits = g.matmul(h, w);
    auto loss = index ? g.cross_entropy_loss_index(logits, g.input("labels", {N}, DType::I32))
                      : g.cross_entropy_loss(logits, g.input("targets", {N, V}));
    Graph dg = differentiate(g, loss);
    size_t added = dg.size() - g.size();
    EXPECT_LE(added, 16u) << dg.to_text();
    int matmuls = 0;
    for (uint32_t i = uint32_t(g.size()); i < dg.size(); ++i) {
      const Node& n = dg.node(NodeId{i});
      if (n.op == Op::MatMul) ++matmuls;
      if (n.op == Op::Fill || n.op == Op::Constant) {
        EXPECT_LT(numel(n.shape), N * V) << dg.to_text();
      }
    }
    EXPECT_EQ(matmuls, 1);  // h^T dlogits only
  }
}

TEST(Autodiff, SharedSubexpressionsSumTheirContributions) {
  Graph g;
  auto w = g.parameter("w", {2, 2});
  auto y = g.mul(w, w);  // w used twice by one node
  auto loss = g.add(g.sum(y), g.sum(g.matmul(w, w)));
  std::mt19937_64 rng(5);
  reference::Feeds f{{"w", random_tensor({2, 2}, rng)}};
  EXPECT_TRUE(gradcheck(g, loss, f, {w}));
}

// Relu, leaky relu and elu differentiate through their output (so the pre-activation fuses into the
// producing matmul's epilogue); the slope at the kinks and at NaN must be what the input gives: relu'(0) = 0
// for 0 and -0, leaky'(0) = the slope (also for a negative slope, which reads the input), 0 / slope at NaN.
TEST(Autodiff, ActivationSlopesAtZeroAndNaN) {
  const double nan = std::nan("");
  const std::vector<double> xs{0.0, -0.0, nan, 1.5, -1.5, 1e-30, -1e-30};
  struct Case {
    const char* name;
    std::function<NodeId(Graph&, NodeId)> f;
    std::vector<double> slope;  // d f / d x at xs (NaN: not compared)
  };
  const double e = std::exp(-1.5);
  std::vector<Case> cases{
      {"relu", [](Graph& g, NodeId x) { return g.relu(x); }, {0, 0, 0, 1, 0, 1, 0}},
      {"leaky_relu 0.1",
       [](Graph& g, NodeId x) { return g.leaky_relu(x, 0.1); },
       {0.1, 0.1, 0.1, 1, 0.1, 1, 0.1}},
      {"leaky_relu -0.3",
       [](Graph& g, NodeId x) { return g.leaky_relu(x, -0.3); },
       {-0.3, -0.3, -0.3, 1, -0.3, 1, -0.3}},
      {"elu 0.7", [](Graph& g, NodeId x) { return g.elu(x, 0.7); }, {0.7, 0.7, nan, 1, 0.7 * e, 1, 0.7}},
      {"elu -0.5",
       [](Graph& g, NodeId x) { return g.elu(x, -0.5); },
       {-0.5, -0.5, nan, 1, -0.5 * e, 1, -0.5}},
  };
  for (const Case& c : cases) {
    Graph g;
    NodeId x = g.parameter("x", {7});
    NodeId r = g.input("r", {7});
    NodeId loss = g.sum(g.mul(c.f(g, x), r));
    Graph dg = differentiate(g, loss);
    std::vector<double> rv{1, 2, 3, 4, 5, 6, 7};
    reference::Feeds f{{"x", HostTensor({7}, xs)}, {"r", HostTensor({7}, rv)}};
    HostTensor gx = reference::evaluate(dg, f, *dg.gradient(x));
    for (size_t i = 0; i < xs.size(); ++i) {
      if (std::isnan(c.slope[i])) continue;
      EXPECT_NEAR(gx[i], c.slope[i] * rv[i], 1e-12) << c.name << " at x = " << xs[i];
    }
  }
}

// A linear layer on [B, S, D] activations: the weight's gradient is one Xᵀ·dY matmul over K = B·S (reshapes
// of x and dy, no batched product, no sum over the batch), for W and for a transposed Wᵀ (a tied head), and
// finite differences of the reference agree.
TEST(Autodiff, WeightGradientOfBatchedActivationsFoldsTheBatchIntoK) {
  for (bool tb : {false, true}) {
    Graph g;
    auto x = g.parameter("x", {2, 3, 4});
    auto w = g.parameter("w", tb ? Shape{5, 4} : Shape{4, 5});
    auto r = g.input("r", {2, 3, 5});
    auto loss = g.sum(g.mul(g.tanh(g.matmul(x, w, false, tb)), r));
    Graph dg = differentiate(g, loss, {x, w});
    const Node& gw = dg.node(*dg.gradient(w));
    ASSERT_EQ(gw.op, Op::MatMul) << dg.to_text();
    EXPECT_TRUE(gw.attrs.flag_a);
    EXPECT_FALSE(gw.attrs.flag_b);
    EXPECT_EQ(dg.node(gw.inputs[0]).shape, (Shape{6, tb ? 5 : 4}));
    EXPECT_EQ(dg.node(gw.inputs[1]).shape, (Shape{6, tb ? 4 : 5}));
    for (uint32_t i = uint32_t(g.size()); i < dg.size(); ++i) EXPECT_NE(dg.node(NodeId{i}).op, Op::Sum);
    std::mt19937_64 rng(5);
    reference::Feeds feeds{{"x", random_tensor({2, 3, 4}, rng)},
                           {"w", random_tensor(g.node(w).shape, rng)},
                           {"r", random_tensor({2, 3, 5}, rng)}};
    EXPECT_TRUE(gradcheck(g, loss, feeds, {x, w})) << "transpose_b " << tb;
  }
}

}  // namespace
}  // namespace meganeura
