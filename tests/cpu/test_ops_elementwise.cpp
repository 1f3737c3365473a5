// Finite-difference gradchecks (float64, through the reference interpreter) for every differentiable op of
// the elementwise, matmul, reduction, softmax, loss and basic movement families, each placed mid-graph.
#include <gtest/gtest.h>

#include "gradcheck.hpp"
#include "op_cases.hpp"

namespace meganeura {
namespace {

using test::gradcheck_op;
using test::InputSpec;

TEST(OpsGradcheck, Unary) {
  for (const test::UnaryCase& c : test::unary_cases()) {
    auto build = [&](Graph& g, const std::vector<NodeId>& in) { return c.f(g, in[0]); };
    EXPECT_TRUE(gradcheck_op(c.name, build, {InputSpec{{3, 4}, c.lo, c.hi}}));
  }
}

TEST(OpsGradcheck, GeluBackwardUsesTheForwardFormula) {
  // Same check with a tighter tolerance: a mismatched backward formula (erf vs tanh) differs by ~1e-3.
  for (bool tanh_form : {false, true}) {
    auto build = [&](Graph& g, const std::vector<NodeId>& in) { return g.gelu(in[0], tanh_form); };
    test::GradcheckOptions tight;
    tight.atol = 1e-8;
    tight.rtol = 1e-7;
    EXPECT_TRUE(gradcheck_op(tanh_form ? "gelu tanh" : "gelu erf", build, {InputSpec{{2, 5}, -3, 3}}, tight));
  }
}

struct BinaryCase {
  const char* name;
  std::function<NodeId(Graph&, NodeId, NodeId)> f;
  double lo, hi;
};

TEST(OpsGradcheck, BinaryWithBroadcasting) {
  const BinaryCase cases[] = {
      {"add", [](Graph& g, NodeId a, NodeId b) { return g.add(a, b); }, -2, 2},
      {"sub", [](Graph& g, NodeId a, NodeId b) { return g.sub(a, b); }, -2, 2},
      {"mul", [](Graph& g, NodeId a, NodeId b) { return g.mul(a, b); }, -2, 2},
      {"div", [](Graph& g, NodeId a, NodeId b) { return g.div(a, b); }, 0.5, 2},
      {"pow", [](Graph& g, NodeId a, NodeId b) { return g.pow(a, b); }, 0.5, 2},
      {"maximum", [](Graph& g, NodeId a, NodeId b) { return g.maximum(a, b); }, -2, 2},
      {"minimum", [](Graph& g, NodeId a, NodeId b) { return g.minimum(a, b); }, -2, 2},
  };
  const std::pair<Shape, Shape> shapes[] = {
      {{3, 4}, {3, 4}},     // same shape
      {{3, 4}, {4}},        // trailing broadcast
      {{2, 1, 4}, {3, 1}},  // both sides broadcast
      {{3, 4}, {}},         // scalar operand
      {{1}, {2, 3}},        // left side broadcast
  };
  for (const BinaryCase& c : cases)
    for (const auto& [sa, sb] : shapes) {
      auto build = [&](Graph& g, const std::vector<NodeId>& in) { return c.f(g, in[0], in[1]); };
      std::string label = std::string(c.name) + " " + shape_str(sa) + " " + shape_str(sb);
      EXPECT_TRUE(gradcheck_op(label, build, {InputSpec{sa, c.lo, c.hi}, InputSpec{sb, c.lo, c.hi}}));
    }
}

TEST(OpsGradcheck, WhereWithBroadcasting) {
  auto build = [](Graph& g, const std::vector<NodeId>& in) {
    return g.where(g.gt(in[0], g.scalar(0.0)), in[1], in[2]);
  };
  auto cond = [](std::mt19937_64& rng) { return test::random_tensor({3, 1}, rng); };
  EXPECT_TRUE(
      gradcheck_op("where", build,
                   {InputSpec{{3, 1}, -1, 1, false, DType::F32, cond}, InputSpec{{3, 4}}, InputSpec{{4}}}));
}

TEST(OpsGradcheck, MatMulAllLayoutsAndBatchBroadcast) {
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  const Case cases[] = {
      {{3, 4}, {4, 5}, false, false},     {{4, 3}, {4, 5}, true, false},
      {{3, 4}, {5, 4}, false, true},      {{4, 3}, {5, 4}, true, true},
      {{2, 3, 4}, {4, 5}, false, false},  {{2, 1, 3, 4}, {3, 4, 2}, false, false},
      {{2, 4, 3}, {2, 5, 4}, true, true}, {{3, 4}, {2, 2, 5, 4}, false, true},
  };
  for (const Case& c : cases) {
    auto build = [&](Graph& g, const std::vector<NodeId>& in) { return g.matmul(in[0], in[1], c.ta, c.tb); };
    std::string label =
        "matmul " + shape_str(c.a) + (c.ta ? "T" : "") + " x " + shape_str(c.b) + (c.tb ? "T" : "");
    EXPECT_TRUE(gradcheck_op(label, build, {InputSpec{c.a}, InputSpec{c.b}}));
  }
}

TEST(OpsGradcheck, Reductions) {
  using R = std::function<NodeId(Graph&, NodeId, std::vector<int64_t>, bool)>;
  const std::pair<const char*, R> ops[] = {
      {"sum", [](Graph& g, NodeId x, std::vector<int64_t> a, bool k) { return g.sum(x, a, k); }},
      {"mean", [](Graph& g, NodeId x, std::vector<int64_t> a, bool k) { return g.mean(x, a, k); }},
      {"max", [](Graph& g, NodeId x, std::vector<int64_t> a, bool k) { return g.max(x, a, k); }},
      {"min", [](Graph& g, NodeId x, std::vector<int64_t> a, bool k) { return g.min(x, a, k); }},
      {"variance", [](Graph& g, NodeId x, std::vector<int64_t> a, bool k) { return g.variance(x, a, k); }},
  };
  const std::pair<std::vector<int64_t>, bool> axes[] = {
      {{}, false}, {{1}, false}, {{0, 2}, true}, {{-1}, true}};
  for (const auto& [name, f] : ops)
    for (const auto& [ax, keep] : axes) {
      auto build = [&](Graph& g, const std::vector<NodeId>& in) { return f(g, in[0], ax, keep); };
      std::string label = std::string(name) + " axes " + shape_str(ax) + (keep ? " keepdim" : "");
      EXPECT_TRUE(gradcheck_op(label, build, {InputSpec{{2, 3, 4}}}));
    }
}

TEST(OpsGradcheck, SoftmaxAndLogSoftmax) {
  for (int64_t axis : {-1, 0, 1}) {
    auto sm = [&](Graph& g, const std::vector<NodeId>& in) { return g.softmax(in[0], axis); };
    auto lsm = [&](Graph& g, const std::vector<NodeId>& in) { return g.log_softmax(in[0], axis); };
    EXPECT_TRUE(gradcheck_op("softmax axis " + std::to_string(axis), sm, {InputSpec{{3, 4, 2}, -2, 2}}));
    EXPECT_TRUE(gradcheck_op("log_softmax axis " + std::to_string(axis), lsm, {InputSpec{{3, 4, 2}, -2, 2}}));
  }
}

HostTensor probabilities(const Shape& s, std::mt19937_64& rng) {
  HostTensor t = test::random_tensor(s, rng, 0.1, 1.0);
  size_t C = size_t(s.back());
  for (size_t r = 0; r < t.size() / C; ++r) {
    double sum = 0;
    for (size_t j = 0; j < C; ++j) sum += t[r * C + j];
    for (size_t j = 0; j < C; ++j) t[r * C + j] /= sum;
  }
  return t;
}

TEST(OpsGradcheck, CrossEntropyWithProbabilityTargets) {
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    auto build = [&](Graph& g, const std::vector<NodeId>& in) {
      return g.cross_entropy_loss(in[0], in[1], r);
    };
    auto targets = [](std::mt19937_64& rng) { return probabilities({2, 3, 5}, rng); };
    EXPECT_TRUE(
        gradcheck_op("cross_entropy logits", build,
                     {InputSpec{{2, 3, 5}, -2, 2}, InputSpec{{2, 3, 5}, 0, 1, false, DType::F32, targets}}));
    // Gradient w.r.t. the targets too (distillation); targets are normalised in the graph, since the
    // compact backward (softmax - targets) assumes rows that sum to 1.
    auto soft = [&](Graph& g, const std::vector<NodeId>& in) {
      return g.cross_entropy_loss(in[0], g.div(in[1], g.sum(in[1], {-1}, true)), r);
    };
    EXPECT_TRUE(gradcheck_op("cross_entropy targets", soft,
                             {InputSpec{{2, 3, 5}, -2, 2}, InputSpec{{2, 3, 5}, 0.1, 0.3}}));
  }
}

TEST(OpsGradcheck, CrossEntropyWithIndexLabelsAndIgnoreIndex) {
  auto labels = [](std::mt19937_64&) { return HostTensor({6}, std::vector<double>{0, 3, -100, 2, 4, -100}); };
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    auto build = [&](Graph& g, const std::vector<NodeId>& in) {
      return g.cross_entropy_loss_index(in[0], in[1], -100, r);
    };
    EXPECT_TRUE(gradcheck_op("cross_entropy_index", build,
                             {InputSpec{{6, 5}, -2, 2}, InputSpec{{6}, 0, 5, false, DType::I32, labels}}));
  }
}

