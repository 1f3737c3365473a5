// Split-K matmuls (kernels/matmul.hpp: K slices store partial products into scratch, the last slice of each
// tile sums them in slice order and applies the epilogue; check_matmul also asserts that the tickets end at
// zero) and every scalar tile, against the float64 CPU reference and against the
// one-pass kernel: ragged sizes (7x13x1000, 33x65x777), the MLP's 32x128x784, every layout, a bias + relu
// epilogue, a batch, Mixed16 rounding, bit-equal reruns, and gradients through split matmuls in a compiled
// session.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "../cpu/op_cases.hpp"
#include "gpu_opcheck.hpp"
#include "meganeura/kernels/matmul.hpp"
#include "meganeura/kernels/matmul_check.hpp"

using namespace meganeura;
using kernels::MatmulShape;
using kernels::MatmulVariant;

namespace {

shader::CompileOptions compile_options() {
  shader::CompileOptions o;
  o.device_key = test::gpu_device().caps().fingerprint();
  return o;
}

MatmulShape shape(uint32_t m, uint32_t n, uint32_t k, int layout, uint32_t batch = 1,
                  kernels::MatmulInput in = kernels::MatmulInput::F32) {
  MatmulShape s;
  s.m = m;
  s.n = n;
  s.k = k;
  s.batch = batch;
  s.trans_a = layout == 1;
  s.trans_b = layout == 2;
  s.input = in;
  return s;
}

std::string name(const MatmulShape& s, const MatmulVariant& v) {
  return std::to_string(s.batch) + "x" + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
         std::to_string(s.k) + (s.trans_a ? " At" : " A") + (s.trans_b ? "Bt " : "B ") + v.to_string();
}

// Bias + relu on the accumulator, on both sides.
kernels::MatmulCheckOptions bias_relu(uint32_t n, uint32_t seed) {
  kernels::MatmulCheckOptions opt;
  opt.seed = seed;
  opt.epilogue.expr = "max(v + e0[col], 0.0)";
  opt.epilogue.extra_buffers = 1;
  std::vector<float> bias(n);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.25f * float(int(i % 7) - 3);
  opt.extra = {bias};
  opt.host_epilogue = [bias](float v, uint32_t, uint32_t col, uint32_t) {
    return std::max(v + bias[col], 0.0f);
  };
  return opt;
}

// Runs `variant` on seeded operands (and the bias of bias_relu) and returns C; the scratch starts as NaN.
std::vector<float> run_variant(runtime::Device& dev, const MatmulShape& s, const MatmulVariant& variant) {
  const kernels::MatmulCheckOptions opt = bias_relu(s.n, 3);
  const kernels::MatmulKernel k = kernels::select_matmul(dev.caps(), s, variant, opt.epilogue);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(kernels::elements_a(s)), b(kernels::elements_b(s));
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  const uint64_t nc = kernels::elements_c(s);
  std::vector<runtime::Buffer> mem = {dev.alloc(a.size() * 4), dev.alloc(b.size() * 4), dev.alloc(nc * 4),
                                      dev.alloc(s.n * 4)};
  dev.upload(mem[0], a.data(), a.size() * 4);
  dev.upload(mem[1], b.data(), b.size() * 4);
  dev.upload(mem[3], opt.extra[0].data(), s.n * 4);
  kernels::SplitBuffers split;
  if (k.scratch_bytes) {
    mem.push_back(split.partials = dev.alloc(k.scratch_bytes));
    const std::vector<float> nan(k.scratch_bytes / 4, NAN);
    dev.upload(split.partials, nan.data(), k.scratch_bytes);
    mem.push_back(split.tickets = dev.alloc(k.ticket_bytes));
    dev.fill_zero(split.tickets);
  }
  const runtime::KernelId id = dev.create_kernel(kernels::build_matmul_kernel(k.pass, compile_options()));
  auto list = dev.record();
  const runtime::Buffer extra[] = {mem[3]};
  kernels::record_matmul(*list, id, k, mem[0], mem[1], mem[2], extra, split);
  list->finish();
  dev.submit(*list);
  dev.wait();
  std::vector<float> c(nc);
  dev.download(mem[2], c.data(), nc * 4);
  for (const runtime::Buffer& m : mem) dev.free(m);
  return c;
}

class MatmulSplit : public test::GpuTest {
 protected:
  void expect_matches(const MatmulShape& s, const MatmulVariant& v, const kernels::MatmulCheckOptions& opt) {
    const kernels::MatmulCheck r = kernels::check_matmul(device(), compile_options(), s, v, opt);
    EXPECT_TRUE(r.ok) << name(s, v) << ": " << r.detail;
    EXPECT_EQ(r.variant.split_k, v.split_k) << name(s, v) << " ran as " << r.variant.to_string();
  }
};

}  // namespace

