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

// Attention's dK/dV both ways: with as many query as KV heads and a grid that fills the device (lavapipe: 64
// compute units assumed) one dispatch stores dK and dV; with grouped-query heads the parts per query head and
// query chunk go to scratch and a second dispatch sums them. Values and gradients vs the reference.
TEST_F(LlmGpu, AttentionBackwardDirectAndByParts) {
  auto sdpa = [](Graph& g, auto& v) { return g.scaled_dot_product_attention(v[0], v[1], v[2], true); };
  struct C {
    const char* name;
    int64_t hq, hkv, s;
    bool parts;
  };
  for (const C& c : {C{"direct", 2, 2, 600, false}, C{"gqa parts", 3, 1, 45, true}}) {
    const std::vector<InputSpec> specs{{{1, c.hq, c.s, 8}}, {{1, c.hkv, c.s, 8}}, {{1, c.hkv, c.s, 8}}};
    std::mt19937_64 rng(1);
    meganeura::testing::PlacedOp p = meganeura::testing::place_op(sdpa, specs, rng);
    p.g.set_outputs({p.loss});
    const CompiledStep st = compile_step(p.g, test::session_config(true), test::gpu_device().caps());
    bool by_parts = false;
    for (const GeneratedKernel& k : st.code) by_parts = by_parts || k.variant == "attention.dkdv-parts";
    EXPECT_EQ(by_parts, c.parts) << c.name;
    test::GpuTolerance tol;
    tol.atol = 2e-5;
    tol.rtol = 2e-4;
    EXPECT_TRUE(test::check_op_gpu(c.name, sdpa, specs, tol));
  }
}
