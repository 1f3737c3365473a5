// Attention family: scaled_dot_product_attention (causal, mask, GQA, scale) and its gradient ops, rope,
// dropout, swiglu.
#include <gtest/gtest.h>

#include <cmath>

#include "eval_helpers.hpp"
#include "gradcheck.hpp"
#include "meganeura/ops/dropout_hash.hpp"

using namespace meganeura;
using namespace meganeura::test;

namespace {

NodeId sdpa(Graph& g, const std::vector<NodeId>& v, bool causal, double scale = 0.0) {
  std::optional<NodeId> mask;
  if (v.size() > 3) mask = v[3];
  return g.scaled_dot_product_attention(v[0], v[1], v[2], causal, mask, scale);
}

}  // namespace

TEST(OpsAttention, HandComputed) {
  // one query, two keys: scores (0, ln 2) -> probabilities (1/3, 2/3); values (3, 6) -> 5
  auto q = f32({1, 1, 1, 1}, {1});
  auto k = f32({1, 1, 2, 1}, {0, std::log(2.0)});
  auto v = f32({1, 1, 2, 1}, {3, 6});
  auto y = eval_op([](Graph& g, auto& x) { return sdpa(g, x, false, 1.0); }, {q, k, v});
  EXPECT_TRUE(near_all(y, {1, 1, 1, 1}, {5}));
  // default scale is 1/sqrt(D): with D = 4 a doubled key gives the same result
  auto q4 = f32({1, 1, 1, 4}, {1, 0, 0, 0});
  auto k4 = f32({1, 1, 2, 4}, {0, 0, 0, 0, 2 * std::log(2.0), 0, 0, 0});
  auto v4 = f32({1, 1, 2, 4}, {3, 0, 0, 0, 6, 0, 0, 1});
  y = eval_op([](Graph& g, auto& x) { return sdpa(g, x, false); }, {q4, k4, v4});
  EXPECT_TRUE(near_all(y, {1, 1, 1, 4}, {5, 0, 0, 2.0 / 3.0}));
  // an additive mask of -inf removes the second key
  y = eval_op([](Graph& g, auto& x) { return sdpa(g, x, false, 1.0); },
              {q, k, v, f32({1, 2}, {0, -INFINITY})});
  EXPECT_TRUE(near_all(y, {1, 1, 1, 1}, {3}));
}

TEST(OpsAttention, CausalIsBottomRightAligned) {
  // S = T = 2: query 0 sees key 0 only
  auto q = f32({1, 1, 2, 1}, {1, 1});
  auto k = f32({1, 1, 2, 1}, {0, 0});
  auto v = f32({1, 1, 2, 1}, {2, 4});
  auto y = eval_op([](Graph& g, auto& x) { return sdpa(g, x, true); }, {q, k, v});
  EXPECT_TRUE(near_all(y, {1, 1, 2, 1}, {2, 3}));
  // S = 1, T = 2 (decoding after a cache): the single query sees both keys
  y = eval_op([](Graph& g, auto& x) { return sdpa(g, x, true); }, {f32({1, 1, 1, 1}, {1}), k, v});
  EXPECT_TRUE(near_all(y, {1, 1, 1, 1}, {3}));
  // S = 3 > T = 2: the first query sees no key and outputs zeros (not NaN)
  y = eval_op([](Graph& g, auto& x) { return sdpa(g, x, true); }, {f32({1, 1, 3, 1}, {1, 1, 1}), k, v});
  EXPECT_TRUE(near_all(y, {1, 1, 3, 1}, {0, 2, 3}));
}

TEST(OpsAttention, GroupedQueryHeadsShareKv) {
  // 4 query heads over 2 KV heads: heads 0,1 read KV head 0; heads 2,3 read KV head 1
  auto q = f32({1, 4, 1, 1}, {1, 1, 1, 1});
  auto k = f32({1, 2, 1, 1}, {0, 0});
  auto v = f32({1, 2, 1, 1}, {7, 9});
  auto y = eval_op([](Graph& g, auto& x) { return sdpa(g, x, false); }, {q, k, v});
  EXPECT_TRUE(near_all(y, {1, 4, 1, 1}, {7, 7, 9, 9}));
  // dV sums over the heads of a group
  auto dv = grad_op([](Graph& g, auto& x) { return sdpa(g, x, false); }, {q, k, v}, 2,
                    HostTensor({1, 4, 1, 1}, std::vector<double>{1, 2, 3, 4}));
  EXPECT_TRUE(near_all(dv, {1, 2, 1, 1}, {3, 7}));
}

