// NaN and ±Inf through every GPU op family: each op's compiled session (lavapipe) sees NaN, +Inf, -Inf,
// signed zeros and ordinary values, and each output element must fall in the same class as the float64
// reference's (NaN / +Inf / -Inf / finite), finite ones within the usual tolerance. The reference itself
// follows PyTorch here (tests/oracle/test_torch_parity.cpp compares it with torch on the same values).
// A kernel that clamps before tanh, or takes max(x, 0) for relu, turns NaN into a number and fails.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "../cpu/op_cases.hpp"
#include "gpu_opcheck.hpp"

using namespace meganeura;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Specials first, then values on both sides of every kink and domain edge the ops have.
const std::vector<double> kValues = {kNaN, kInf, -kInf, 0.0, -0.0, -2.5, -1.0, -0.3, 0.3, 1.0, 2.5, 20.0};

const char* klass(double v) {
  return std::isnan(v) ? "NaN" : std::isinf(v) ? (v > 0 ? "+Inf" : "-Inf") : "finite";
}

::testing::AssertionResult same_classes(const std::vector<float>& got, const HostTensor& want,
                                        const std::string& what) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << what << ": " << got.size() << " values, reference has " << want.size();
  size_t bad = 0;
  std::ostringstream os;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    bool ok = std::string(klass(g)) == klass(w);
    if (ok && std::isfinite(w)) ok = std::fabs(g - w) <= 1e-4 + 1e-3 * std::fabs(w);
    if (!ok && bad++ < 6) os << "\n  " << what << "[" << i << "]: gpu " << g << " vs reference " << w;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " values differ:" << os.str();
}

// Builds g (its outputs set), runs it on the GPU with `feeds` and compares every output's classes.
::testing::AssertionResult run_case(Graph& g, const reference::Feeds& feeds, const std::string& what) {
  Session s = test::build_gpu(g, false);
  test::feed_all(s, g, feeds);
  s.run();
  const std::vector<HostTensor> want = reference::evaluate_outputs(g, feeds);
  for (size_t i = 0; i < want.size(); ++i) {
    auto r = same_classes(s.read_output(i), want[i], what + " output " + std::to_string(i));
    if (!r) return r;
  }
  return ::testing::AssertionSuccess();
}

HostTensor column(const std::vector<double>& v) { return HostTensor({int64_t(v.size()), 1}, v); }
HostTensor row(const std::vector<double>& v) { return HostTensor({1, int64_t(v.size())}, v); }

// Rows of `width` ordinary values with kValues[r] at column r % width: one special per row.
HostTensor rows_with_specials(int64_t width) {
  const int64_t n = int64_t(kValues.size());
  HostTensor t({n, width});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < width; ++c)
      t[size_t(r * width + c)] = c == r % width ? kValues[size_t(r)] : 0.25 * double(c) - 0.4;
  return t;
}

class NonFiniteGpu : public test::GpuTest {};

TEST_F(NonFiniteGpu, UnaryOps) {
  std::vector<meganeura::test::UnaryCase> ops = meganeura::test::unary_cases();
  ops.push_back({"sign", [](Graph& g, NodeId x) { return g.sign(x); }, 0, 0});
  ops.push_back({"stop_gradient", [](Graph& g, NodeId x) { return g.stop_gradient(x); }, 0, 0});
  for (const meganeura::test::UnaryCase& u : ops) {
    Graph g;
    NodeId x = g.input("x", {int64_t(kValues.size())});
    g.set_outputs({u.f(g, x)});
    EXPECT_TRUE(run_case(g, {{"x", HostTensor({int64_t(kValues.size())}, kValues)}}, u.name));
  }
}

// Every pair of kValues: a column against a row, broadcast to the full grid.
TEST_F(NonFiniteGpu, BinaryOpsOnEveryPairOfValues) {
  using F = NodeId (Graph::*)(NodeId, NodeId, Graph::Loc);
  const std::pair<const char*, F> ops[] = {
      {"add", &Graph::add}, {"sub", &Graph::sub},         {"mul", &Graph::mul},         {"div", &Graph::div},
      {"pow", &Graph::pow}, {"maximum", &Graph::maximum}, {"minimum", &Graph::minimum}, {"eq", &Graph::eq},
      {"ne", &Graph::ne},   {"lt", &Graph::lt},           {"le", &Graph::le},           {"gt", &Graph::gt},
      {"ge", &Graph::ge}};
  for (const auto& [name, f] : ops) {
    Graph g;
    NodeId a = g.input("a", {int64_t(kValues.size()), 1});
    NodeId b = g.input("b", {1, int64_t(kValues.size())});
    g.set_outputs({(g.*f)(a, b, Graph::Loc::current())});
    EXPECT_TRUE(run_case(g, {{"a", column(kValues)}, {"b", row(kValues)}}, name));
  }
  Graph g;
  NodeId c = g.input("c", {int64_t(kValues.size()), 1});
  NodeId a = g.input("a", {1, int64_t(kValues.size())});
  g.set_outputs({g.where(c, a, g.neg(a))});
  EXPECT_TRUE(run_case(g, {{"c", column(kValues)}, {"a", row(kValues)}}, "where"));
}

