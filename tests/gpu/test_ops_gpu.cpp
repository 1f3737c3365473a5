// Every differentiable op that is not convolution, pooling or attention, through a compiled GPU session:
// value and gradients vs the float64 reference and a finite-difference check of the GPU's own loss
// (tests/gpu/gpu_opcheck.hpp), each at two or more shapes, including sizes that are multiples of no tile
// or workgroup (3x5x7, 1x13, 33x65).
//
// Tolerances: the default GpuTolerance (|gpu - ref| <= 1e-5 + 1e-4 |ref|); a case that needs more says why.
#include <gtest/gtest.h>

#include <cstring>

#include "../cpu/op_cases.hpp"
#include "gpu_opcheck.hpp"
#include "meganeura/ops/dropout_hash.hpp"

using namespace meganeura;
using meganeura::test::InputSpec;
using meganeura::test::OpBuilder;

namespace {

struct Case {
  std::string name;
  OpBuilder build;
  std::vector<InputSpec> specs;
  test::GpuTolerance tol = {};
};

class OpsGpu : public test::GpuTest {
 protected:
  static void run(const std::vector<Case>& cases, const CompileOptions& options = {}) {
    for (const Case& c : cases) EXPECT_TRUE(test::check_op_gpu(c.name, c.build, c.specs, c.tol, 1, options));
  }
};

InputSpec range(Shape s, double lo, double hi) { return InputSpec{std::move(s), lo, hi}; }
InputSpec positive(Shape s) { return range(std::move(s), 0.5, 1.5); }

// A non-differentiable i32 operand with the given values (labels, indices).
InputSpec ints(Shape s, std::vector<double> v) {
  InputSpec in{s, 0, 1, false, DType::I32};
  in.values = [s, v](std::mt19937_64&) { return HostTensor(s, v); };
  return in;
}
// ... or uniform in [0, n), seeded.
InputSpec random_ints(Shape s, int64_t n) {
  InputSpec in{s, 0, 1, false, DType::I32};
  in.values = [s, n](std::mt19937_64& rng) {
    HostTensor t(s);
    std::uniform_int_distribution<int64_t> d(0, n - 1);
    for (double& x : t.data) x = double(d(rng));
    return t;
  };
  return in;
}

// ------------------------------------------------------------------------------------------ elementwise
const Shape kShapes[] = {{3, 5, 7}, {33, 65}};

TEST_F(OpsGpu, Unary) {
  // Ranges keep clear of kinks and domain edges by more than the finite-difference step.
  std::vector<meganeura::test::UnaryCase> ops = meganeura::test::unary_cases();
  ops.insert(ops.end(),
             {
                 // no gradient flows: the value is checked, the gradient must be exactly the reference's zero
                 {"sign", [](Graph& g, NodeId x) { return g.sign(x); }, -2, 2},
                 {"stop_gradient", [](Graph& g, NodeId x) { return g.mul(x, g.stop_gradient(x)); }, -2, 2},
             });
  std::vector<Case> cases;
  for (const meganeura::test::UnaryCase& u : ops)
    for (const Shape& s : kShapes) {
      cases.push_back({std::string(u.name) + " " + shape_str(s),
                       [f = u.f](Graph& g, auto& v) { return f(g, v[0]); },
                       {range(s, u.lo, u.hi)}});
      const std::string n = u.name;
      cases.back().tol.finite_difference = n != "sign" && n != "stop_gradient";
    }
  run(cases);
}

TEST_F(OpsGpu, BinaryWithBroadcasting) {
  struct B {
    const char* name;
    std::function<NodeId(Graph&, NodeId, NodeId)> f;
    double lo, hi;
  };
  const B ops[] = {
      {"add", [](Graph& g, NodeId a, NodeId b) { return g.add(a, b); }, -2, 2},
      {"sub", [](Graph& g, NodeId a, NodeId b) { return g.sub(a, b); }, -2, 2},
      {"mul", [](Graph& g, NodeId a, NodeId b) { return g.mul(a, b); }, -2, 2},
      {"div", [](Graph& g, NodeId a, NodeId b) { return g.div(a, b); }, 0.5, 2},
      {"pow", [](Graph& g, NodeId a, NodeId b) { return g.pow(a, b); }, 0.5, 2},
      {"maximum", [](Graph& g, NodeId a, NodeId b) { return g.maximum(a, b); }, -2, 2},
      {"minimum", [](Graph& g, NodeId a, NodeId b) { return g.minimum(a, b); }, -2, 2},
      // comparisons: piecewise constant, no gradient; the value (0/1) is checked, as a product so that a
      // gradient flows to the other operand
      {"eq", [](Graph& g, NodeId a, NodeId b) { return g.mul(a, g.eq(a, g.maximum(a, b))); }, -2, 2},
      {"ne", [](Graph& g, NodeId a, NodeId b) { return g.mul(a, g.ne(a, g.maximum(a, b))); }, -2, 2},
      {"lt", [](Graph& g, NodeId a, NodeId b) { return g.mul(a, g.lt(a, b)); }, -2, 2},
      {"le", [](Graph& g, NodeId a, NodeId b) { return g.mul(a, g.le(a, b)); }, -2, 2},
      {"gt", [](Graph& g, NodeId a, NodeId b) { return g.mul(a, g.gt(a, b)); }, -2, 2},
      {"ge", [](Graph& g, NodeId a, NodeId b) { return g.mul(a, g.ge(a, b)); }, -2, 2},
  };
  const std::pair<Shape, Shape> shapes[] = {{{3, 5, 7}, {5, 1}}, {{33, 65}, {65}}, {{1, 13}, {}}};
  std::vector<Case> cases;
  for (const B& b : ops)
    for (const auto& [sa, sb] : shapes) {
      cases.push_back({std::string(b.name) + " " + shape_str(sa) + " " + shape_str(sb),
                       [f = b.f](Graph& g, auto& v) { return f(g, v[0], v[1]); },
                       {range(sa, b.lo, b.hi), range(sb, b.lo, b.hi)}});
      // a comparison flipping inside the finite-difference step makes the loss jump
      cases.back().tol.finite_difference = std::string(b.name).size() > 2;
    }
  run(cases);
}

TEST_F(OpsGpu, WhereAndSwiGlu) {
  auto cond = [](Shape s) {
    InputSpec c{s, -1, 1, false};
    return c;
  };
  auto where = [](Graph& g, auto& v) { return g.where(g.gt(v[0], g.scalar(0.0)), v[1], v[2]); };
  auto swiglu = [](Graph& g, auto& v) { return g.make(Op::SwiGlu, {v[0], v[1]}, {}, {}); };
  run({
      {"where [3,5,7]", where, {cond({5, 1}), {{3, 5, 7}}, {{7}}}},
      {"where [33,65]", where, {cond({33, 65}), {{33, 65}}, {{33, 65}}}},
      {"swiglu [3,5,7]", swiglu, {range({3, 5, 7}, -3, 3), {{3, 5, 7}}}},
      {"swiglu [33,65]", swiglu, {range({33, 65}, -3, 3), {{33, 65}}}},
  });
}

TEST_F(OpsGpu, MatMulAllTransposes) {
  struct M {
    Shape a, b;
    bool ta, tb;
  };
  const M ms[] = {
      {{5, 7}, {7, 3}, false, false},     {{7, 5}, {7, 3}, true, false},
      {{5, 7}, {3, 7}, false, true},      {{7, 5}, {3, 7}, true, true},
      {{33, 65}, {65, 13}, false, false}, {{1, 13}, {13, 33}, false, false},
      {{2, 3, 5}, {5, 4}, false, false},  {{2, 5, 3}, {2, 4, 5}, true, true},
  };
  std::vector<Case> cases;
  for (const M& m : ms)
    cases.push_back(
        {"matmul " + shape_str(m.a) + (m.ta ? "T" : "") + " x " + shape_str(m.b) + (m.tb ? "T" : ""),
         [ta = m.ta, tb = m.tb](Graph& g, auto& v) { return g.matmul(v[0], v[1], ta, tb); },
         {{m.a}, {m.b}}});
  run(cases);
}

// ------------------------------------------------------------------------------------------ reductions
TEST_F(OpsGpu, Reductions) {
  using R = std::function<NodeId(Graph&, NodeId, std::vector<int64_t>, bool)>;
  const std::pair<const char*, R> ops[] = {
      {"sum", [](Graph& g, NodeId x, std::vector<int64_t> a, bool k) { return g.sum(x, a, k); }},
      {"mean", [](Graph& g, NodeId x, std::vector<int64_t> a, bool k) { return g.mean(x, a, k); }},
      {"max", [](Graph& g, NodeId x, std::vector<int64_t> a, bool k) { return g.max(x, a, k); }},
      {"min", [](Graph& g, NodeId x, std::vector<int64_t> a, bool k) { return g.min(x, a, k); }},
      {"variance", [](Graph& g, NodeId x, std::vector<int64_t> a, bool k) { return g.variance(x, a, k); }},
  };
  const std::tuple<Shape, std::vector<int64_t>, bool> axes[] = {{{3, 5, 7}, {}, false},
                                                                {{3, 5, 7}, {0, 2}, true},
                                                                {{3, 5, 7}, {1}, false},
                                                                {{33, 65}, {-1}, true},
                                                                {{33, 65}, {0}, false}};
  std::vector<Case> cases;
  for (const auto& [name, f] : ops)
    for (const auto& [s, ax, keep] : axes) {
      cases.push_back(
          {std::string(name) + " " + shape_str(s) + " axes " + shape_str(ax) + (keep ? " keepdim" : ""),
           [f = f, ax = ax, keep = keep](Graph& g, auto& v) { return f(g, v[0], ax, keep); },
           {{s}}});
      if (std::string(name) == "max" || std::string(name) == "min") {
        // the winner of a row may change inside the step (a kink): a smaller step makes that rarer
        cases.back().tol.fd_eps = 1e-4;
        cases.back().tol.fd_noise = 3e-3;
      }
    }
  run(cases);
}

TEST_F(OpsGpu, SoftmaxAndLogSoftmax) {
  std::vector<Case> cases;
  for (const auto& [s, axis] :
       {std::pair<Shape, int64_t>{{3, 5, 7}, -1}, {{3, 5, 7}, 1}, {{33, 65}, 0}, {{1, 13}, -1}}) {
    std::string at = shape_str(s) + " axis " + std::to_string(axis);
    cases.push_back({"softmax " + at,
                     [axis = axis](Graph& g, auto& v) { return g.softmax(v[0], axis); },
                     {range(s, -3, 3)}});
    cases.push_back({"log_softmax " + at,
                     [axis = axis](Graph& g, auto& v) { return g.log_softmax(v[0], axis); },
                     {range(s, -3, 3)}});
  }
  run(cases);
}

// ------------------------------------------------------------------------------------------ losses
TEST_F(OpsGpu, Losses) {
  std::vector<Case> cases;
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    std::string rn = r == Reduction::Mean ? " mean" : r == Reduction::Sum ? " sum" : " none";
    for (const Shape& s : {Shape{5, 7}, Shape{33, 65}}) {
      std::string at = " " + shape_str(s) + rn;
      cases.push_back({"mse" + at, [r](Graph& g, auto& v) { return g.mse_loss(v[0], v[1], r); }, {{s}, {s}}});
      cases.push_back({"l1" + at, [r](Graph& g, auto& v) { return g.l1_loss(v[0], v[1], r); }, {{s}, {s}}});
      cases.push_back({"bce_with_logits" + at,
                       [r](Graph& g, auto& v) { return g.bce_with_logits(v[0], v[1], r); },
                       {range(s, -3, 3), positive(s)}});
      // targets are probabilities (the VJP relies on rows summing to 1): a softmax keeps them so under the
      // finite-difference steps
      cases.push_back({"cross_entropy" + at,
                       [r](Graph& g, auto& v) { return g.cross_entropy_loss(v[0], g.softmax(v[1], -1), r); },
                       {range(s, -3, 3), range(s, -2, 2)}});
    }
    // labels with an ignored row (-100) and a custom ignore_index
    cases.push_back({"cross_entropy_index [5,7]" + rn,
                     [r](Graph& g, auto& v) { return g.cross_entropy_loss_index(v[0], v[1], -100, r); },
                     {range({5, 7}, -3, 3), ints({5}, {3, -100, 0, 6, 3})}});
    cases.push_back({"cross_entropy_index [33,65] ignore 4" + rn,
                     [r](Graph& g, auto& v) { return g.cross_entropy_loss_index(v[0], v[1], 4, r); },
                     {range({33, 65}, -3, 3), random_ints({33}, 8)}});
    // batch-reduced cross entropy has two kernels: a thread per row (rows of at most 256 classes; 70 rows is
    // more rows than threads) and a workgroup tree per row (300 classes)
    for (const Shape& s : {Shape{70, 9}, Shape{3, 300}}) {
      cases.push_back({"cross_entropy " + shape_str(s) + rn,
                       [r](Graph& g, auto& v) { return g.cross_entropy_loss(v[0], g.softmax(v[1], -1), r); },
                       {range(s, -3, 3), range(s, -2, 2)}});
      cases.push_back({"cross_entropy_index " + shape_str(s) + rn,
                       [r](Graph& g, auto& v) { return g.cross_entropy_loss_index(v[0], v[1], -100, r); },
                       {range(s, -3, 3), random_ints({s[0]}, s[1])}});
    }
  }
  run(cases);
}

