// Vision ops: conv2d (+ its gradient ops), max/avg pooling (+ gradient ops), global average pooling,
// nearest upsampling. Hand-computed values, finite-difference gradchecks mid-graph, shape errors.
#include <gtest/gtest.h>

#include "eval_helpers.hpp"
#include "gradcheck.hpp"

using namespace meganeura;
using namespace meganeura::test;

namespace {

NodeId conv(Graph& g, const std::vector<NodeId>& x, std::vector<int64_t> s, std::vector<int64_t> p,
            std::vector<int64_t> d, int64_t groups) {
  return g.conv2d(x[0], x[1], s, p, d, groups);
}

Attrs ints_attrs(std::vector<int64_t> v) {
  Attrs a;
  a.ints = std::move(v);
  return a;
}

}  // namespace

TEST(OpsVision, Conv2dHandComputed) {
  // x = 1..9 in a 3x3 image
  auto x = iota({1, 1, 3, 3}, 1.0);
  // identity-diagonal 2x2 kernel: x[i][j] + x[i+1][j+1]
  auto y = eval_op(
      [](Graph& g, auto& v) {
        return conv(g, v, {1, 1}, {0, 0}, {1, 1}, 1);
      },
      {x, f32({1, 1, 2, 2}, {1, 0, 0, 1})});
  EXPECT_TRUE(near_all(y, {1, 1, 2, 2}, {6, 8, 12, 14}));
  // stride 2, padding 1, all-ones kernel: windows at (-1,-1), (-1,1), (1,-1), (1,1)
  y = eval_op(
      [](Graph& g, auto& v) {
        return conv(g, v, {2, 2}, {1, 1}, {1, 1}, 1);
      },
      {x, f32({1, 1, 2, 2}, {1, 1, 1, 1})});
  EXPECT_TRUE(near_all(y, {1, 1, 2, 2}, {1, 5, 11, 28}));
  // dilation 2: the four corners
  y = eval_op(
      [](Graph& g, auto& v) {
        return conv(g, v, {1, 1}, {0, 0}, {2, 2}, 1);
      },
      {x, f32({1, 1, 2, 2}, {1, 1, 1, 1})});
  EXPECT_TRUE(near_all(y, {1, 1, 1, 1}, {20}));
  // groups 2: each output channel sees only its own input channel
  y = eval_op(
      [](Graph& g, auto& v) {
        return conv(g, v, {1, 1}, {0, 0}, {1, 1}, 2);
      },
      {f32({1, 2, 1, 1}, {2, 3}), f32({2, 1, 1, 1}, {10, 100})});
  EXPECT_TRUE(near_all(y, {1, 2, 1, 1}, {20, 300}));
  // two input channels summed, two output channels
  y = eval_op(
      [](Graph& g, auto& v) {
        return conv(g, v, {1, 1}, {0, 0}, {1, 1}, 1);
      },
      {f32({1, 2, 1, 2}, {1, 2, 3, 4}), f32({2, 2, 1, 1}, {1, 1, 1, -1})});
  EXPECT_TRUE(near_all(y, {1, 2, 1, 2}, {4, 6, -2, -2}));
}

TEST(OpsVision, Conv2dGradientsHandComputed) {
  // 1x1 conv, x [1,1,1,2], w [1,1,1,1] = 3: dx = 3 * dy, dw = sum(x * dy)
  auto x = f32({1, 1, 1, 2}, {1, 2});
  auto w = f32({1, 1, 1, 1}, {3});
  HostTensor up({1, 1, 1, 2}, std::vector<double>{5, 7});
  auto b = [](Graph& g, auto& v) { return conv(g, v, {1, 1}, {0, 0}, {1, 1}, 1); };
  EXPECT_TRUE(near_all(grad_op(b, {x, w}, 0, up), {1, 1, 1, 2}, {15, 21}));
  EXPECT_TRUE(near_all(grad_op(b, {x, w}, 1, up), {1, 1, 1, 1}, {19}));
}

TEST(OpsVision, Conv2dGradchecks) {
  struct Case {
    const char* label;
    std::vector<int64_t> s, p, d;
    int64_t groups;
    Shape x, w;
  };
  for (const Case& c : {Case{"basic", {1, 1}, {0, 0}, {1, 1}, 1, {2, 2, 4, 3}, {3, 2, 2, 2}},
                        Case{"stride_pad", {2, 1}, {1, 2}, {1, 1}, 1, {1, 2, 5, 4}, {2, 2, 3, 2}},
                        Case{"dilation", {1, 1}, {1, 1}, {2, 1}, 1, {1, 1, 5, 5}, {2, 1, 2, 3}},
                        Case{"groups", {1, 2}, {1, 0}, {1, 1}, 2, {1, 4, 3, 4}, {4, 2, 2, 2}}}) {
    auto b = [&](Graph& g, const std::vector<NodeId>& v) { return conv(g, v, c.s, c.p, c.d, c.groups); };
    EXPECT_TRUE(gradcheck_op(std::string("conv2d_") + c.label, b, {{c.x}, {c.w}}));
  }
}