TEST_F(MatmulSplit, EveryTileAndLayoutWithBiasReluMatchesCpu) {
  struct Case {
    uint32_t m, n, k;
  };
  const Case cases[] = {{7, 13, 1000}, {33, 65, 777}, {32, 128, 784}};
  uint32_t seed = 1;
  for (const Case& c : cases) {
    for (int layout = 0; layout < 3; ++layout) {
      for (const char* v : {"scalar.16.k5", "scalar.64.k3", "scalar.128.k2"}) {
        const MatmulShape s = shape(c.m, c.n, c.k, layout);
        expect_matches(s, MatmulVariant::parse(v), bias_relu(c.n, seed++));
      }
    }
  }
  // The one-pass tiles too (64 is new), ragged in every dimension.
  for (int layout = 0; layout < 3; ++layout)
    for (const char* v : {"scalar.16", "scalar.64", "scalar.128"})
      expect_matches(shape(70, 45, 83, layout), MatmulVariant::parse(v), bias_relu(45, seed++));
}

// f32 operands whose rows start on 4-float boundaries take 16-byte loads (VEC_LOADS): ragged in M, N and K
// but multiples of 4, batched, split and not, in each layout; the unaligned 70x45x83 above takes scalar
// loads.
TEST_F(MatmulSplit, VectorLoadsAtRaggedMultiplesOfFourMatchCpu) {
  uint32_t seed = 60;
  for (int layout = 0; layout < 3; ++layout) {
    for (const char* v : {"scalar.64", "scalar.128", "scalar.64.k2", "scalar.128.k3"}) {
      const MatmulShape s = shape(132, 68, 300, layout, 2);
      const kernels::MatmulPass pass =
          kernels::select_matmul(device().caps(), s, MatmulVariant::parse(v)).pass;
      EXPECT_NE(pass.source.label.find("_v_"), std::string::npos)
          << name(s, MatmulVariant::parse(v)) << ": " << pass.source.label;
      expect_matches(s, MatmulVariant::parse(v), bias_relu(68, seed++));
    }
  }
}

// The 64 tile stages two vec4s of each operand a thread per K tile (BK 32; scalar.cpp's LPT) where 32 KiB of
// shared memory allow, one on a smaller device (BK 16), run here on lavapipe's device; the 128 tile one
// either way: split and not, every layout.
TEST_F(MatmulSplit, SmallSharedMemoryTilesMatchCpu) {
  runtime::DeviceCaps small = device().caps();
  small.max_shared_memory = 16384;
  uint32_t seed = 80;
  for (int layout = 0; layout < 3; ++layout) {
    for (const char* v : {"scalar.64", "scalar.128.k3"}) {
      const MatmulShape s = shape(132, 68, 300, layout, 2);
      const kernels::MatmulPass big =
          kernels::select_matmul(device().caps(), s, MatmulVariant::parse(v)).pass;
      const kernels::MatmulPass one = kernels::select_matmul(small, s, MatmulVariant::parse(v)).pass;
      auto lpt = [](const kernels::MatmulPass& p) {
        for (const auto& [k, val] : p.source.defines)
          if (k == "LPT") return val;
        return std::string("none");
      };
      EXPECT_EQ(lpt(big), std::string(v) == "scalar.64" ? "2u" : "1u") << v;
      EXPECT_EQ(lpt(one), "1u") << v;
      kernels::MatmulCheckOptions opt = bias_relu(68, seed++);
      opt.caps = &small;
      expect_matches(s, MatmulVariant::parse(v), opt);
      expect_matches(shape(70, 45, 83, layout), MatmulVariant::parse(v), [&] {
        kernels::MatmulCheckOptions o = bias_relu(45, seed++);
        o.caps = &small;
        return o;
      }());
    }
  }
}

