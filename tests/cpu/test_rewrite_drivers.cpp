// The rewrite drivers: mapping of roots, names, the report, determinism, budgets and stop reasons, and
// value parity on randomly built graphs.
#include "test_rewrite_util.hpp"

#include <random>

#include "meganeura/autodiff/autodiff.hpp"
#include "meganeura/ops/ops.hpp"

namespace meganeura {
namespace {

using namespace test;

// A small training-shaped graph in which many rules fire: transposed weights, x*sigmoid(x), a bias add
// written bias-first, a softmax cross entropy written out by hand, and a hand-set gradient.
Graph mlp_like(NodeId* w1_out = nullptr, NodeId* grad_out = nullptr) {
  Graph g;
  NodeId x = g.input("x", {4, 6}), t = g.input("t", {4, 3});
  NodeId w1 = g.parameter("w1", {8, 6}), b1 = g.parameter("b1", {8});
  NodeId w2 = g.parameter("w2", {8, 3});
  NodeId h = g.add(b1, g.matmul(x, g.transpose(w1)));
  NodeId a = g.named(g.mul(h, g.sigmoid(h)), "hidden");
  NodeId z = g.mul(g.matmul(a, w2), g.scalar(1.0));
  NodeId loss = g.named(g.mean(g.neg(g.sum(g.mul(t, g.log(g.softmax(z))), {-1}))), "loss");
  NodeId grad = g.named(g.mul(g.sub(w1, g.fill(0.0, {8, 6})), g.neg(g.neg(g.scalar(0.5)))), "grad/w1");
  g.set_gradient(w1, grad);
  g.alias(z, "logits");  // a second name for an unnamed node: only find() knows it
  g.set_outputs({loss, g.exp(g.neg(g.neg(a)))});
  if (w1_out) *w1_out = w1;
  if (grad_out) *grad_out = grad;
  return g;
}

class Drivers : public ::testing::TestWithParam<RewriteMode> {};

TEST_P(Drivers, RootsAreMappedAndNamesKept) {
  NodeId w1, grad;
  Graph g = mlp_like(&w1, &grad);
  OptimizeReport rep;
  RewriteResult r = rewrite::rewrite(g, GetParam(), rep);
  expect_same_values(g, r);
  for (NodeId o : g.outputs()) EXPECT_TRUE(r.mapping.count(o));
  for (NodeId p : g.parameters()) {
    ASSERT_TRUE(r.mapping.count(p));
    EXPECT_EQ(r.graph.node(r.map(p)).op, Op::Parameter);
    EXPECT_EQ(r.graph.node(r.map(p)).prov.name, g.node(p).prov.name);
  }
  for (NodeId i : g.inputs()) EXPECT_EQ(r.graph.node(r.map(i)).op, Op::Input);
  // registration order is kept, so positional users of parameters() see the same list
  ASSERT_EQ(r.graph.parameters().size(), g.parameters().size());
  for (size_t i = 0; i < g.parameters().size(); ++i)
    EXPECT_EQ(r.graph.node(r.graph.parameters()[i]).prov.name, g.node(g.parameters()[i]).prov.name);
  ASSERT_TRUE(r.graph.gradient(r.map(w1)).has_value());
  EXPECT_EQ(*r.graph.gradient(r.map(w1)), r.map(grad));
  for (const char* name : {"loss", "hidden", "grad/w1", "x", "w1", "logits"}) {
    auto id = r.graph.find(name);
    ASSERT_TRUE(id.has_value()) << name;
    EXPECT_EQ(*id, r.map(*g.find(name))) << name;
  }
  EXPECT_EQ(r.graph.node(*r.graph.find("loss")).op, Op::CrossEntropy);
  EXPECT_EQ(r.graph.node(*r.graph.find("hidden")).op, Op::Silu);
  EXPECT_EQ(rep.nodes_before, g.size());
  EXPECT_EQ(rep.nodes_after, r.graph.size());
  EXPECT_LT(rep.nodes_after, rep.nodes_before);
  EXPECT_EQ(rep.stop_reason, GetParam() == RewriteMode::Greedy ? "fixed point" : "saturated");
}

TEST_P(Drivers, DeterministicAcrossRuns) {
  Graph g = mlp_like();
  OptimizeReport first;
  RewriteResult r0 = rewrite::rewrite(g, GetParam(), first);
  for (int k = 0; k < 3; ++k) {
    OptimizeReport again;
    RewriteResult r = rewrite::rewrite(g, GetParam(), again);
    EXPECT_EQ(dump(r.graph), dump(r0.graph));
    EXPECT_EQ(again.rules_fired, first.rules_fired);
    EXPECT_EQ(again.nodes_after, first.nodes_after);
    EXPECT_EQ(again.stop_reason, first.stop_reason);
    EXPECT_EQ(r.mapping, r0.mapping);
  }
  // a graph built the same way again (fresh object) rewrites to the same text
  Graph g2 = mlp_like();
  OptimizeReport rep2;
  EXPECT_EQ(dump(rewrite::rewrite(g2, GetParam(), rep2).graph), dump(r0.graph));
}

TEST_P(Drivers, RewritingTwiceChangesNothing) {
  Graph g = mlp_like();
  OptimizeReport rep, rep2;
  RewriteResult r = rewrite::rewrite(g, GetParam(), rep);
  RewriteResult r2 = rewrite::rewrite(r.graph, GetParam(), rep2);
  EXPECT_EQ(dump(r2.graph), dump(r.graph));
  for (const auto& [name, n] : rep2.rules_fired)
    ADD_FAILURE() << name << " fired " << n << " times on a rewritten graph";
}

// Forty residual layers: every layer's motifs must be rewritten, the deepest as well as the first (a tree
// cost that counts shared values once per use would lose the deep ones to rounding).
TEST_P(Drivers, DeepResidualGraphIsRewrittenThroughout) {
  Graph g;
  NodeId h = g.input("x", {4, 8});
  const int layers = 40;
  auto name = [](char kind, int l) {
    std::string s(1, kind);
    s += std::to_string(l);  // (not "w" + to_string: g++ 12 warns falsely about that form)
    return s;
  };
  for (int l = 0; l < layers; ++l) {
    NodeId w = g.parameter(name('w', l), {8, 8});
    NodeId b = g.parameter(name('b', l), {8});
    NodeId z = g.add(b, g.matmul(h, g.transpose(w)));
    NodeId a = g.mul(z, g.sigmoid(z));
    h = g.tanh(g.add(h, g.mul(a, g.scalar(1.0))));
    h = g.mul(g.silu(h), g.neg(g.neg(h)));
  }
  g.set_outputs({g.sum(h)});
  OptimizeReport rep;
  RewriteResult r = rewrite::rewrite(g, GetParam(), rep);
  expect_same_values(g, r, 1e-6);
  EXPECT_EQ(count_op(r.graph, Op::Permute), 0);
  EXPECT_EQ(count_op(r.graph, Op::Sigmoid), 0);
  EXPECT_EQ(count_op(r.graph, Op::Neg), 0);
  // silu(h) * h fuses to SwiGlu when the op table has that row (ops/attention.cpp)
  bool swiglu = ops::registered(Op::SwiGlu);
  EXPECT_EQ(count_op(r.graph, Op::Mul), swiglu ? 0 : layers);
  EXPECT_EQ(count_op(r.graph, Op::Silu), swiglu ? layers : 2 * layers);
  EXPECT_EQ(count_op(r.graph, Op::SwiGlu), swiglu ? layers : 0);
  EXPECT_EQ(count_op(r.graph, Op::MatMul), layers);
}

// What the session pipeline runs: autodiff, then rewrite. Every gradient keeps its value and its handle.
TEST_P(Drivers, DifferentiatedGraphKeepsGradients) {
  Graph f;
  NodeId x = f.input("x", {4, 6}), t = f.input("t", {4, 3});
  NodeId w1 = f.parameter("w1", {8, 6}), b1 = f.parameter("b1", {8}), w2 = f.parameter("w2", {8, 3});
  NodeId h = f.add(b1, f.matmul(x, f.transpose(w1)));
  NodeId a = f.mul(h, f.sigmoid(h));
  NodeId z = f.matmul(a, w2);
  NodeId loss = f.named(f.mean(f.neg(f.sum(f.mul(t, f.log(f.softmax(z))), {-1}))), "loss");
  f.set_outputs({loss});
  Graph g = differentiate(f, loss);
  OptimizeReport rep;
  RewriteResult r = rewrite::rewrite(g, GetParam(), rep);
  expect_same_values(g, r, 1e-6);
  for (NodeId p : {w1, b1, w2}) {
    ASSERT_TRUE(r.graph.gradient(r.map(p)).has_value());
    EXPECT_EQ(*r.graph.gradient(r.map(p)), r.map(*g.gradient(p)));
    // autodiff names gradients (by alias when the node already had a name); every name survives
    std::string name = "grad/" + g.node(p).prov.name;
    ASSERT_TRUE(r.graph.find(name).has_value()) << name;
    EXPECT_EQ(*r.graph.find(name), r.map(*g.gradient(p))) << name;
  }
  for (const auto& [name, id] : g.names()) {
    if (r.mapping.count(id)) {
      EXPECT_EQ(r.graph.find(name), r.map(id)) << name;
    }
  }
  EXPECT_EQ(r.graph.node(r.graph.outputs()[0]).op, Op::CrossEntropy);
  EXPECT_LT(live_count(r.graph), live_count(g));
  EXPECT_EQ(count_op(r.graph, Op::Permute), 0);
}

TEST_P(Drivers, NoOutputsIsAnError) {
  Graph g;
  g.exp(g.input("x", {2}));
  OptimizeReport rep;
  try {
    rewrite::rewrite(g, GetParam(), rep);
    FAIL() << "expected GraphError";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("[rewrite] expected a graph with at least one output"),
              std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(BothDrivers, Drivers, ::testing::Values(RewriteMode::Greedy, RewriteMode::Saturate),
                         [](const auto& info) { return mode_name(info.param); });

TEST(RewriteOff, CopiesUnchanged) {
  Graph g = mlp_like();
  OptimizeReport rep;
  RewriteResult r = rewrite::rewrite(g, RewriteMode::Off, rep);
  EXPECT_EQ(dump(r.graph), dump(g));
  EXPECT_EQ(rep.stop_reason, "off");
  EXPECT_TRUE(rep.rules_fired.empty());
  EXPECT_EQ(r.mapping.size(), g.size());
}

// ---- budgets ----------------------------------------------------------------------------------------------

// Two rules that undo each other: greedy must stop on its step budget and name them.
std::vector<rewrite::Rule> cycling_rules() {
  using namespace rewrite;
  Rule a{"exp_to_neg_neg_exp", node(Op::Exp, {any("x")}), nullptr,
         [](TermBuilder& b, const Match& m) -> std::optional<Handle> {
           auto e = b.make(Op::Exp, {m["x"]}, {});
           auto n = b.make(Op::Neg, {*e}, {});
           return b.make(Op::Neg, {*n}, {});
         }};
  Rule c{"neg_neg", node(Op::Neg, {node(Op::Neg, {any("x")})}), nullptr,
         [](TermBuilder&, const Match& m) -> std::optional<Handle> { return m["x"]; }};
  Rule flip{"flip_add", node(Op::Add, {any("p"), any("q")}), nullptr, [](TermBuilder& b, const Match& m) {
              return b.make(Op::Add, {m.root_kids[1], m.root_kids[0]}, {});
            }};
  return {flip, c, a};
}

TEST(RewriteBudget, GreedyStepsNameTheCyclingRule) {
  Graph g;
  NodeId x = g.input("x", {2}), y = g.input("y", {2});
  g.set_outputs({g.add(x, y)});
  OptimizeReport rep;
  RewriteBudgets b;
  b.max_steps = 50;
  RewriteResult r = rewrite::rewrite_with_rules(g, RewriteMode::Greedy, cycling_rules(), rep, b);
  EXPECT_EQ(rep.stop_reason, "budget: steps (cycling: flip_add)");
  EXPECT_EQ(fired(rep, "flip_add"), 50);
  expect_same_values(g, r);
}

TEST(RewriteBudget, GreedyPasses) {
  Graph g;
  NodeId x = g.input("x", {2});
  g.set_outputs({g.exp(g.neg(g.neg(x)))});
  OptimizeReport rep;
  RewriteBudgets b;
  b.max_passes = 1;
  RewriteResult r = rewrite::rewrite(g, RewriteMode::Greedy, rep, b);
  EXPECT_EQ(rep.stop_reason, "budget: passes (cycling: neg_neg)");
  expect_same_values(g, r);
}

// Equality saturation absorbs the exp <-> -(-exp) cycle (both are one class) and still terminates.
TEST(RewriteBudget, SaturationAbsorbsCycles) {
  Graph g;
  NodeId x = g.input("x", {2}), y = g.input("y", {2});
  g.set_outputs({g.add(g.exp(x), y)});
  OptimizeReport rep;
  RewriteResult r = rewrite::rewrite_with_rules(g, RewriteMode::Saturate, cycling_rules(), rep);
  EXPECT_EQ(rep.stop_reason, "saturated");
  EXPECT_EQ(count_op(r.graph, Op::Neg), 0);  // extraction picks the cheaper exp(x)
  expect_same_values(g, r);
}

// A rule that keeps making new values: x -> (x + 1) - 1 on every Add/Sub/Exp.
std::vector<rewrite::Rule> growing_rules() {
  using namespace rewrite;
  Rule grow{"grow", node({Op::Exp, Op::Add, Op::Sub}, {}), nullptr,
            [](TermBuilder& b, const Match& m) -> std::optional<Handle> {
              Handle one = b.fill(1.0, {}, DType::F32);
              auto up = b.make(Op::Add, {m.root, one}, {});
              if (!up) return std::nullopt;
              return b.make(Op::Sub, {*up, one}, {});
            }};
  grow.pattern.any_kids = true;
  return {grow};
}

TEST(RewriteBudget, SaturationIterations) {
  Graph g;
  g.set_outputs({g.exp(g.input("x", {2}))});
  OptimizeReport rep;
  RewriteBudgets b;
  b.max_iterations = 3;
  RewriteResult r = rewrite::rewrite_with_rules(g, RewriteMode::Saturate, growing_rules(), rep, b);
  EXPECT_EQ(rep.stop_reason, "budget: iterations");
  EXPECT_EQ(count_op(r.graph, Op::Sub), 0);  // the cheapest member of every class is the original
}

TEST(RewriteBudget, SaturationENodes) {
  Graph g;
  g.set_outputs({g.exp(g.input("x", {2}))});
  OptimizeReport rep;
  RewriteBudgets b;
  b.max_iterations = 1000;
  b.max_enodes = 40;
  RewriteResult r = rewrite::rewrite_with_rules(g, RewriteMode::Saturate, growing_rules(), rep, b);
  EXPECT_EQ(rep.stop_reason, "budget: e-nodes");
  EXPECT_EQ(count_op(r.graph, Op::Exp), 1);
}

TEST(RewriteBudget, SaturationMatchesPerRule) {
  Graph g;
  NodeId x = g.input("x", {2}), y = g.input("y", {2}), z = g.input("z", {2});
  g.set_outputs({g.mul(x, g.sigmoid(x)), g.mul(y, g.sigmoid(y)), g.mul(z, g.sigmoid(z))});
  OptimizeReport rep;
  RewriteBudgets b;
  b.max_matches_per_rule = 1;
  b.max_iterations = 2;
  RewriteResult r = rewrite::rewrite(g, RewriteMode::Saturate, rep, b);
  EXPECT_EQ(rep.stop_reason, "budget: iterations");
  EXPECT_EQ(fired(rep, "silu"), 2);  // one match per iteration
  EXPECT_EQ(count_op(r.graph, Op::Silu), 2);
  expect_same_values(g, r);
  // with room, all three fuse
  OptimizeReport rep2;
  RewriteResult r2 = rewrite::rewrite(g, RewriteMode::Saturate, rep2);
  EXPECT_EQ(count_op(r2.graph, Op::Silu), 3);
  EXPECT_EQ(rep2.stop_reason, "saturated");
}

// ---- random graphs ----------------------------------------------------------------------------------------

// Builds graphs from the motifs the rules look for, mixed with ordinary ops, and checks both drivers keep
// every output's value.
Graph random_graph(uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](size_t n) { return size_t(rng() % n); };
  Graph g;
  std::vector<NodeId> vals = {g.input("a", {3, 4}), g.input("b", {3, 4}), g.parameter("p", {3, 4})};
  NodeId w = g.parameter("w", {4, 4});
  for (int step = 0; step < 12; ++step) {
    NodeId x = vals[pick(vals.size())], y = vals[pick(vals.size())];
    NodeId v;
    switch (pick(14)) {
      case 0: v = g.add(x, g.fill(0.0, {3, 4})); break;
      case 1: v = g.mul(x, g.sigmoid(x)); break;
      case 2: v = g.mul(g.silu(x), y); break;
      case 3: v = g.neg(g.neg(x)); break;
      case 4: v = g.sub(x, g.neg(y)); break;
      case 5: v = g.matmul(x, g.transpose(g.transpose(w))); break;
      case 6: v = g.transpose(g.matmul(g.transpose(w), g.transpose(x))); break;
      case 7: v = g.add(g.mul(g.fill(2.0, {3, 4}), g.fill(0.25, {3, 4})), x); break;
      case 8: v = g.reshape(g.reshape(x, {12}), {3, 4}); break;
      case 9: v = g.mul(x, y); break;
      case 10: v = g.tanh(g.add(y, g.matmul(x, w))); break;
      case 11: v = g.log(g.softmax(x)); break;
      case 12: v = g.mul(x, g.scalar(-1.0)); break;
      default: v = g.sub(x, x); break;
    }
    vals.push_back(v);
  }
  NodeId t = g.input("t", {3, 4});
  NodeId loss = g.mean(g.neg(g.sum(g.mul(t, g.log_softmax(vals.back())), {-1})));
  g.set_outputs({loss, vals[vals.size() - 2], vals[3 + pick(vals.size() - 3)]});
  return g;
}

TEST(RewriteRandom, BothDriversKeepValues) {
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    Graph g = random_graph(seed);
    for (RewriteMode m : {RewriteMode::Greedy, RewriteMode::Saturate}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " " + mode_name(m));
      OptimizeReport rep;
      RewriteResult r = rewrite::rewrite(g, m, rep);
      expect_same_values(g, r, 1e-5);
      EXPECT_LE(live_count(r.graph), live_count(g));
      EXPECT_FALSE(rep.stop_reason.starts_with("budget")) << rep.stop_reason;
    }
  }
}

}  // namespace
}  // namespace meganeura