// ------------------------------------------------------------------------------------------ movement
std::vector<Case> movement_cases() {
  return {
      {"permute [3,5,7] (2,0,1)",
       [](Graph& g, auto& v) {
         return g.permute(v[0], {2, 0, 1});
       },
       {{{3, 5, 7}}}},
      {"transpose [33,65]", [](Graph& g, auto& v) { return g.transpose(v[0]); }, {{{33, 65}}}},
      {"slice [3,5,7] axis 1", [](Graph& g, auto& v) { return g.slice(v[0], 1, 1, 4); }, {{{3, 5, 7}}}},
      {"slice [33,65] step 4", [](Graph& g, auto& v) { return g.slice(v[0], -1, 3, 60, 4); }, {{{33, 65}}}},
      {"slice [1,13] negative", [](Graph& g, auto& v) { return g.slice(v[0], 1, -5, 100, 2); }, {{{1, 13}}}},
      {"concat axis 1",
       [](Graph& g, auto& v) {
         return g.concat({v[0], v[1], v[2]}, 1);
       },
       {{{3, 2, 7}}, {{3, 5, 7}}, {{3, 1, 7}}}},
      {"concat axis 0",
       [](Graph& g, auto& v) {
         return g.concat({v[0], v[1]}, 0);
       },
       {{{1, 13}}, {{32, 13}}}},
      {"pad [3,5,7]",
       [](Graph& g, auto& v) {
         return g.pad(v[0], {1, 0, 2}, {0, 3, 1}, 0.5);
       },
       {{{3, 5, 7}}}},
      {"pad [1,13]",
       [](Graph& g, auto& v) {
         return g.pad(v[0], {2, 0}, {0, 5});
       },
       {{{1, 13}}}},
      {"broadcast_to [5,1]->[3,5,7]",
       [](Graph& g, auto& v) {
         return g.broadcast_to(v[0], {3, 5, 7});
       },
       {{{5, 1}}}},
      {"broadcast_to [13]->[4,13]",
       [](Graph& g, auto& v) {
         return g.broadcast_to(v[0], {4, 13});
       },
       {{{13}}}},
      {"reshape [3,5,7]->[15,7]",
       [](Graph& g, auto& v) {
         return g.reshape(v[0], {15, 7});
       },
       {{{3, 5, 7}}}},
      {"gather [5,3] by [2,3]",
       [](Graph& g, auto& v) { return g.gather(v[0], v[1]); },
       {{{5, 3}}, ints({2, 3}, {4, 0, 4, 2, 1, 4})}},
      {"gather [33,65] by [1,13]",
       [](Graph& g, auto& v) { return g.gather(v[0], v[1]); },
       {{{33, 65}}, random_ints({1, 13}, 33)}},
      {"scatter_add [2,3] into 6 rows",
       [](Graph& g, auto& v) { return g.scatter_add(v[0], v[1], 6); },
       {ints({2, 3}, {4, 0, 4, 2, 1, 4}), {{2, 3, 5}}}},
      {"scatter_add [37] into 13 rows",
       [](Graph& g, auto& v) { return g.scatter_add(v[0], v[1], 13); },
       {random_ints({37}, 11), {{37, 65}}}},
      // more indices and columns than a workgroup has threads (the deterministic path's chunks and column
      // loop)
      {"scatter_add [150] into 7 rows",
       [](Graph& g, auto& v) { return g.scatter_add(v[0], v[1], 7); },
       {random_ints({150}, 7), {{150, 70}}}},
  };
}