// An f16 weight against f32 activations (16-bit parameters in an F32 session: f16 prefill) takes 8-byte loads
// of four halves where its rows start on 4-element boundaries (K x N with N = 45: element loads), in each
// layout of B.
TEST_F(MatmulSplit, SixteenBitWeightVectorLoadsMatchCpu) {
  uint32_t seed = 90;
  for (int layout : {0, 2}) {
    for (const char* v : {"scalar.64", "scalar.128", "scalar.64.k2", "scalar.128.k3"}) {
      for (uint32_t n : {68u, 45u}) {
        MatmulShape s = shape(132, n, 300, layout, 2);
        s.load_b = kernels::MatmulLoad::F16;
        const MatmulVariant var = MatmulVariant::parse(v);
        const kernels::MatmulPass pass = kernels::select_matmul(device().caps(), s, var).pass;
        const bool aligned = layout == 2 || n % 4 == 0;  // B's rows run along K (300) when transposed
        EXPECT_EQ(pass.source.label.find("_v_") != std::string::npos, aligned)
            << name(s, var) << ": " << pass.source.label;
        expect_matches(s, var, bias_relu(n, seed++));
      }
    }
  }
}

// GEMV of x·Wᵀ with f32, f16 and bf16 weights whose rows are whole groups of eight (K = 96) reads eight
// values a load
// (".v8"); K = 100 takes the element loop. M = 1, 3 and 8 (every GEMV row count class), N ragged, batched.
TEST_F(MatmulSplit, GemvEightValueLoadsMatchCpu) {
  uint32_t seed = 120;
  for (auto load : {kernels::MatmulLoad::Plain, kernels::MatmulLoad::F16, kernels::MatmulLoad::BF16}) {
    for (uint32_t k : {96u, 100u}) {
      for (uint32_t m : {1u, 3u, 8u}) {
        MatmulShape s = shape(m, 13, k, 2, 2);
        s.load_b = load;
        const MatmulVariant var = MatmulVariant::parse("gemv");
        const kernels::MatmulPass pass = kernels::select_matmul(device().caps(), s, var).pass;
        EXPECT_EQ(pass.source.label.find(".v8") != std::string::npos, k % 8 == 0)
            << name(s, var) << ": " << pass.source.label;
        expect_matches(s, var, bias_relu(13, seed++));
      }
    }
  }
}

TEST_F(MatmulSplit, BatchedAndMixed16) {
  for (int layout = 0; layout < 3; ++layout) {
    expect_matches(shape(20, 30, 300, layout, 3), MatmulVariant::parse("scalar.16.k4"),
                   bias_relu(30, 40 + layout));
    // Mixed16: each operand rounded to f16 on load, f32 accumulation; the tight tolerance catches a missing
    // rounding (see test_matmul_tiers.cpp's ScalarAndGemvRoundF32InputsToF16).
    kernels::MatmulCheckOptions tight = bias_relu(45, 50 + layout);
    tight.tolerance = 1e-5;
    expect_matches(shape(33, 45, 500, layout, 2, kernels::MatmulInput::F32RoundF16),
                   MatmulVariant::parse("scalar.64.k3"), tight);
  }
}

// Split and one pass add in different orders: equal within f32 rounding of sum |a b|; two split runs
// bit-equal.
TEST_F(MatmulSplit, EqualsOnePassWithinRoundingAndRepeatsBitForBit) {
  for (int layout = 0; layout < 3; ++layout) {
    const MatmulShape s = shape(33, 65, 777, layout);
    const std::vector<float> one = run_variant(device(), s, MatmulVariant::parse("scalar.16"));
    const std::vector<float> split = run_variant(device(), s, MatmulVariant::parse("scalar.16.k7"));
    const std::vector<float> again = run_variant(device(), s, MatmulVariant::parse("scalar.16.k7"));
    ASSERT_EQ(one.size(), split.size());
    size_t differ = 0;
    for (size_t i = 0; i < one.size(); ++i) {
      // |a|, |b| < 1 and K = 777: |error| of either order <= ~777 * 2^-24 * 777 < 4e-2 in the worst case; in
      // practice far below. 1e-3 absolute is a wide margin while a dropped slice moves outputs by ~1.
      EXPECT_NEAR(one[i], split[i], 1e-3) << "layout " << layout << " element " << i;
      differ += one[i] != split[i];
    }
    EXPECT_EQ(std::memcmp(split.data(), again.data(), split.size() * 4), 0)
        << "split-K must be deterministic";
    std::printf("layout %d: split-K differs from one pass in %zu of %zu outputs (rounding order)\n", layout,
                differ, one.size());
  }
}

