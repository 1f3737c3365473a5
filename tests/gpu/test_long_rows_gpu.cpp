// Row reductions over long rows on few rows take the two-pass form (codegen/reduce_split.cpp: partials per
// row chunk, then the combine). Each case here has rows longer than kMaxRowChunk (4096) and fewer rows than
// the device's compute units (lavapipe reports none: 64 assumed), or is a batch-reduced loss over more than
// 4096 elements: values and gradients vs the float64 reference (gpu_opcheck.hpp), and NaN propagation.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gpu_opcheck.hpp"

using namespace meganeura;
using meganeura::test::InputSpec;

namespace {

class LongRowsGpu : public test::GpuTest {};

InputSpec range(Shape s, double lo, double hi) { return InputSpec{std::move(s), lo, hi}; }

InputSpec labels(Shape s, std::vector<double> v) {
  InputSpec in{s, 0, 1, false, DType::I32};
  in.values = [s, v](std::mt19937_64&) { return HostTensor(s, v); };
  return in;
}

// The row-reduction dispatches of a forward session of g must include the two-pass form.
bool splits(const Graph& g) {
  const CompiledStep s = compile_step(g, test::session_config(false), test::gpu_device().caps());
  for (const GeneratedKernel& k : s.code)
    if (k.variant == "reduce.partials") return true;
  return false;
}

// ... for an op placed as check_op_gpu places it (its value as the output).
bool splits(const meganeura::test::OpBuilder& f, const std::vector<InputSpec>& specs) {
  std::mt19937_64 rng(1);
  meganeura::test::PlacedOp p = meganeura::test::place_op(f, specs, rng);
  p.g.set_outputs({p.y});
  return splits(p.g);
}

}  // namespace

TEST_F(LongRowsGpu, ReductionsSoftmaxAndNorms) {
  test::GpuTolerance tol;
  tol.atol = 1e-5;
  tol.rtol = 3e-4;  // sums of 9000 f32 terms
  const Shape rows{2, 9001};
  struct C {
    std::string name;
    meganeura::test::OpBuilder f;
    std::vector<InputSpec> specs;
  };
  const std::vector<C> cases{
      {"sum rows", [](Graph& g, auto& v) { return g.sum(v[0], {-1}); }, {{rows}}},
      {"mean all", [](Graph& g, auto& v) { return g.mean(v[0]); }, {{{9001}}}},
      {"max rows", [](Graph& g, auto& v) { return g.max(v[0], {-1}); }, {{rows}}},
      {"min axis 0", [](Graph& g, auto& v) { return g.min(v[0], {0}); }, {{{5000, 2}}}},
      {"variance rows", [](Graph& g, auto& v) { return g.variance(v[0], {-1}); }, {{rows}}},
      {"softmax rows", [](Graph& g, auto& v) { return g.softmax(v[0], -1); }, {range(rows, -3, 3)}},
      {"log_softmax axis 0",
       [](Graph& g, auto& v) { return g.log_softmax(v[0], 0); },
       {range({5000, 2}, -3, 3)}},
      {"rms_norm", [](Graph& g, auto& v) { return g.rms_norm(v[0], v[1], 1e-6); }, {{rows}, {{9001}}}},
      {"layer_norm",
       [](Graph& g, auto& v) { return g.layer_norm(v[0], v[1], v[2], 1e-5); },
       {range(rows, 0.5, 2.5), {{9001}}, {{9001}}}},
      {"batch_norm train",
       [](Graph& g, auto& v) { return g.batch_norm(v[0], v[1], v[2], v[3], v[4], true, 1e-5); },
       {{{5000, 2}}, {{2}}, {{2}}, {{2}, -1, 1, false}, {{2}, 0.5, 1.5, false}}},
  };
  for (const C& c : cases) {
    EXPECT_TRUE(splits(c.f, c.specs)) << c.name;
    test::GpuTolerance t = tol;
    if (c.name.rfind("max", 0) == 0 || c.name.rfind("min", 0) == 0) t.fd_eps = 1e-4;
    EXPECT_TRUE(test::check_op_gpu(c.name, c.f, c.specs, t));
  }
}