TEST(OpsGradcheck, PointwiseLosses) {
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    auto mse = [&](Graph& g, const std::vector<NodeId>& in) { return g.mse_loss(in[0], in[1], r); };
    auto l1 = [&](Graph& g, const std::vector<NodeId>& in) { return g.l1_loss(in[0], in[1], r); };
    auto bce = [&](Graph& g, const std::vector<NodeId>& in) { return g.bce_with_logits(in[0], in[1], r); };
    EXPECT_TRUE(gradcheck_op("mse", mse, {InputSpec{{3, 4}}, InputSpec{{3, 4}}}));
    EXPECT_TRUE(gradcheck_op("l1", l1, {InputSpec{{3, 4}}, InputSpec{{3, 4}, 2, 3}}));
    EXPECT_TRUE(gradcheck_op("bce", bce, {InputSpec{{3, 4}, -3, 3}, InputSpec{{3, 4}, 0, 1}}));
  }
}

TEST(OpsGradcheck, BasicMovement) {
  auto rs = [](Graph& g, const std::vector<NodeId>& in) { return g.reshape(in[0], {4, -1}); };
  auto bc = [](Graph& g, const std::vector<NodeId>& in) { return g.broadcast_to(in[0], {2, 3, 4}); };
  auto pm = [](Graph& g, const std::vector<NodeId>& in) { return g.permute(in[0], {2, 0, 1}); };
  auto tr = [](Graph& g, const std::vector<NodeId>& in) { return g.transpose(in[0], 0, -1); };
  auto sq = [](Graph& g, const std::vector<NodeId>& in) { return g.unsqueeze(g.squeeze(in[0], 1), 0); };
  EXPECT_TRUE(gradcheck_op("reshape", rs, {InputSpec{{2, 3, 2}}}));
  EXPECT_TRUE(gradcheck_op("broadcast_to", bc, {InputSpec{{3, 1}}}));
  EXPECT_TRUE(gradcheck_op("permute", pm, {InputSpec{{2, 3, 4}}}));
  EXPECT_TRUE(gradcheck_op("transpose", tr, {InputSpec{{2, 3, 4}}}));
  EXPECT_TRUE(gradcheck_op("squeeze/unsqueeze", sq, {InputSpec{{2, 1, 3}}}));
}

TEST(OpsGradcheck, ChainOfOpsSharingAnOperand) {
  // One operand used by several ops: contributions must be summed.
  auto build = [](Graph& g, const std::vector<NodeId>& in) {
    NodeId x = in[0];
    NodeId y = g.mul(g.tanh(x), g.sigmoid(x));
    return g.add(g.softmax(g.matmul(y, g.transpose(x)), -1), g.mean(g.square(x)));
  };
  EXPECT_TRUE(gradcheck_op("chain", build, {InputSpec{{3, 4}}}));
}

}  // namespace
}  // namespace meganeura