// Values and gradients through compiled sessions whose matmuls are split (lavapipe reports no compute units,
// so the rule assumes 64): 260x20 outputs with K = 300 split in two, and the weight gradient (300x20, K =
// 260) too.
TEST_F(MatmulSplit, GradientsThroughSplitMatmuls) {
  struct L {
    Shape a, b;
    bool ta, tb;
    size_t splits;
  };
  const L ls[] = {{{260, 300}, {300, 20}, false, false, 2},
                  {{300, 260}, {300, 20}, true, false, 2},
                  {{260, 300}, {20, 300}, false, true, 1}};
  for (const L& l : ls) {
    const std::string label =
        "matmul " + shape_str(l.a) + (l.ta ? "T" : "") + " x " + shape_str(l.b) + (l.tb ? "T" : "");
    const meganeura::test::OpBuilder build = [ta = l.ta, tb = l.tb](Graph& g, auto& v) {
      return g.matmul(v[0], v[1], ta, tb);
    };
    const std::vector<meganeura::test::InputSpec> specs = {{l.a}, {l.b}};
    // The rule must actually split here, or this test checks nothing new.
    std::mt19937_64 rng(1);
    meganeura::test::PlacedOp placed = meganeura::test::place_op(build, specs, rng);
    placed.g.set_outputs({placed.loss, placed.y});
    const CompiledStep step = compile_step(placed.g, test::session_config(true), device().caps());
    size_t splits = 0;
    for (const GeneratedKernel& k : step.code)
      splits += k.variant.rfind("matmul.", 0) == 0 && k.variant.find(".k") != std::string::npos;
    EXPECT_GE(splits, l.splits) << label << "\n" << plan_text(step);
    // Sums of 300 products of operands near 1: 1e-4 absolute on values of ~10.
    test::GpuTolerance tol;
    tol.atol = 1e-4;
    EXPECT_TRUE(test::check_op_gpu(label, build, specs, tol));
  }
}

// The cooperative tiers split the same way; without such a device, the split pass must at least compile,
// validate and rewrite to KHR (the start-up self-test runs a split problem on devices that have them).
TEST(MatmulSplitCoop, SplitPassCompilesAndRewritesToKhr) {
  runtime::DeviceCaps caps = test::gpu_device().caps();
  caps.coopmat_nv = caps.coopmat_khr = caps.storage_16bit = caps.fp16_arithmetic = true;
  caps.subgroup_size = 32;
  caps.max_shared_memory = 49152;
  caps.coopmat_nv_shapes = caps.coopmat_khr_shapes = {{16, 8, 16, "f16", "f16", "f32", "f32", "subgroup"}};
  for (int layout = 0; layout < 3; ++layout) {
    for (uint32_t k : {1024u, 1000u}) {  // 16-byte loads, element loads
      const MatmulShape s = shape(200, 136, k, layout, 2, kernels::MatmulInput::F32RoundF16);
      const kernels::MatmulKernel kern =
          kernels::select_matmul(caps, s, kernels::MatmulTier::CoopMatKHR, bias_relu(136, 1).epilogue);
      EXPECT_GT(kern.variant.split_k, 1u);
      EXPECT_EQ(kern.pass.grid[2], 2 * kern.variant.split_k);
      EXPECT_EQ(kern.pass.num_buffers, 3u + 1u + 2u) << "A, B, C, the bias, partials, tickets";
      EXPECT_NO_THROW(kernels::build_matmul_kernel(kern.pass, compile_options()));
    }
  }
}