TEST_F(LongRowsGpu, Losses) {
  test::GpuTolerance tol;
  tol.rtol = 3e-4;
  const Shape s{3, 9001};
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    const std::string rn = r == Reduction::Mean ? " mean" : r == Reduction::Sum ? " sum" : " none";
    auto ce_index = [r](Graph& g, auto& v) { return g.cross_entropy_loss_index(v[0], v[1], -100, r); };
    const std::vector<InputSpec> specs{range(s, -3, 3), labels({3}, {9000, -100, 17})};
    EXPECT_TRUE(splits(ce_index, specs)) << rn;
    EXPECT_TRUE(test::check_op_gpu("cross_entropy_index [3,9001]" + rn, ce_index, specs, tol));
    EXPECT_TRUE(test::check_op_gpu(
        "cross_entropy [2,5000]" + rn,
        [r](Graph& g, auto& v) { return g.cross_entropy_loss(v[0], g.softmax(v[1], -1), r); },
        {range({2, 5000}, -3, 3), range({2, 5000}, -2, 2)}, tol));
    if (r != Reduction::None) {
      EXPECT_TRUE(test::check_op_gpu(
          "mse [3,3000]" + rn, [r](Graph& g, auto& v) { return g.mse_loss(v[0], v[1], r); },
          {{{3, 3000}}, {{3, 3000}}}, tol));
    }
  }
}

// A NaN in one chunk of one row makes that row's result NaN (and only that row's), as on the reference.
TEST_F(LongRowsGpu, NanPropagates) {
  const int64_t C = 9001;
  auto run = [&](const std::string& what, auto build) {
    Graph g;
    NodeId x = g.input("x", {2, C});
    NodeId lab = g.input("labels", {2}, DType::I32);
    NodeId w = g.input("w", {C});
    g.set_outputs({build(g, x, lab, w)});
    ASSERT_TRUE(splits(g)) << what;
    std::mt19937_64 rng(3);
    reference::Feeds f{{"x", meganeura::test::random_tensor({2, C}, rng)},
                       {"labels", HostTensor({2}, {5, 8000})},
                       {"w", meganeura::test::random_tensor({C}, rng, 0.5, 1.5)}};
    f.at("x")[size_t(C + 6000)] = std::numeric_limits<double>::quiet_NaN();  // row 1, chunk 2
    test::round_to_float(f);
    Session s = test::build_gpu(g, false);
    test::feed_all(s, g, f);
    s.run();
    const std::vector<float> got = s.read_output(0);
    const HostTensor want = reference::evaluate_outputs(g, f).at(0);
    ASSERT_EQ(got.size(), want.size()) << what;
    size_t nans = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (std::isnan(want[i])) {
        ++nans;
        EXPECT_TRUE(std::isnan(got[i])) << what << "[" << i << "]: gpu " << got[i] << ", reference NaN";
      } else {
        EXPECT_NEAR(got[i], want[i], 1e-4 + 3e-4 * std::fabs(want[i])) << what << "[" << i << "]";
      }
    }
    EXPECT_GT(nans, 0u) << what;
    EXPECT_LT(nans, got.size()) << what;
  };
  run("sum", [](Graph& g, NodeId x, NodeId, NodeId) { return g.sum(x, {-1}); });
  run("softmax", [](Graph& g, NodeId x, NodeId, NodeId) { return g.softmax(x, -1); });
  run("rms_norm", [](Graph& g, NodeId x, NodeId, NodeId w) { return g.rms_norm(x, w, 1e-6); });
  run("cross_entropy_index none", [](Graph& g, NodeId x, NodeId l, NodeId) {
    return g.cross_entropy_loss_index(x, l, -100, Reduction::None);
  });
}
