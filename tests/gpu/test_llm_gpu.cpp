// Language-model shapes on lavapipe: linear layers on [B, S, D] activations (batch axes folded into the
// product's M, and into K for the weight gradient), and a training step of nn::CausalLm.
#include <gtest/gtest.h>

#include "gpu_opcheck.hpp"
#include "meganeura/nn/nn.hpp"

using namespace meganeura;
using meganeura::testing::InputSpec;

namespace {

class LlmGpu : public test::GpuTest {};

}  // namespace

// x [B, S, K] against W [K, N] (or Wᵀ [N, K], a tied head): value and both gradients vs the reference. The
// GEMV tier takes the folded M = B·S = 6; the tiled one 66 and 15.
TEST_F(LlmGpu, LinearOnBatchedActivations) {
  struct C {
    Shape x, w;
    bool tb;
  };
  for (const C& c : {C{{2, 3, 4}, {4, 5}, false}, C{{2, 33, 17}, {17, 9}, false}, C{{3, 5, 7}, {9, 7}, true},
                     C{{2, 33, 17}, {40, 17}, true}}) {
    const bool tb = c.tb;
    EXPECT_TRUE(test::check_op_gpu("matmul " + shape_str(c.x) + " x " + shape_str(c.w) + (tb ? "ᵀ" : ""),
                                   [tb](Graph& g, auto& v) { return g.matmul(v[0], v[1], false, tb); },
                                   {{c.x}, {c.w}}));
  }
}