TEST_F(OpsGpu, Movement) { run(movement_cases()); }

// Scatter-add (the gather's gradient too) by scanning the indices, forced even where the device offers
// float atomics. Lavapipe offers shaderBufferFloat32AtomicAdd, so Movement above takes the atomic path there.
TEST_F(OpsGpu, MovementWithDeterministicScatter) {
  CompileOptions o;
  o.deterministic_scatter = true;
  std::vector<Case> cases;
  for (Case& c : movement_cases())
    if (c.name.rfind("gather", 0) == 0 || c.name.rfind("scatter", 0) == 0) cases.push_back(std::move(c));
  run(cases, o);
}

// ------------------------------------------------------------------------------------------ norms
TEST_F(OpsGpu, Norms) {
  std::vector<Case> cases;
  // [13]: x and the weights share a shape, so the weights' producers may fuse as a prologue too
  for (Shape x : {Shape{3, 5, 7}, Shape{1, 13}, Shape{33, 65}, Shape{13}}) {
    const int64_t d = x.back();
    cases.push_back({"layer_norm " + shape_str(x),
                     [](Graph& g, auto& v) { return g.layer_norm(v[0], v[1], v[2], 1e-5); },
                     {{x}, {{d}}, {{d}}}});
    cases.push_back({"rms_norm " + shape_str(x),
                     [](Graph& g, auto& v) { return g.rms_norm(v[0], v[1], 1e-6); },
                     {{x}, {{d}}}});
  }
  // [5,3,17]: 85 elements per channel, more than a workgroup's threads
  for (Shape x : {Shape{4, 3, 5}, Shape{2, 3, 3, 5}, Shape{5, 4}, Shape{5, 3, 17}}) {
    const int64_t c = x[1];
    cases.push_back({"batch_norm train " + shape_str(x),
                     [](Graph& g, auto& v) { return g.batch_norm(v[0], v[1], v[2], v[3], v[4], true, 1e-5); },
                     // the running statistics are not read in training mode: no gradient
                     {{x}, {{c}}, {{c}}, {{c}, -1, 1, false}, {{c}, 0.5, 1.5, false}}});
    cases.push_back(
        {"batch_norm eval " + shape_str(x),
         [](Graph& g, auto& v) { return g.batch_norm(v[0], v[1], v[2], v[3], v[4], false, 1e-5); },
         {{x}, {{c}}, {{c}}, {{c}}, positive({c})}});
  }
  cases.push_back({"group_norm [2,6,5] g3",
                   [](Graph& g, auto& v) { return g.group_norm(v[0], v[1], v[2], 3); },
                   {{{2, 6, 5}}, {{6}}, {{6}}}});
  cases.push_back({"group_norm [3,4,2,3] g2",
                   [](Graph& g, auto& v) { return g.group_norm(v[0], v[1], v[2], 2); },
                   {{{3, 4, 2, 3}}, {{4}}, {{4}}}});
  cases.push_back({"group_norm [2,4,33] g2 (66 per group)",
                   [](Graph& g, auto& v) { return g.group_norm(v[0], v[1], v[2], 2); },
                   {{{2, 4, 33}}, {{4}}, {{4}}}});
  cases.push_back({"group_norm [2,4,3] g4",
                   [](Graph& g, auto& v) { return g.group_norm(v[0], v[1], v[2], 4); },
                   {{{2, 4, 3}}, {{4}}, {{4}}}});
  run(cases);
}

