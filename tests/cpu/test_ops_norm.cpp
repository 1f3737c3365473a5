// Normalisation ops: layer_norm, rms_norm, batch_norm (training and evaluation), group_norm.
#include <gtest/gtest.h>

#include <cmath>

#include "eval_helpers.hpp"
#include "gradcheck.hpp"

using namespace meganeura;
using namespace meganeura::test;

TEST(OpsNorm, LayerNormHandComputed) {
  // mean 2.5, variance 1.25
  const double r = 1.0 / std::sqrt(1.25);
  auto y = eval_op([](Graph& g, auto& v) { return g.layer_norm(v[0], v[1], v[2], 0.0); },
                   {f32({1, 4}, {1, 2, 3, 4}), f32({4}, {1, 1, 2, 1}), f32({4}, {0, 0, 0, 10})});
  EXPECT_TRUE(near_all(y, {1, 4}, {-1.5 * r, -0.5 * r, 2 * 0.5 * r, 1.5 * r + 10}));
}

TEST(OpsNorm, RmsNormHandComputed) {
  // rms of (3, 4) = sqrt(12.5)
  const double r = 1.0 / std::sqrt(12.5);
  auto y = eval_op([](Graph& g, auto& v) { return g.rms_norm(v[0], v[1], 0.0); },
                   {f32({2, 2}, {3, 4, 0, 2}), f32({2}, {1, 2})});
  EXPECT_TRUE(near_all(y, {2, 2}, {3 * r, 8 * r, 0, 2.0 / std::sqrt(2.0) * 2}));
}

TEST(OpsNorm, BatchNormHandComputed) {
  // training: channel 0 holds {1, 3} (mean 2, var 1), channel 1 holds {10, 10} (var 0)
  auto x = f32({2, 2}, {1, 10, 3, 10});
  auto w = f32({2}, {2, 1});
  auto b = f32({2}, {0, 5});
  auto rm = f32({2}, {1, 0});
  auto rv = f32({2}, {3, 0});
  const double eps = 1.0;
  auto train =
      eval_op([&](Graph& g, auto& v) { return g.batch_norm(v[0], v[1], v[2], v[3], v[4], true, eps); },
              {x, w, b, rm, rv});
  const double s = 1.0 / std::sqrt(2.0);
  EXPECT_TRUE(near_all(train, {2, 2}, {-2 * s, 5, 2 * s, 5}));
  // evaluation: the running statistics, not the batch's
  auto eval =
      eval_op([&](Graph& g, auto& v) { return g.batch_norm(v[0], v[1], v[2], v[3], v[4], false, eps); },
              {x, w, b, rm, rv});
  EXPECT_TRUE(near_all(eval, {2, 2}, {0, 15, 2, 15}));
  // NCHW: statistics over N, H and W per channel
  auto y =
      eval_op([](Graph& g, auto& v) { return g.batch_norm(v[0], v[1], v[2], v[3], v[4], true, 0.0); },
              {f32({2, 1, 1, 2}, {1, 2, 3, 6}), f32({1}, {1}), f32({1}, {0}), f32({1}, {0}), f32({1}, {1})});
  // mean 3, var (4 + 1 + 0 + 9) / 4 = 3.5
  const double q = 1.0 / std::sqrt(3.5);
  EXPECT_TRUE(near_all(y, {2, 1, 1, 2}, {-2 * q, -1 * q, 0, 3 * q}));
}

TEST(OpsNorm, GroupNormHandComputed) {
  // two groups of two channels: {1, 2} and {10, 20}, each normalises to {-1, 1}
  auto y = eval_op([](Graph& g, auto& v) { return g.group_norm(v[0], v[1], v[2], 2, 0.0); },
                   {f32({1, 4, 1, 1}, {1, 2, 10, 20}), f32({4}, {1, 1, 1, 3}), f32({4}, {0, 0, 1, 0})});
  EXPECT_TRUE(near_all(y, {1, 4, 1, 1}, {-1, 1, 0, 3}));
}

