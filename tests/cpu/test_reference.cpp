// The CPU reference interpreter against small cases worked out by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "meganeura/reference/interpreter.hpp"

namespace meganeura {
namespace {

using reference::evaluate;
using reference::Feeds;

HostTensor T(Shape s, std::vector<double> d) { return HostTensor(std::move(s), std::move(d)); }

void expect_values(const HostTensor& t, const Shape& shape, const std::vector<double>& want,
                   double tol = 1e-12) {
  EXPECT_EQ(t.shape, shape);
  ASSERT_EQ(t.data.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(t.data[i], want[i], tol) << "at " << i;
}

TEST(Reference, MatMulLayouts) {
  Graph g;
  auto a = g.input("a", {2, 2});
  auto b = g.input("b", {2, 2});
  Feeds f{{"a", T({2, 2}, {1, 2, 3, 4})}, {"b", T({2, 2}, {5, 6, 7, 8})}};
  expect_values(evaluate(g, f, g.matmul(a, b)), {2, 2}, {19, 22, 43, 50});
  expect_values(evaluate(g, f, g.matmul(a, b, false, true)), {2, 2}, {17, 23, 39, 53});
  expect_values(evaluate(g, f, g.matmul(a, b, true, false)), {2, 2}, {26, 30, 38, 44});
  expect_values(evaluate(g, f, g.matmul(a, b, true, true)), {2, 2}, {23, 31, 34, 46});
}

TEST(Reference, BatchedMatMulBroadcastsBatchDims) {
  Graph g;
  auto a = g.input("a", {2, 1, 2});
  auto b = g.input("b", {2, 1});
  Feeds f{{"a", T({2, 1, 2}, {1, 2, 3, 4})}, {"b", T({2, 1}, {10, 1})}};
  expect_values(evaluate(g, f, g.matmul(a, b)), {2, 1, 1}, {12, 34});
}

TEST(Reference, BroadcastingBinaryAndWhere) {
  Graph g;
  auto a = g.input("a", {2, 1});
  auto b = g.input("b", {3});
  Feeds f{{"a", T({2, 1}, {1, 2})}, {"b", T({3}, {10, 20, 30})}};
  expect_values(evaluate(g, f, g.add(a, b)), {2, 3}, {11, 21, 31, 12, 22, 32});
  expect_values(evaluate(g, f, g.sub(b, a)), {2, 3}, {9, 19, 29, 8, 18, 28});
  expect_values(evaluate(g, f, g.div(b, g.scalar(4.0))), {3}, {2.5, 5, 7.5});
  expect_values(evaluate(g, f, g.pow(a, g.scalar(3.0))), {2, 1}, {1, 8});
  expect_values(evaluate(g, f, g.maximum(a, g.scalar(1.5))), {2, 1}, {1.5, 2});
  expect_values(evaluate(g, f, g.lt(a, g.scalar(1.5))), {2, 1}, {1, 0});
  expect_values(evaluate(g, f, g.where(g.lt(a, g.scalar(1.5)), b, g.scalar(-1.0))), {2, 3},
                {10, 20, 30, -1, -1, -1});
}

TEST(Reference, UnaryValues) {
  Graph g;
  auto x = g.input("x", {1});
  auto at = [&](NodeId n, double v) { return evaluate(g, {{"x", T({1}, {v})}}, n).data[0]; };
  EXPECT_DOUBLE_EQ(at(g.relu(x), -1), 0);
  EXPECT_DOUBLE_EQ(at(g.relu(x), 3), 3);
  EXPECT_DOUBLE_EQ(at(g.leaky_relu(x, 0.1), -2), -0.2);
  EXPECT_NEAR(at(g.elu(x, 1.0), -1), -0.6321205588285577, 1e-15);
  EXPECT_DOUBLE_EQ(at(g.sigmoid(x), 0), 0.5);
  EXPECT_NEAR(at(g.softplus(x), 0), 0.6931471805599453, 1e-15);
  EXPECT_NEAR(at(g.silu(x), 2), 2 / (1 + std::exp(-2.0)), 1e-15);
  EXPECT_NEAR(at(g.gelu(x, false), 1), 0.8413447460685429, 1e-12);  // Phi(1)
  EXPECT_NEAR(at(g.gelu(x, true), 1), 0.8411919906082768, 1e-12);
  EXPECT_NEAR(at(g.erf(x), 0.5), 0.5204998778130465, 1e-15);
  EXPECT_DOUBLE_EQ(at(g.rsqrt(x), 4), 0.5);
  EXPECT_DOUBLE_EQ(at(g.reciprocal(x), 4), 0.25);
  EXPECT_DOUBLE_EQ(at(g.sign(x), -3), -1);
  EXPECT_DOUBLE_EQ(at(g.clamp(x, -1, 2), 5), 2);
  EXPECT_DOUBLE_EQ(at(g.clamp(x, -1, 2), -5), -1);
  EXPECT_DOUBLE_EQ(at(g.cast(x, DType::I32), -1.7), -1);
  EXPECT_DOUBLE_EQ(at(g.cast(x, DType::F16), 1.0 / 3), 0.333251953125);
  EXPECT_DOUBLE_EQ(at(g.cast(x, DType::BF16), 1.0 / 3), 0.333984375);
  EXPECT_DOUBLE_EQ(at(g.cast(x, DType::F16), 70000), INFINITY);
  EXPECT_DOUBLE_EQ(at(g.stop_gradient(x), 1.25), 1.25);
}

TEST(Reference, Reductions) {
  Graph g;
  auto x = g.input("x", {2, 3});
  Feeds f{{"x", T({2, 3}, {1, 2, 3, 4, 5, 6})}};
  expect_values(evaluate(g, f, g.sum(x)), {}, {21});
  expect_values(evaluate(g, f, g.sum(x, {0})), {3}, {5, 7, 9});
  expect_values(evaluate(g, f, g.sum(x, {-1})), {2}, {6, 15});
  expect_values(evaluate(g, f, g.mean(x, {1}, true)), {2, 1}, {2, 5});
  expect_values(evaluate(g, f, g.max(x, {0})), {3}, {4, 5, 6});
  expect_values(evaluate(g, f, g.min(x, {1})), {2}, {1, 4});
  expect_values(evaluate(g, f, g.variance(x, {1})), {2}, {2.0 / 3, 2.0 / 3});
  expect_values(evaluate(g, f, g.variance(x)), {}, {35.0 / 12});
  auto y = g.input("y", {2, 3});
  Feeds fy{{"y", T({2, 3}, {1, 3, 2, 5, 4, 5})}};
  auto am = evaluate(g, fy, g.argmax(y, 1));
  expect_values(am, {2}, {1, 0});  // the first of equal maxima
  expect_values(evaluate(g, fy, g.argmax(y, 0, true)), {1, 3}, {1, 1, 1});
}

TEST(Reference, SoftmaxAndLogSoftmax) {
  Graph g;
  auto x = g.input("x", {1, 3});
  Feeds f{{"x", T({1, 3}, {0, std::log(2.0), std::log(3.0)})}};
  expect_values(evaluate(g, f, g.softmax(x)), {1, 3}, {1.0 / 6, 2.0 / 6, 3.0 / 6}, 1e-15);
  expect_values(evaluate(g, f, g.log_softmax(x)), {1, 3},
                {std::log(1.0 / 6), std::log(2.0 / 6), std::log(0.5)}, 1e-15);
  // Along axis 0 of a column: every column normalises separately.
  auto c = g.input("c", {2, 2});
  Feeds fc{{"c", T({2, 2}, {0, 5, 0, 5})}};
  expect_values(evaluate(g, fc, g.softmax(c, 0)), {2, 2}, {0.5, 0.5, 0.5, 0.5});
}

TEST(Reference, CrossEntropyWithProbabilities) {
  Graph g;
  auto z = g.input("z", {2, 3});
  auto t = g.input("t", {2, 3});
  Feeds f{{"z", T({2, 3}, {0, std::log(2.0), std::log(3.0), 0, 0, 0})}, {"t", T({2, 3}, {0, 0, 1, 1, 0, 0})}};
  double l2 = std::log(2.0), l3 = std::log(3.0);
  expect_values(evaluate(g, f, g.cross_entropy_loss(z, t)), {}, {(l2 + l3) / 2}, 1e-15);
  expect_values(evaluate(g, f, g.cross_entropy_loss(z, t, Reduction::Sum)), {}, {l2 + l3}, 1e-15);
  expect_values(evaluate(g, f, g.cross_entropy_loss(z, t, Reduction::None)), {2}, {l2, l3}, 1e-15);
}

TEST(Reference, CrossEntropyWithLabelsAndIgnoreIndex) {
  Graph g;
  auto z = g.input("z", {2, 3});
  auto l = g.input("l", {2}, DType::I32);
  Feeds f{{"z", T({2, 3}, {0, std::log(2.0), std::log(3.0), 0, 0, 0})}, {"l", T({2}, {2, -100})}};
  double l2 = std::log(2.0);
  expect_values(evaluate(g, f, g.cross_entropy_loss_index(z, l)), {}, {l2}, 1e-15);  // mean over 1 valid row
  expect_values(evaluate(g, f, g.cross_entropy_loss_index(z, l, -100, Reduction::Sum)), {}, {l2}, 1e-15);
  expect_values(evaluate(g, f, g.cross_entropy_loss_index(z, l, -100, Reduction::None)), {2}, {l2, 0}, 1e-15);
  Feeds bad{{"z", f["z"]}, {"l", T({2}, {3, 0})}};
  EXPECT_THROW(evaluate(g, bad, g.cross_entropy_loss_index(z, l)), DataError);
}

TEST(Reference, PointwiseLosses) {
  Graph g;
  auto p = g.input("p", {3});
  auto t = g.input("t", {3});
  Feeds f{{"p", T({3}, {1, 2, 3})}, {"t", T({3}, {1, 0, 0})}};
  expect_values(evaluate(g, f, g.mse_loss(p, t)), {}, {13.0 / 3});
  expect_values(evaluate(g, f, g.mse_loss(p, t, Reduction::Sum)), {}, {13});
  expect_values(evaluate(g, f, g.mse_loss(p, t, Reduction::None)), {3}, {0, 4, 9});
  expect_values(evaluate(g, f, g.l1_loss(p, t)), {}, {5.0 / 3});
  auto z = g.input("z", {2});
  auto y = g.input("y", {2});
  Feeds fb{{"z", T({2}, {0, std::log(3.0)})}, {"y", T({2}, {1, 0})}};
  expect_values(evaluate(g, fb, g.bce_with_logits(z, y)), {}, {1.5 * std::log(2.0)}, 1e-15);
}

TEST(Reference, MovementAndLeaves) {
  Graph g;
  auto x = g.input("x", {2, 3});
  Feeds f{{"x", T({2, 3}, {1, 2, 3, 4, 5, 6})}};
  expect_values(evaluate(g, f, g.transpose(x)), {3, 2}, {1, 4, 2, 5, 3, 6});
  expect_values(evaluate(g, f, g.reshape(x, {3, -1})), {3, 2}, {1, 2, 3, 4, 5, 6});
  auto c = g.constant({1, 2}, {2, 1});
  expect_values(evaluate(g, f, g.broadcast_to(c, {2, 2})), {2, 2}, {1, 1, 2, 2});
  expect_values(evaluate(g, f, g.fill(2.5, {2, 2})), {2, 2}, {2.5, 2.5, 2.5, 2.5});
  auto y = g.input("y", {2, 3, 2});
  std::vector<double> yd(12);
  for (int i = 0; i < 12; ++i) yd[size_t(i)] = i;
  // out[k][i][j] = y[i][j][k]
  expect_values(evaluate(g, {{"y", T({2, 3, 2}, yd)}}, g.permute(y, {2, 0, 1})), {2, 2, 3},
                {0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11});
}

TEST(Reference, FeedsAreChecked) {
  Graph g;
  auto x = g.input("x", {2});
  auto unused = g.input("unused", {5});
  (void)unused;
  auto y = g.relu(x);
  EXPECT_THROW(evaluate(g, {}, y), GraphError);
  EXPECT_THROW(evaluate(g, {{"x", T({3}, {1, 2, 3})}}, y), ShapeError);
  EXPECT_THROW(evaluate(g, {{"x", T({2}, {1, 2, 3})}}, y), ShapeError);
  // Only what the requested nodes need is evaluated: "unused" needs no feed.
  expect_values(evaluate(g, {{"x", T({2}, {-1, 2})}}, y), {2}, {0, 2});
  EXPECT_THROW(reference::evaluate_outputs(g, {}), GraphError);
}

}  // namespace
}  // namespace meganeura