TEST(OpsAttention, Gradchecks) {
  const std::vector<InputSpec> qkv{{{2, 4, 3, 4}}, {{2, 2, 5, 4}}, {{2, 2, 5, 3}}};
  EXPECT_TRUE(gradcheck_op(
      "sdpa_gqa", [](Graph& g, auto& v) { return sdpa(g, v, false); }, qkv));
  EXPECT_TRUE(gradcheck_op(
      "sdpa_causal", [](Graph& g, auto& v) { return sdpa(g, v, true); }, qkv));
  EXPECT_TRUE(gradcheck_op("sdpa_scale_square", [](Graph& g, auto& v) { return sdpa(g, v, true, 0.7); },
                           {{{1, 2, 4, 2}}, {{1, 2, 4, 2}}, {{1, 2, 4, 2}}}));
  InputSpec mask{{3, 5}, -2.0, 2.0};
  mask.differentiable = false;
  auto with_mask = qkv;
  with_mask.push_back(mask);
  EXPECT_TRUE(gradcheck_op(
      "sdpa_mask", [](Graph& g, auto& v) { return sdpa(g, v, false); }, with_mask));
  EXPECT_TRUE(gradcheck_op(
      "sdpa_mask_causal", [](Graph& g, auto& v) { return sdpa(g, v, true); }, with_mask));
  // a learned additive bias, broadcast over batch and heads, gets its gradient too
  auto learned = qkv;
  learned.push_back(InputSpec{{1, 3, 5}});
  EXPECT_TRUE(gradcheck_op(
      "sdpa_learned_mask", [](Graph& g, auto& v) { return sdpa(g, v, false); }, learned));
  EXPECT_TRUE(gradcheck_op(
      "sdpa_learned_mask_causal", [](Graph& g, auto& v) { return sdpa(g, v, true); }, learned));
  EXPECT_TRUE(
      gradcheck_op("rope", [](Graph& g, auto& v) { return g.rope(v[0], 100.0, 3); }, {{{2, 3, 4, 6}}}));
  EXPECT_TRUE(gradcheck_op("swiglu",
                           [](Graph& g, auto& v) {
                             return g.make(Op::SwiGlu, {v[0], v[1]}, {}, {});
                           },
                           {{{3, 4}}, {{3, 4}}}));
  EXPECT_TRUE(
      gradcheck_op("dropout", [](Graph& g, auto& v) { return g.dropout(v[0], 0.3, 11); }, {{{4, 5}}}));
}

TEST(OpsAttention, LogSumExpOfTheScores) {
  // scores (0, ln 2) -> log(1 + 2); a causal row that sees no key -> -inf
  auto q = f32({1, 1, 1, 1}, {1});
  auto k = f32({1, 1, 2, 1}, {0, std::log(2.0)});
  auto v = f32({1, 1, 2, 1}, {3, 6});
  auto lse = [](bool causal) {
    return [=](Graph& g, const std::vector<NodeId>& x) {
      Attrs a;
      a.reals = {1.0};
      a.flag_a = causal;
      return g.make(Op::AttentionLse, x, a, {});
    };
  };
  EXPECT_TRUE(near_all(eval_op(lse(false), {q, k, v}), {1, 1, 1}, {std::log(3.0)}));
  auto y = eval_op(lse(true), {f32({1, 1, 3, 1}, {1, 1, 1}), k, v});
  EXPECT_EQ(y.data[0], -INFINITY);
  EXPECT_NEAR(y.data[1], 0.0, 1e-12);
  EXPECT_NEAR(y.data[2], std::log(3.0), 1e-12);
  // the VJP saves it for the gradient ops, which take {q, k, v, dout, out, lse}
  Graph g;
  auto qn = g.parameter("q", {1, 2, 3, 4});
  auto kn = g.input("k", {1, 1, 5, 4});
  auto vn = g.input("v", {1, 1, 5, 2});
  auto out = g.scaled_dot_product_attention(qn, kn, vn, true);
  Graph d = differentiate(g, g.sum(out), {qn});
  const Node& dq = d.node(*d.gradient(qn));
  ASSERT_EQ(dq.op, Op::AttentionGradQ);
  ASSERT_EQ(dq.inputs.size(), 6u);
  EXPECT_EQ(d.node(dq.inputs[5]).op, Op::AttentionLse);
  EXPECT_EQ(d.node(dq.inputs[5]).shape, (Shape{1, 2, 3}));
  EXPECT_EQ(d.node(dq.inputs[4]).op, Op::Attention);
}

TEST(OpsAttention, SecondOrderThroughAttentionIsAnError) {
  Graph g;
  auto q = g.parameter("q", {1, 1, 2, 2});
  auto k = g.input("k", {1, 1, 2, 2});
  auto v = g.input("v", {1, 1, 2, 2});
  auto y = g.scaled_dot_product_attention(q, k, v);
  Graph d1 = differentiate(g, g.sum(y), {q});
  EXPECT_THROW(differentiate(d1, d1.sum(*d1.gradient(q)), {q}), GraphError);
}