// ------------------------------------------------------------------------------------------ rope, dropout
TEST_F(OpsGpu, Rope) {
  run({
      {"rope [2,3,5,8] offset 3",
       [](Graph& g, auto& v) { return g.rope(v[0], 10000.0, 3); },
       {{{2, 3, 5, 8}}}},
      {"rope [7,6] offset 0", [](Graph& g, auto& v) { return g.rope(v[0], 10000.0, 0); }, {{{7, 6}}}},
      {"rope [1,2,3,64] offset 1000",
       [](Graph& g, auto& v) { return g.rope(v[0], 10000.0, 1000); },
       {{{1, 2, 3, 64}}}},
      {"rope [2,5,4] offset -3", [](Graph& g, auto& v) { return g.rope(v[0], 10000.0, -3); }, {{{2, 5, 4}}}},
      // Long contexts: a float angle is off by ~pos * 6e-8 rad before the sine (fails on every device).
      {"rope [1,1,4,128] offset 131072",
       [](Graph& g, auto& v) { return g.rope(v[0], 500000.0, 131072); },
       {{{1, 1, 4, 128}}}},
      {"rope [1,3,64] offset -70001",
       [](Graph& g, auto& v) { return g.rope(v[0], 10000.0, -70001); },
       {{{1, 3, 64}}}},
      {"rope [3,13,2] theta 500 offset 17",
       [](Graph& g, auto& v) { return g.rope(v[0], 500.0, 17); },
       {{{3, 13, 2}}}},
  });
}