// Large enough reductions split the weight gradient over batch slices (grouped view, summed partials).
TEST(OpsVision, Conv2dWeightGradientSplitOverTheBatch) {
  struct Case {
    const char* label;
    Shape x, w;
    int64_t groups, want_groups;
  };
  for (const Case& c : {Case{"split4", {8, 3, 16, 16}, {5, 3, 3, 3}, 1, 4},
                        Case{"split4_groups2", {4, 4, 25, 25}, {6, 2, 3, 3}, 2, 8}}) {
    auto b = [&](Graph& g, const std::vector<NodeId>& v) {
      return g.conv2d(v[0], v[1], {1, 1}, {c.groups == 1 ? 1 : 0, c.groups == 1 ? 1 : 0}, {1, 1}, c.groups);
    };
    Graph g;
    NodeId x = g.input("x", c.x), w = g.parameter("w", c.w);
    NodeId loss = g.sum(b(g, {x, w}));
    Graph dg = differentiate(g, loss, {w});
    int64_t groups = 0;
    for (uint32_t i = 0; i < dg.size(); ++i)
      if (dg.node(NodeId{i}).op == Op::Conv2dGradWeight) groups = dg.node(NodeId{i}).attrs.ints[6];
    EXPECT_EQ(groups, c.want_groups) << c.label;
    // x as a plain input: finite differences over every image would be slow, and dx is not split
    EXPECT_TRUE(gradcheck_op(std::string("conv2d_") + c.label, b, {{c.x, -1, 1, false}, {c.w}})) << c.label;
  }
}

TEST(OpsVision, ConvGradientOpsAreThemselvesDifferentiable) {
  // Conv2dGradInput(dy, w) and Conv2dGradWeight(x, dy) as ops in their own right (double backward)
  const std::vector<int64_t> base{2, 1, 1, 0, 1, 1, 1};
  auto gi = [&](Graph& g, const std::vector<NodeId>& v) {
    auto ints = base;
    ints.insert(ints.end(), {5, 4});  // H, W of the input
    return g.make(Op::Conv2dGradInput, {v[0], v[1]}, ints_attrs(ints), {});
  };
  // x [1,2,5,4], w [3,2,2,2] -> y [1,3,3,3]
  EXPECT_TRUE(gradcheck_op("conv2d_grad_input", gi, {{{1, 3, 3, 3}}, {{3, 2, 2, 2}}}));
  auto gw = [&](Graph& g, const std::vector<NodeId>& v) {
    auto ints = base;
    ints.insert(ints.end(), {2, 2});  // KH, KW
    return g.make(Op::Conv2dGradWeight, {v[0], v[1]}, ints_attrs(ints), {});
  };
  EXPECT_TRUE(gradcheck_op("conv2d_grad_weight", gw, {{{1, 2, 5, 4}}, {{1, 3, 3, 3}}}));
}

TEST(OpsVision, PoolingHandComputed) {
  auto x = iota({1, 1, 4, 4});
  auto y = eval_op([](Graph& g, auto& v) { return g.max_pool2d(v[0], {2, 2}); }, {x});
  EXPECT_TRUE(near_all(y, {1, 1, 2, 2}, {5, 7, 13, 15}));
  y = eval_op([](Graph& g, auto& v) { return g.avg_pool2d(v[0], {2, 2}); }, {x});
  EXPECT_TRUE(near_all(y, {1, 1, 2, 2}, {2.5, 4.5, 10.5, 12.5}));
  // padded cells count in the divisor: the corner window holds only x[0][0] = 1
  y = eval_op(
      [](Graph& g, auto& v) {
        return g.avg_pool2d(v[0], {2, 2}, {1, 1}, {1, 1});
      },
      {f32({1, 1, 2, 2}, {1, 2, 3, 4})});
  EXPECT_TRUE(near_all(y, {1, 1, 3, 3}, {0.25, 0.75, 0.5, 1, 2.5, 1.5, 0.75, 1.75, 1}));
  // max pool with padding never picks the padding, even for all-negative inputs
  y = eval_op(
      [](Graph& g, auto& v) {
        return g.max_pool2d(v[0], {2, 2}, {1, 1}, {1, 1});
      },
      {f32({1, 1, 1, 1}, {-5})});
  EXPECT_TRUE(near_all(y, {1, 1, 2, 2}, {-5, -5, -5, -5}));
  y = eval_op([](Graph& g, auto& v) { return g.global_avg_pool(v[0]); }, {iota({2, 2, 1, 2})});
  EXPECT_TRUE(near_all(y, {2, 2}, {0.5, 2.5, 4.5, 6.5}));
}