TEST(OpsNorm, Gradchecks) {
  EXPECT_TRUE(gradcheck_op("layer_norm", [](Graph& g, auto& v) { return g.layer_norm(v[0], v[1], v[2]); },
                           {{{2, 3, 5}}, {{5}}, {{5}}}));
  EXPECT_TRUE(gradcheck_op("layer_norm_1d", [](Graph& g, auto& v) { return g.layer_norm(v[0], v[1], v[2]); },
                           {{{4}}, {{4}}, {{4}}}));
  EXPECT_TRUE(
      gradcheck_op("rms_norm", [](Graph& g, auto& v) { return g.rms_norm(v[0], v[1]); }, {{{3, 4}}, {{4}}}));
  InputSpec rm{{3}}, rv{{3}, 0.5, 1.5};
  rm.differentiable = rv.differentiable = false;
  EXPECT_TRUE(gradcheck_op("batch_norm_train",
                           [](Graph& g, auto& v) { return g.batch_norm(v[0], v[1], v[2], v[3], v[4], true); },
                           {{{3, 3, 2, 2}}, {{3}}, {{3}}, rm, rv}));
  EXPECT_TRUE(gradcheck_op("batch_norm_train_2d",
                           [](Graph& g, auto& v) { return g.batch_norm(v[0], v[1], v[2], v[3], v[4], true); },
                           {{{4, 3}}, {{3}}, {{3}}, rm, rv}));
  EXPECT_TRUE(gradcheck_op(
      "batch_norm_eval", [](Graph& g, auto& v) { return g.batch_norm(v[0], v[1], v[2], v[3], v[4], false); },
      {{{2, 3, 2, 1}}, {{3}}, {{3}}, rm, rv}));
  EXPECT_TRUE(gradcheck_op("group_norm", [](Graph& g, auto& v) { return g.group_norm(v[0], v[1], v[2], 2); },
                           {{{2, 4, 2, 2}}, {{4}}, {{4}}}));
  EXPECT_TRUE(gradcheck_op("group_norm_3d",
                           [](Graph& g, auto& v) { return g.group_norm(v[0], v[1], v[2], 3); },
                           {{{2, 6, 3}}, {{6}}, {{6}}}));
}

TEST(OpsNorm, BatchNormGradientsOfRunningStatistics) {
  // evaluation mode depends on the running statistics (gradcheck), training mode does not (exact zero)
  InputSpec rv{{3}, 0.5, 1.5};
  EXPECT_TRUE(
      gradcheck_op("batch_norm_eval_stats",
                   [](Graph& g, auto& v) { return g.batch_norm(v[0], v[1], v[2], v[3], v[4], false); },
                   {{{2, 3, 2}}, {{3}}, {{3}}, {{3}}, rv}));
  Graph g;
  auto x = g.input("x", {2, 2});
  auto rm = g.parameter("rm", {2});
  auto y = g.batch_norm(x, g.input("w", {2}), g.input("b", {2}), rm, g.input("rv", {2}), true);
  Graph dg = differentiate(g, g.sum(g.mul(y, x)), {rm});
  reference::Feeds f{{"x", HostTensor({2, 2}, std::vector<double>{1, 2, 3, 5})},
                     {"rm", HostTensor({2}, std::vector<double>{7, 7})},
                     {"rv", HostTensor({2}, std::vector<double>{1, 1})},
                     {"w", HostTensor({2}, std::vector<double>{1, 1})},
                     {"b", HostTensor({2}, std::vector<double>{0, 0})}};
  EXPECT_TRUE(near_all(reference::evaluate(dg, f, *dg.gradient(rm)), {2}, {0, 0}));
}

TEST(OpsNorm, ShapeErrors) {
  Graph g;
  auto x = g.input("x", {2, 4, 3});
  auto w3 = g.input("w3", {3}), w4 = g.input("w4", {4});
  EXPECT_THROW(g.layer_norm(x, w4, w4), ShapeError);  // last axis is 3
  EXPECT_THROW(g.layer_norm(x, w3, w4), ShapeError);
  EXPECT_THROW(g.rms_norm(x, w4), ShapeError);
  EXPECT_THROW(g.batch_norm(x, w3, w3, w3, w3, true), ShapeError);  // channels (axis 1) are 4
  EXPECT_THROW(g.batch_norm(g.input("v", {4}), w4, w4, w4, w4, true), ShapeError);
  EXPECT_THROW(g.group_norm(x, w4, w4, 3), ShapeError);  // 3 does not divide 4
  EXPECT_THROW(g.group_norm(x, w4, w4, 0), ShapeError);
  EXPECT_THROW(g.layer_norm(x, w3, w3, -1.0), ShapeError);  // negative eps
  EXPECT_THROW(g.layer_norm(g.input("i", {2, 3}, DType::I32), w3, w3), ShapeError);
}