TEST_F(OpsGpu, DropoutValueAndGradient) {
  run({
      {"dropout [3,5,7] p 0.3", [](Graph& g, auto& v) { return g.dropout(v[0], 0.3, 42); }, {{{3, 5, 7}}}},
      {"dropout [33,65] p 0.5",
       [](Graph& g, auto& v) { return g.dropout(v[0], 0.5, 0x123456789abcull); },
       {{{33, 65}}}},
  });
}

TEST_F(OpsGpu, DropoutMaskIsTheReferenceMaskExactly) {
  // The kept set must be the same bit for bit: the value is x * 1/(1-p) on kept elements and exactly 0
  // elsewhere, and x is never 0 here.
  for (double p : {0.1, 0.5, 0.9}) {
    Graph g;
    const Shape s{37, 29};
    NodeId x = g.input("x", s);
    g.set_outputs({g.dropout(x, p, 7 + uint64_t(p * 10))});
    std::vector<float> xs(size_t(numel(s)));
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = 1.0f + float(i % 5);
    Session sess = test::build_gpu(g, false);
    sess.set_input("x", xs);
    sess.run();
    std::vector<float> y = sess.read_output(0);
    const uint64_t seed = 7 + uint64_t(p * 10);
    size_t kept = 0, mismatches = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      bool keep = ops::dropout_keep(seed, uint32_t(i), p);
      kept += keep;
      if (keep != (y[i] != 0.0f)) ++mismatches;
    }
    EXPECT_EQ(mismatches, 0u) << "p " << p;
    EXPECT_NEAR(double(kept) / double(y.size()), 1.0 - p, 0.05) << "p " << p;
  }
}

}  // namespace