TEST(OpsVision, MaxPoolBackwardIsExact) {
  auto b = [](Graph& g, auto& v) { return g.max_pool2d(v[0], {2, 2}); };
  HostTensor up({1, 1, 2, 2}, std::vector<double>{1, 2, 3, 4});
  // the whole gradient goes to the argmax of each window
  auto dx = grad_op(b, {iota({1, 1, 4, 4})}, 0, up);
  EXPECT_TRUE(near_all(dx, {1, 1, 4, 4}, {0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4}));
  // ties: only the first maximum (row-major in the window) receives it, never a share
  dx = grad_op(b, {f32({1, 1, 2, 2}, {7, 7, 7, 7})}, 0, HostTensor({1, 1, 1, 1}, std::vector<double>{1}));
  EXPECT_TRUE(near_all(dx, {1, 1, 2, 2}, {1, 0, 0, 0}));
  // overlapping windows accumulate
  auto b2 = [](Graph& g, auto& v) { return g.max_pool2d(v[0], {2, 2}, {1, 1}); };
  dx = grad_op(b2, {f32({1, 1, 2, 3}, {0, 9, 0, 0, 0, 0})}, 0,
               HostTensor({1, 1, 1, 2}, std::vector<double>{1, 1}));
  EXPECT_TRUE(near_all(dx, {1, 1, 2, 3}, {0, 2, 0, 0, 0, 0}));
}

TEST(OpsVision, PoolGradchecks) {
  EXPECT_TRUE(gradcheck_op("max_pool2d",
                           [](Graph& g, auto& v) {
                             return g.max_pool2d(v[0], {2, 2});
                           },
                           {{{2, 2, 4, 5}}}));
  EXPECT_TRUE(gradcheck_op("max_pool2d_overlap_pad",
                           [](Graph& g, auto& v) {
                             return g.max_pool2d(v[0], {3, 2}, {2, 1}, {1, 1});
                           },
                           {{{1, 2, 5, 4}}}));
  EXPECT_TRUE(gradcheck_op("avg_pool2d",
                           [](Graph& g, auto& v) {
                             return g.avg_pool2d(v[0], {2, 2});
                           },
                           {{{2, 2, 4, 5}}}));
  EXPECT_TRUE(gradcheck_op("avg_pool2d_pad",
                           [](Graph& g, auto& v) {
                             return g.avg_pool2d(v[0], {3, 3}, {2, 2}, {1, 1});
                           },
                           {{{1, 2, 5, 6}}}));
  EXPECT_TRUE(
      gradcheck_op("avg_pool2d_grad",
                   [](Graph& g, auto& v) {
                     return g.make(Op::AvgPool2dGrad, {v[0]}, ints_attrs({3, 3, 2, 2, 1, 1, 5, 6}), {});
                   },
                   {{{1, 2, 3, 3}}}));
  EXPECT_TRUE(gradcheck_op("global_avg_pool", [](Graph& g, auto& v) { return g.global_avg_pool(v[0]); },
                           {{{2, 3, 2, 2}}}));
  EXPECT_TRUE(gradcheck_op("upsample_nearest", [](Graph& g, auto& v) { return g.upsample_nearest(v[0], 3); },
                           {{{1, 2, 2, 3}}}));
}

TEST(OpsVision, UpsampleNearestHandComputed) {
  auto y = eval_op([](Graph& g, auto& v) { return g.upsample_nearest(v[0], 2); },
                   {f32({1, 1, 2, 2}, {1, 2, 3, 4})});
  EXPECT_TRUE(near_all(y, {1, 1, 4, 4}, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(OpsVision, ShapeErrors) {
  Graph g;
  auto x = g.input("x", {1, 3, 5, 5});
  auto w = g.parameter("w", {4, 2, 3, 3});
  EXPECT_THROW(g.conv2d(x, w), ShapeError);  // weight expects 2 input channels
  auto w3 = g.parameter("w3", {4, 3, 7, 7});
  EXPECT_THROW(g.conv2d(x, w3), ShapeError);  // kernel larger than the image
  auto w1 = g.parameter("w1", {4, 3, 1, 1});
  EXPECT_THROW(g.conv2d(x, w1, {0, 1}), ShapeError);                     // stride 0
  EXPECT_THROW(g.conv2d(x, w1, {1, 1}, {-1, 0}), ShapeError);            // negative padding
  EXPECT_THROW(g.conv2d(x, w1, {1, 1}, {0, 0}, {1, 1}, 2), ShapeError);  // 3 channels, 2 groups
  EXPECT_THROW(g.conv2d(g.input("v", {3, 5, 5}), w1), ShapeError);       // rank 3
  EXPECT_THROW(g.max_pool2d(x, {2, 2}, {2, 2}, {2, 2}), ShapeError);     // padding above half the kernel
  EXPECT_THROW(g.avg_pool2d(x, {6, 6}), ShapeError);                     // window larger than the image
  EXPECT_THROW(g.conv2d(x, g.parameter("w6", {1, 3, 6, 6}), {2, 2}), ShapeError);  // same, strided
  EXPECT_THROW(g.max_pool2d(x, {2}), ShapeError);                                  // kernel needs two values
  EXPECT_THROW(g.upsample_nearest(x, 0), ShapeError);
  EXPECT_THROW(g.global_avg_pool(g.input("m", {2, 3})), ShapeError);
  // the message names the op, the shapes and the user's line
  try {
    g.conv2d(x, w);
    FAIL() << "no ShapeError";
  } catch (const ShapeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[conv2d]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4,2,3,3]"), std::string::npos) << m;
    EXPECT_NE(m.find("test_ops_vision.cpp"), std::string::npos) << m;
  }
}
