// Vision ops on the GPU (lavapipe in CI): conv2d and both gradient directions as implicit GEMMs, pooling
// with the exact max-pool backward, nearest upsampling. Each case checks the value and every gradient
// against the float64 CPU reference and finite differences of the GPU's own loss (gpu_opcheck.hpp), at
// shapes that are multiples of no tile (odd channels and sizes, stride, padding, dilation, groups).
#include <gtest/gtest.h>

#include "gpu_opcheck.hpp"
#include "meganeura/meganeura.hpp"
#include "meganeura/schedule/schedule.hpp"

using namespace meganeura;
using namespace meganeura::test;
using meganeura::test::InputSpec;
using meganeura::test::random_tensor;

namespace {

class VisionGpu : public GpuTest {};

Attrs ints_attrs(std::vector<int64_t> v) {
  Attrs a;
  a.ints = std::move(v);
  return a;
}

struct ConvCase {
  const char* label;
  Shape x, w;
  std::vector<int64_t> s, p, d;
  int64_t groups;
};

}  // namespace

TEST_F(VisionGpu, Conv2dValueAndGradients) {
  GpuTolerance tol;
  tol.atol = 1e-4;  // sums of up to a few hundred products in float32
  for (const ConvCase& c : {
           ConvCase{"odd", {2, 3, 7, 5}, {5, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
           ConvCase{"stride2_pad", {1, 2, 9, 8}, {4, 2, 3, 2}, {2, 2}, {1, 2}, {1, 1}, 1},
           // stride 3 with dilation 2: one residue class of rows receives no tap at all (zeros in dx)
           ConvCase{"stride3_dilation2", {2, 2, 8, 7}, {3, 2, 2, 3}, {3, 2}, {1, 0}, {2, 2}, 1},
           ConvCase{"dilation", {1, 3, 9, 7}, {2, 3, 3, 3}, {1, 2}, {2, 1}, {2, 1}, 1},
           ConvCase{"groups3", {2, 6, 6, 5}, {9, 2, 3, 3}, {1, 2}, {1, 0}, {1, 1}, 3},
           ConvCase{"depthwise", {1, 4, 5, 6}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 4},
           // several output tiles in every direction and several K slices: M = 429, N = 70, K = 36 / 630
           ConvCase{"tiles", {3, 4, 13, 11}, {70, 4, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
           // the weight gradient split over 4 batch slices (test_ops_vision.cpp checks the split is taken)
           ConvCase{"split", {8, 3, 16, 16}, {5, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
           ConvCase{"split_groups", {4, 4, 25, 25}, {6, 2, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 2},
       }) {
    auto b = [&](Graph& g, const std::vector<NodeId>& v) {
      return g.conv2d(v[0], v[1], c.s, c.p, c.d, c.groups);
    };
    EXPECT_TRUE(check_op_gpu(std::string("conv2d_") + c.label, b, {{c.x}, {c.w}}, tol));
  }
}

// The gradient ops as ops in their own right: their VJPs are a conv and the other gradient op.
TEST_F(VisionGpu, ConvGradientOpsAndTheirGradients) {
  GpuTolerance tol;
  tol.atol = 1e-4;
  const std::vector<int64_t> base{2, 1, 1, 0, 1, 2, 1};  // stride 2x1, pad 1x0, dilation 1x2
  auto gi = [&](Graph& g, const std::vector<NodeId>& v) {
    auto ints = base;
    ints.insert(ints.end(), {7, 6});  // H, W of x
    return g.make(Op::Conv2dGradInput, {v[0], v[1]}, ints_attrs(ints), {});
  };
  // x [2, 3, 7, 6], w [5, 3, 2, 2] -> y [2, 5, 4, 4]
  EXPECT_TRUE(check_op_gpu("conv2d_grad_input", gi, {{{2, 5, 4, 4}}, {{5, 3, 2, 2}}}, tol));
  auto gw = [&](Graph& g, const std::vector<NodeId>& v) {
    auto ints = base;
    ints.insert(ints.end(), {2, 2});  // KH, KW
    return g.make(Op::Conv2dGradWeight, {v[0], v[1]}, ints_attrs(ints), {});
  };
  EXPECT_TRUE(check_op_gpu("conv2d_grad_weight", gw, {{{2, 3, 7, 6}}, {{2, 5, 4, 4}}}, tol));
}

// conv + bias + relu is one kernel (the epilogue) and still matches the reference.
TEST_F(VisionGpu, Conv2dWithFusedBiasAndRelu) {
  Graph g;
  const NodeId x = g.input("x", {2, 3, 9, 7});
  const NodeId w = g.parameter("w", {33, 3, 3, 3});
  const NodeId b = g.parameter("b", {33});
  const NodeId y = g.relu(g.add(g.conv2d(x, w, {1, 1}, {1, 1}), g.reshape(b, {33, 1, 1})));
  g.set_outputs({y});
  KernelGraph kg = schedule(g, {y});
  ASSERT_EQ(kg.kernels.size(), 1u) << kg.to_text(g);
  EXPECT_EQ(kg.kernels[0].arch, Archetype::Conv);
  std::mt19937_64 rng(3);
  reference::Feeds feeds{{"x", random_tensor({2, 3, 9, 7}, rng)},
                         {"w", random_tensor({33, 3, 3, 3}, rng)},
                         {"b", random_tensor({33}, rng)}};
  EXPECT_TRUE(check_forward_gpu(g, feeds, "conv+bias+relu", 1e-4));
}

TEST_F(VisionGpu, PoolingValueAndGradients) {
  EXPECT_TRUE(check_op_gpu("max_pool2d",
                           [](Graph& g, auto& v) {
                             return g.max_pool2d(v[0], {2, 2});
                           },
                           {{{2, 3, 7, 9}}}));
  EXPECT_TRUE(check_op_gpu("max_pool2d_overlap_pad",
                           [](Graph& g, auto& v) {
                             return g.max_pool2d(v[0], {3, 2}, {2, 1}, {1, 1});
                           },
                           {{{1, 3, 7, 5}}}));
  EXPECT_TRUE(check_op_gpu("avg_pool2d",
                           [](Graph& g, auto& v) {
                             return g.avg_pool2d(v[0], {2, 2});
                           },
                           {{{2, 3, 7, 9}}}));
  EXPECT_TRUE(check_op_gpu("avg_pool2d_pad",
                           [](Graph& g, auto& v) {
                             return g.avg_pool2d(v[0], {3, 3}, {2, 2}, {1, 1});
                           },
                           {{{1, 2, 7, 6}}}));
  EXPECT_TRUE(
      check_op_gpu("avg_pool2d_grad",
                   [](Graph& g, auto& v) {
                     return g.make(Op::AvgPool2dGrad, {v[0]}, ints_attrs({3, 3, 2, 2, 1, 1, 5, 6}), {});
                   },
                   {{{1, 3, 3, 3}}}));
  EXPECT_TRUE(check_op_gpu("upsample_nearest", [](Graph& g, auto& v) { return g.upsample_nearest(v[0], 3); },
                           {{{2, 3, 2, 5}}}));
}

// Ties everywhere (values from {0, 1, 2}) with overlapping, padded windows: the GPU's backward must route
// each window's gradient to the same single cell as the reference (the first maximum in row-major order).
TEST_F(VisionGpu, MaxPoolBackwardRoutesTiesLikeTheReference) {
  for (const std::vector<int64_t>& attrs :
       {std::vector<int64_t>{2, 2, 2, 2, 0, 0}, {3, 3, 1, 1, 1, 1}, {3, 2, 2, 1, 1, 1}}) {
    Graph g;
    const Shape xs{2, 3, 7, 6};
    const NodeId x = g.input("x", xs);
    const NodeId pooled = g.max_pool2d(x, {attrs[0], attrs[1]}, {attrs[2], attrs[3]}, {attrs[4], attrs[5]});
    const Shape ys = g.node(pooled).shape;
    const NodeId dy = g.input("dy", ys);
    g.set_outputs({pooled, g.make(Op::MaxPool2dGrad, {x, dy}, ints_attrs(attrs), {})});
    std::mt19937_64 rng(7);
    HostTensor xv = random_tensor(xs, rng, 0.0, 3.0);
    for (double& v : xv.data) v = std::floor(v);
    reference::Feeds feeds{{"x", xv}, {"dy", random_tensor(ys, rng)}};
    EXPECT_TRUE(check_forward_gpu(g, feeds, "max_pool2d_grad ties " + shape_str(attrs), 1e-6, 1e-6));
  }
}

// Operands that are not stored values: a Fill (inlined elsewhere as a literal) and a Constant.
TEST_F(VisionGpu, ConvAndPoolOfFillAndConstantOperands) {
  Graph g;
  const NodeId w = g.parameter("w", {2, 3, 3, 3});
  const NodeId y = g.conv2d(g.fill(0.5, {1, 3, 5, 4}), w, {1, 1}, {1, 1});
  std::vector<float> c(1 * 2 * 4 * 4);
  for (size_t i = 0; i < c.size(); ++i) c[i] = float(i % 7) - 3.0f;
  const NodeId p = g.add(g.max_pool2d(g.constant(c, {1, 2, 4, 4}), {2, 2}), g.input("a", {1, 2, 2, 2}));
  const NodeId u = g.add(g.upsample_nearest(g.fill(2.0, {1, 1, 2, 2}), 2), g.input("b", {1, 1, 4, 4}));
  g.set_outputs({y, u, p});
  std::mt19937_64 rng(4);
  reference::Feeds feeds{{"w", random_tensor({2, 3, 3, 3}, rng)},
                         {"a", random_tensor({1, 2, 2, 2}, rng)},
                         {"b", random_tensor({1, 1, 4, 4}, rng)}};
  EXPECT_TRUE(check_forward_gpu(g, feeds, "fill/constant operands", 1e-5));
}