TEST(OpsAttention, RopeHandComputed) {
  // D = 2: one pair rotated by (offset + s) radians; theta is irrelevant for i = 0
  auto y = eval_op([](Graph& g, auto& v) { return g.rope(v[0], 10000.0, 1); }, {f32({2, 2}, {1, 0, 1, 0})});
  EXPECT_TRUE(near_all(y, {2, 2}, {std::cos(1.0), std::sin(1.0), std::cos(2.0), std::sin(2.0)}));
  // D = 4, s = 0 + offset 2: pair 0 (x0, x2) by 2 rad, pair 1 (x1, x3) by 2 * theta^(-1/2) = 2 / 10
  y = eval_op([](Graph& g, auto& v) { return g.rope(v[0], 100.0, 2); }, {f32({1, 4}, {1, 1, 0, 0})});
  EXPECT_TRUE(near_all(y, {1, 4}, {std::cos(2.0), std::cos(0.2), std::sin(2.0), std::sin(0.2)}));
}

TEST(OpsAttention, DropoutIsSeededAndScaled) {
  const size_t n = 20000;
  HostTensor ones({int64_t(n)}, 1.0);
  auto b = [](uint64_t seed) {
    return [=](Graph& g, const std::vector<NodeId>& v) { return g.dropout(v[0], 0.25, seed); };
  };
  auto a = eval_op(b(5), {{ones}}), a2 = eval_op(b(5), {{ones}}), c = eval_op(b(6), {{ones}});
  EXPECT_EQ(a.data, a2.data);  // reproducible
  EXPECT_NE(a.data, c.data);   // seed matters
  size_t kept = 0;
  for (double v : a.data) {
    EXPECT_TRUE(v == 0.0 || std::abs(v - 1.0 / 0.75) < 1e-12) << v;
    kept += v != 0.0;
  }
  EXPECT_NEAR(double(kept) / double(n), 0.75, 0.015);
  // the mask is the documented function of (seed, index), so a GPU kernel can reproduce it
  for (size_t i = 0; i < 100; ++i) EXPECT_EQ(a.data[i] != 0.0, ops::dropout_keep(5, uint32_t(i), 0.25));
  const auto keys = ops::dropout_keys(5);
  EXPECT_EQ(ops::dropout_mix(ops::dropout_mix(7u ^ keys.k1) ^ keys.k2) >> 8, ops::dropout_bits(5, 7));
  // p = 0 is the identity; backward uses the same mask: d(sum(dropout(x) * r))/dx = mask * r / (1 - p)
  EXPECT_EQ(eval_op([](Graph& g, auto& v) { return g.dropout(v[0], 0.0, 1); }, {{ones}}).data, ones.data);
  HostTensor up({int64_t(n)}, 2.0);
  auto dx = grad_op(b(5), {{ones}}, 0, up);
  for (size_t i = 0; i < n; ++i) ASSERT_DOUBLE_EQ(dx.data[i], 2.0 * a.data[i]);
}

TEST(OpsAttention, ShapeErrors) {
  Graph g;
  auto q = g.input("q", {1, 3, 4, 8});
  auto k = g.input("k", {1, 2, 5, 8});
  auto v = g.input("v", {1, 2, 5, 8});
  EXPECT_THROW(g.scaled_dot_product_attention(q, k, v), ShapeError);  // 3 heads over 2 KV heads
  auto q4 = g.input("q4", {1, 4, 4, 8});
  EXPECT_THROW(g.scaled_dot_product_attention(q4, g.input("k6", {1, 2, 5, 6}), v), ShapeError);  // D differs
  EXPECT_THROW(g.scaled_dot_product_attention(q4, k, g.input("v4", {1, 2, 4, 8})), ShapeError);  // T differs
  EXPECT_THROW(g.scaled_dot_product_attention(q4, k, v, false, g.input("m", {4, 4})), ShapeError);  // T is 5
  EXPECT_THROW(g.scaled_dot_product_attention(g.input("q3", {4, 4, 8}), k, v), ShapeError);         // rank 3
  EXPECT_NO_THROW(g.scaled_dot_product_attention(q4, k, v, true, g.input("m2", {1, 4, 1, 5})));
  EXPECT_THROW(g.rope(g.input("odd", {2, 3, 5})), ShapeError);
  EXPECT_THROW(g.rope(g.input("r1", {4})), ShapeError);
  EXPECT_THROW(g.dropout(q, 1.0, 1), ShapeError);
  EXPECT_THROW(g.dropout(q, -0.1, 1), ShapeError);
}
