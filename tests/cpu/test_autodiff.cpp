// Autodiff: gradients by handle and name, chaining, stop_gradient, unused parameters, compact backward.
#include <gtest/gtest.h>

#include "gradcheck.hpp"
#include "meganeura/autodiff/autodiff.hpp"
#include "meganeura/reference/interpreter.hpp"

namespace meganeura {
namespace {

using testing::gradcheck;
using testing::random_tensor;

TEST(Autodiff, HeadlineExampleGradcheck) {
  Graph g;
  auto x = g.input("x", {4, 6});
  auto labels = g.input("labels", {4, 3});
  auto w1 = g.parameter("w1", {6, 5});
  auto h = g.relu(g.matmul(x, w1));
  auto w2 = g.parameter("w2", {5, 3});
  auto logits = g.matmul(h, w2);
  auto loss = g.cross_entropy_loss(logits, labels);
  g.set_outputs({loss});
  std::mt19937_64 rng(7);
  reference::Feeds f;
  f["x"] = random_tensor({4, 6}, rng);
  f["w1"] = random_tensor({6, 5}, rng);
  f["w2"] = random_tensor({5, 3}, rng);
  HostTensor t({4, 3});
  for (int r = 0; r < 4; ++r) t[size_t(r * 3 + r % 3)] = 1.0;
  f["labels"] = t;
  EXPECT_TRUE(gradcheck(g, loss, f, {w1, w2}));
}

}  // namespace
}  // namespace meganeura