TEST_F(NonFiniteGpu, ReductionsSoftmaxAndNorms) {
  using R = NodeId (Graph::*)(NodeId, std::vector<int64_t>, bool, Graph::Loc);
  const std::pair<const char*, R> reductions[] = {{"sum", &Graph::sum},
                                                  {"mean", &Graph::mean},
                                                  {"max", &Graph::max},
                                                  {"min", &Graph::min},
                                                  {"variance", &Graph::variance}};
  const HostTensor x = rows_with_specials(5);
  const Shape s = x.shape;
  for (const auto& [name, f] : reductions)
    for (const std::vector<int64_t>& axes : {std::vector<int64_t>{1}, std::vector<int64_t>{0}}) {
      Graph g;
      NodeId in = g.input("x", s);
      g.set_outputs({(g.*f)(in, axes, false, Graph::Loc::current())});
      EXPECT_TRUE(run_case(g, {{"x", x}}, std::string(name) + " axis " + std::to_string(axes[0])));
    }
  const std::pair<const char*, std::function<NodeId(Graph&, NodeId)>> rowwise[] = {
      {"softmax", [](Graph& g, NodeId v) { return g.softmax(v, -1); }},
      {"log_softmax", [](Graph& g, NodeId v) { return g.log_softmax(v, -1); }},
      {"layer_norm",
       [](Graph& g, NodeId v) { return g.layer_norm(v, g.fill(1.5, {5}), g.fill(0.1, {5}), 1e-5); }},
      {"rms_norm", [](Graph& g, NodeId v) { return g.rms_norm(v, g.fill(1.5, {5}), 1e-5); }},
      {"argmax", [](Graph& g, NodeId v) { return g.cast(g.argmax(v, -1, false), DType::F32); }},
  };
  for (const auto& [name, f] : rowwise) {
    Graph g;
    NodeId in = g.input("x", s);
    g.set_outputs({f(g, in)});
    EXPECT_TRUE(run_case(g, {{"x", x}}, name));
  }
}

TEST_F(NonFiniteGpu, LossesAndMatmul) {
  const HostTensor x = rows_with_specials(5);
  const Shape s = x.shape;
  HostTensor target(s);
  for (size_t i = 0; i < target.size(); ++i) target[i] = double(i % 5) * 0.2;
  for (Reduction r : {Reduction::None, Reduction::Mean}) {
    const std::string rn = r == Reduction::None ? " none" : " mean";
    const std::pair<const char*, std::function<NodeId(Graph&, NodeId, NodeId)>> losses[] = {
        {"mse", [r](Graph& g, NodeId p, NodeId t) { return g.mse_loss(p, t, r); }},
        {"l1", [r](Graph& g, NodeId p, NodeId t) { return g.l1_loss(p, t, r); }},
        {"bce_with_logits", [r](Graph& g, NodeId p, NodeId t) { return g.bce_with_logits(p, t, r); }},
        {"cross_entropy", [r](Graph& g, NodeId p, NodeId t) { return g.cross_entropy_loss(p, t, r); }},
    };
    for (const auto& [name, f] : losses) {
      Graph g;
      NodeId p = g.input("p", s), t = g.input("t", s);
      g.set_outputs({f(g, p, t)});
      EXPECT_TRUE(run_case(g, {{"p", x}, {"t", target}}, name + rn));
    }
  }
  // matmul with the specials in A, then in B, plain and with a fused relu epilogue
  HostTensor b({5, 3});
  for (size_t i = 0; i < b.size(); ++i) b[i] = double(i % 7) * 0.3 - 0.9;
  for (bool relu : {false, true}) {
    Graph g;
    NodeId a = g.input("a", s), w = g.input("w", {5, 3});
    NodeId y = g.matmul(a, w);
    g.set_outputs({relu ? g.relu(y) : y});
    EXPECT_TRUE(run_case(g, {{"a", x}, {"w", b}}, relu ? "relu(matmul) A" : "matmul A"));
    Graph h;
    NodeId bt = h.input("bt", {3, s[0]}), at = h.input("at", s);
    NodeId z = h.matmul(bt, at);  // [3, n] x [n, 5]: the specials sit on B's rows
    h.set_outputs({relu ? h.relu(z) : z});
    HostTensor lhs({3, s[0]});
    for (size_t i = 0; i < lhs.size(); ++i) lhs[i] = double(i % 5) * 0.2 + 0.1;
    EXPECT_TRUE(run_case(h, {{"bt", lhs}, {"at", x}}, relu ? "relu(matmul) B" : "matmul B"));
  }
}

}  // namespace