namespace {

// Which scatter path a session takes: atomics exactly when the device offers float atomic add and the
// deterministic path is not forced (then a clearing dispatch precedes the scatter).
TEST_F(OpsGpu, ScatterPathFollowsTheDeviceAndTheOption) {
  Graph g;
  NodeId idx = g.input("idx", {4}, DType::I32);
  NodeId v = g.input("v", {4, 3});
  g.set_outputs({g.scatter_add(idx, v, 5)});
  SessionConfig c = test::session_config(false);
  for (bool forced : {false, true}) {
    CompileOptions o;
    o.deterministic_scatter = forced;
    CompiledStep s = compile_step(g, c, device().caps(), o);
    size_t atomics = 0;
    for (const GeneratedKernel& k : s.code)
      atomics += k.glsl.find("GL_EXT_shader_atomic_float") != std::string::npos;
    const bool want = device().caps().shader_float_atomic_add && !forced;
    EXPECT_EQ(atomics, want ? 1u : 0u) << "forced " << forced;
    EXPECT_EQ(s.code.size(), s.kernels.kernels.size() + (want ? 1 : 0));
  }
}

}  // namespace

namespace {

// The deterministic path adds in index order: two sessions give bit-identical embedding gradients, and they
// agree with the atomic path (where the device has it) to rounding.
TEST_F(OpsGpu, DeterministicScatterIsBitReproducible) {
  Graph g;
  NodeId table = g.parameter("table", {9, 70});
  NodeId idx = g.input("idx", {200}, DType::I32);
  NodeId r = g.input("r", {200, 70});
  g.set_outputs({g.sum(g.mul(g.gather(table, idx), r))});
  std::mt19937 rng(5);
  std::vector<int32_t> iv(200);
  for (int32_t& i : iv) i = int32_t(rng() % 9);
  std::vector<float> rv(200 * 70), tv(9 * 70);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : rv) v = u(rng);
  for (float& v : tv) v = u(rng);
  auto grad = [&](bool deterministic) {
    CompileOptions o;
    o.deterministic_scatter = deterministic;
    Session s = test::build_gpu(g, true, o);
    s.set_input("idx", iv);
    s.set_input("r", rv);
    s.set_parameter("table", tv);
    s.run();
    return s.read_gradient("table");
  };
  std::vector<float> a = grad(true), b = grad(true), c = grad(false);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], c[i], 1e-5 + 1e-5 * std::fabs(a[i])) << i;
}

}  // namespace
