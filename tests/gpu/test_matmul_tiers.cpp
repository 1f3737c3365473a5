// The matmul kernel family against the CPU reference (kernels/matmul.hpp), and the NV -> KHR
// cooperative-matrix rewrite (shader/coopmat_khr.hpp). On lavapipe the scalar and GEMV tiers run and the
// cooperative tiers are compiled, validated and rewritten but cannot run, so the self-test must fall back to
// scalar; on a device with cooperative matrices (the H200) the same tests run those tiers against the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "gpu/gpu_fixture.hpp"
#include "meganeura/kernels/matmul.hpp"
#include "meganeura/kernels/matmul_check.hpp"
#include "meganeura/shader/coopmat_khr.hpp"

namespace meganeura::test {
namespace {

using kernels::MatmulInput;
using kernels::MatmulShape;
using kernels::MatmulTier;

shader::CompileOptions compile_options() {
  shader::CompileOptions o;
  o.device_key = gpu_device().caps().fingerprint();
  return o;
}

MatmulShape shape(uint32_t m, uint32_t n, uint32_t k, bool ta, bool tb, uint32_t batch = 1,
                  MatmulInput in = MatmulInput::F32) {
  MatmulShape s;
  s.m = m;
  s.n = n;
  s.k = k;
  s.trans_a = ta;
  s.trans_b = tb;
  s.batch = batch;
  s.input = in;
  return s;
}

std::string name(const MatmulShape& s) {
  return std::to_string(s.batch) + "x" + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
         std::to_string(s.k) + (s.trans_a ? " At" : " A") + (s.trans_b ? "Bt" : "B");
}

void expect_matches(MatmulTier tier, const MatmulShape& s, const kernels::MatmulCheckOptions& opt = {}) {
  const kernels::MatmulCheck r = kernels::check_matmul(gpu_device(), compile_options(), s, tier, opt);
  EXPECT_TRUE(r.ok) << kernels::tier_name(tier) << " " << name(s) << ": " << r.detail;
}

// Every transpose combination, aligned and ragged, batched, with the tile the rule picks (on lavapipe, which
// reports no compute units, 64 are assumed: small outputs take the 16x16 kernel, 1030x520 the 64x64 one);
// every tile and split-K are forced in test_matmul_split.cpp.
std::vector<MatmulShape> scalar_shapes(MatmulInput in) {
  std::vector<MatmulShape> v;
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    v.push_back(shape(128, 128, 64, ta, tb, 1, in));
    v.push_back(shape(70, 45, 83, ta, tb, 2, in));
    v.push_back(shape(131, 9, 17, ta, tb, 1, in));
    v.push_back(shape(1030, 520, 7, ta, tb, 1, in));  // 153 tiles of 64x64
  }
  return v;
}

class MatmulTiers : public GpuTest {};

TEST_F(MatmulTiers, ScalarMatchesCpuInEveryLayout) {
  for (const MatmulShape& s : scalar_shapes(MatmulInput::F32)) expect_matches(MatmulTier::Scalar, s);
}

TEST_F(MatmulTiers, ScalarReadsF16Inputs) {
  ASSERT_TRUE(device().caps().storage_16bit) << "lavapipe offers 16-bit storage";
  expect_matches(MatmulTier::Scalar, shape(70, 45, 83, false, true, 1, MatmulInput::F16));
  expect_matches(MatmulTier::Scalar, shape(64, 64, 40, true, false, 2, MatmulInput::F16));
}

// Mixed16: f32 storage, every operand rounded to f16 on load (needs no 16-bit storage). check_matmul uploads
// unrounded values and compares against the reference of the rounded ones. Tolerance 1e-5 of sum|a b|: f32
// accumulation stays below ~1e-6 there, while skipping the rounding leaves ~3e-5 on average (K = 83..130).
TEST_F(MatmulTiers, ScalarAndGemvRoundF32InputsToF16) {
  kernels::MatmulCheckOptions opt;
  opt.tolerance = 1e-5;
  for (int t = 0; t < 4; ++t) {
    expect_matches(MatmulTier::Scalar, shape(70, 45, 83, t & 1, t & 2, 2, MatmulInput::F32RoundF16), opt);
    expect_matches(MatmulTier::Gemv, shape(5, 77, 130, t & 1, t & 2, 1, MatmulInput::F32RoundF16), opt);
  }
}

TEST_F(MatmulTiers, GemvMatchesCpuForSmallM) {
  for (uint32_t m : {1u, 5u, 8u}) {
    for (int t = 0; t < 4; ++t) {
      expect_matches(MatmulTier::Gemv, shape(m, 77, 130, t & 1, t & 2));
      expect_matches(MatmulTier::Gemv, shape(m, 256, 64, t & 1, t & 2, 3));
    }
  }
}

TEST_F(MatmulTiers, EpilogueBiasThenRelu) {
  kernels::MatmulCheckOptions opt;
  opt.epilogue.expr = "max(v + e0[col], 0.0)";
  opt.epilogue.extra_buffers = 1;
  std::vector<float> bias(45);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.25f * float(int(i % 7) - 3);
  opt.extra = {bias};
  opt.host_epilogue = [bias](float v, uint32_t, uint32_t col, uint32_t) {
    return std::max(v + bias[col], 0.0f);
  };
  expect_matches(MatmulTier::Scalar, shape(70, 45, 83, false, false), opt);
  expect_matches(MatmulTier::Scalar, shape(70, 45, 83, true, true, 2), opt);
  expect_matches(MatmulTier::Gemv, shape(3, 45, 83, false, true), opt);
}

TEST_F(MatmulTiers, LeadingDimensionsLeavePaddingUntouched) {
  MatmulShape s = shape(40, 30, 20, false, false, 2);
  s.lda = 24;
  s.ldb = 33;
  s.ldc = 35;
  s.stride_c = 35 * 41;
  expect_matches(MatmulTier::Scalar, s);
  s.m = 4;
  expect_matches(MatmulTier::Gemv, s);
}

TEST_F(MatmulTiers, SelectRejectsBadRequests) {
  const auto& caps = device().caps();
  EXPECT_THROW(kernels::select_matmul(caps, shape(0, 4, 4, false, false), MatmulTier::Scalar), ShapeError);
  EXPECT_THROW(kernels::select_matmul(caps, shape(9, 4, 4, false, false), MatmulTier::Gemv), ConfigError);
  MatmulShape s = shape(8, 8, 8, false, false);
  s.lda = 4;
  EXPECT_THROW(kernels::select_matmul(caps, s, MatmulTier::Scalar), ShapeError);
  EXPECT_THROW(kernels::parse_tier("tensor-core"), ConfigError);
  EXPECT_EQ(kernels::choose_tier(caps, shape(4, 64, 64, false, false), MatmulTier::CoopMatNV),
            MatmulTier::Gemv);
  EXPECT_EQ(kernels::choose_tier(caps, shape(64, 64, 64, false, false), MatmulTier::CoopMatNV),
            MatmulTier::Scalar)
      << "f32 inputs never take a cooperative tier";
}

// The cooperative tiers: on a device that has them, against the CPU; elsewhere the selection must refuse.
TEST_F(MatmulTiers, CooperativeTiersMatchCpuOrAreRefused) {
  const auto& caps = device().caps();
  for (MatmulTier tier : {MatmulTier::CoopMatNV, MatmulTier::CoopMatKHR}) {
    const bool has = tier == MatmulTier::CoopMatNV ? caps.coopmat_nv : caps.coopmat_khr;
    const MatmulShape probe = shape(128, 128, 64, false, false, 1, MatmulInput::F16);
    if (!has) {
      EXPECT_NE(kernels::tier_unavailable(caps, probe, tier), "");
      EXPECT_THROW(kernels::select_matmul(caps, probe, tier), ConfigError);
      continue;
    }
    ASSERT_EQ(kernels::tier_unavailable(caps, probe, tier), "");
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      expect_matches(tier,
                     shape(256, 256, 256, ta, tb, 1, MatmulInput::F16));       // 16-byte loads, direct stores
      expect_matches(tier, shape(200, 136, 72, ta, tb, 2, MatmulInput::F16));  // 16-byte loads, masked edges
      expect_matches(tier, shape(131, 77, 45, ta, tb, 2, MatmulInput::F16));   // element loads
      // Mixed16 sessions: f32 buffers rounded to f16 as they are loaded (vector and element loads); the tight
      // tolerance catches a rounding that is not to nearest (see ScalarAndGemvRoundF32InputsToF16).
      kernels::MatmulCheckOptions tight;
      tight.tolerance = 1e-5;
      expect_matches(tier, shape(200, 136, 72, ta, tb, 2, MatmulInput::F32RoundF16), tight);
      expect_matches(tier, shape(131, 77, 45, ta, tb, 2, MatmulInput::F32RoundF16), tight);
    }
    kernels::MatmulCheckOptions opt;
    opt.epilogue.expr = "max(v + e0[col], 0.0)";
    opt.epilogue.extra_buffers = 1;
    std::vector<float> bias(136);
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.125f * float(int(i % 9) - 4);
    opt.extra = {bias};
    opt.host_epilogue = [bias](float v, uint32_t, uint32_t col, uint32_t) {
      return std::max(v + bias[col], 0.0f);
    };
    expect_matches(tier, shape(200, 136, 72, false, true, 1, MatmulInput::F16), opt);
  }
}

// Cooperative tile variants (grouped rasters whose last group is partial, one shared stage, deeper K) on
// grids that are not multiples of the group, every layout, ragged edges.
TEST_F(MatmulTiers, CooperativeTileVariantsMatchCpu) {
  const auto& caps = device().caps();
  for (const char* tile :
       {"128x128x32/2x4/g4", "128x128x32/2x4/g3", "128x128x64/2x4/s1", "128x256x32/2x4/g8/s1",
        "256x128x32/4x2/s1", "128x128x32/2x4/g16", "128x128x32/4x2/g2",
        // prefetch depth, 16 and 4 subgroups
        "128x128x32/2x4/d2", "128x128x32/4x4/d2", "128x256x32/4x4/g4/s1", "64x128x32/2x2/d3",
        "128x128x32/4x4/s1", "128x128x32/4x4/d3"}) {
    kernels::MatmulCheckOptions opt;
    opt.tile = kernels::CoopMatTile::parse(tile);
    if (!caps.coopmat_khr) {  // lavapipe: refused here, compiled in CoopMatRewrite
      EXPECT_THROW(kernels::select_matmul(caps, shape(131, 77, 45, false, false, 1, MatmulInput::F16),
                                          MatmulTier::CoopMatKHR, {}, opt.tile),
                   ConfigError);
      continue;
    }
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      expect_matches(MatmulTier::CoopMatKHR, shape(1100, 700, 200, ta, tb, 2, MatmulInput::F16), opt);
      expect_matches(MatmulTier::CoopMatKHR, shape(131, 77, 45, ta, tb, 1, MatmulInput::F16), opt);
    }
    if (caps.coopmat_nv)
      expect_matches(MatmulTier::CoopMatNV, shape(650, 520, 136, false, false, 1, MatmulInput::F16), opt);
  }
}

// Workgroup-scope tiles against the CPU on a device that has them (the H200): every layout, f16 and Mixed16
// inputs, K ragged (zero-filled tail) with 16-byte and element loads, batched. Elsewhere (lavapipe) selection
// must refuse them; their SPIR-V is checked in CoopMatRewrite.
TEST_F(MatmulTiers, WorkgroupScopeTilesMatchCpu) {
  const auto& caps = device().caps();
  for (const char* tile : {"128x128x32/2x2/s1/w", "128x128x32/2x2/w", "128x256x32/2x4/s1/w"}) {
    kernels::MatmulCheckOptions opt;
    opt.tile = kernels::CoopMatTile::parse(tile);
    if (!caps.coopmat2_workgroup || !caps.coopmat_khr) {
      EXPECT_THROW(kernels::select_matmul(caps, shape(256, 256, 64, false, false, 1, MatmulInput::F16),
                                          MatmulTier::CoopMatKHR, {}, opt.tile),
                   ConfigError)
          << tile;
      continue;
    }
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      expect_matches(MatmulTier::CoopMatKHR, shape(256, 512, 200, ta, tb, 2, MatmulInput::F16), opt);
      expect_matches(MatmulTier::CoopMatKHR, shape(256, 256, 128, ta, tb, 2, MatmulInput::F16),
                     opt);  // FULL_TILES
      expect_matches(MatmulTier::CoopMatKHR, shape(128, 256, 45, ta, tb, 1, MatmulInput::F16), opt);
      expect_matches(MatmulTier::CoopMatKHR, shape(256, 256, 96, ta, tb, 1, MatmulInput::F32RoundF16), opt);
    }
  }
}

// Mixed16 rounds each f32 operand to the nearest f16, ties to even, f16 denormals kept: A holds ties in the
// normal and the denormal range, and B is the identity, so C must equal A rounded, exactly. The scalar tier
// rounds by integer arithmetic (to_in); the cooperative tiers, on a device with f16_rte_conversion, by the
// conversion itself (RTE_F16). Elsewhere the cooperative tiers must refuse (lavapipe has none).
TEST_F(MatmulTiers, Mixed16RoundsTiesToEvenAndKeepsDenormals) {
  const auto& caps = device().caps();
  const uint32_t n = 128;
  const float ulp = std::ldexp(1.0f, -11), sub = std::ldexp(1.0f, -24);
  const std::vector<float> special = {1 + ulp,    1 + 3 * ulp, -(1 + ulp), 2049.0f,   2051.0f, 1.5f * sub,
                                      0.5f * sub, 1.25f * sub, 65504.0f,   -65504.0f, 0.1f,    3.14159265f,
                                      1e-3f,      -2.5f * sub, 0.0f,       65519.0f};
  kernels::MatmulCheckOptions opt;
  opt.tolerance = 1e-7;  // an f16 ulp off is >= 6e-5 of the bound here
  opt.a_values.resize(n * n);
  opt.b_values.assign(n * n, 0.0f);
  for (uint32_t i = 0; i < n * n; ++i) opt.a_values[i] = special[(i * 7 + i / n) % special.size()];
  for (uint32_t i = 0; i < n; ++i) opt.b_values[i * n + i] = 1.0f;
  const MatmulShape s = shape(n, n, n, false, false, 1, MatmulInput::F32RoundF16);
  expect_matches(MatmulTier::Scalar, s, opt);
  for (MatmulTier tier : {MatmulTier::CoopMatNV, MatmulTier::CoopMatKHR}) {
    if (!kernels::tier_unavailable(caps, s, tier).empty()) {
      EXPECT_THROW(kernels::select_matmul(caps, s, tier), ConfigError) << kernels::tier_name(tier);
      std::printf("[ skipped  ] %s: %s\n", kernels::tier_name(tier),
                  kernels::tier_unavailable(caps, s, tier).c_str());
      continue;
    }
    std::printf("[ rounding ] %s: %s\n", kernels::tier_name(tier),
                caps.f16_rte_conversion ? "by the conversion (RTE_F16)" : "by integer arithmetic");
    expect_matches(tier, s, opt);
  }
}

TEST_F(MatmulTiers, SelfTestFallsBackToScalarWithoutCooperativeMatrices) {
  const auto& caps = device().caps();
  const kernels::MatmulTierChoice choice = kernels::probe_matmul_tiers(device(), compile_options());
  ASSERT_EQ(choice.probes.size(), 3u) << choice.to_text();
  std::map<MatmulTier, bool> ok;
  for (const auto& p : choice.probes) ok[p.tier] = p.ok;
  EXPECT_TRUE(ok[MatmulTier::Scalar]) << choice.to_text();
  if (!caps.coopmat_nv && !caps.coopmat_khr) {
    EXPECT_EQ(choice.best, MatmulTier::Scalar) << choice.to_text();
    EXPECT_FALSE(ok[MatmulTier::CoopMatNV]);
    EXPECT_FALSE(ok[MatmulTier::CoopMatKHR]);
    EXPECT_NE(choice.to_text().find("no VK_NV_cooperative_matrix"), std::string::npos) << choice.to_text();
  } else {
    EXPECT_EQ(ok[MatmulTier::CoopMatNV], caps.coopmat_nv) << choice.to_text();
    EXPECT_EQ(ok[MatmulTier::CoopMatKHR], caps.coopmat_khr) << choice.to_text();
    EXPECT_NE(choice.best, MatmulTier::Scalar) << choice.to_text();
  }
  // A forced tier probes only itself (and scalar, the fallback).
  const kernels::MatmulTierChoice forced =
      kernels::probe_matmul_tiers(device(), compile_options(), MatmulTier::CoopMatKHR);
  ASSERT_EQ(forced.probes.size(), 2u);
  EXPECT_EQ(forced.probes[0].tier, MatmulTier::CoopMatKHR);
  EXPECT_EQ(forced.best, caps.coopmat_khr ? MatmulTier::CoopMatKHR : MatmulTier::Scalar) << forced.to_text();
}

// ---- the SPIR-V rewrite (device-independent: compiles and inspects modules) ----

std::map<uint32_t, int> opcode_counts(const std::vector<uint32_t>& spirv) {
  std::map<uint32_t, int> n;
  for (size_t pos = 5; pos < spirv.size();) {
    const uint32_t count = spirv[pos] >> 16;
    ++n[spirv[pos] & 0xffff];
    if (count == 0) break;
    pos += count;
  }
  return n;
}

bool has_capability(const std::vector<uint32_t>& spirv, uint32_t cap) {
  for (size_t pos = 5; pos < spirv.size(); pos += spirv[pos] >> 16) {
    if ((spirv[pos] & 0xffff) == shader::spv::kOpCapability && spirv[pos + 1] == cap) return true;
    if ((spirv[pos] >> 16) == 0) break;
  }
  return false;
}

bool has_bytes(const std::vector<uint32_t>& spirv, const std::string& s) {
  const auto* bytes = reinterpret_cast<const char*>(spirv.data());
  return std::string(bytes, spirv.size() * 4).find(s) != std::string::npos;
}

kernels::MatmulEpilogue doubled(bool on) {
  kernels::MatmulEpilogue e;
  if (on) e.expr = "v * 2.0";
  return e;
}

// A fake device with cooperative matrices (the H200's 48 KiB of shared memory), so that selection produces
// every variant without one.
runtime::DeviceCaps coop_caps() {
  runtime::DeviceCaps caps = gpu_device().caps();
  caps.coopmat_nv = caps.coopmat_khr = caps.storage_16bit = caps.fp16_arithmetic = true;
  caps.subgroup_size = 32;
  caps.max_shared_memory = 49152;
  caps.compute_units =
      16;  // the split-K choice must not follow the real device (132 on the H200 split K 256 in two)
  runtime::CoopMatShape cm{16, 8, 16, "f16", "f16", "f32", "f32", "subgroup"};
  caps.coopmat_nv_shapes = caps.coopmat_khr_shapes = {cm};
  // The H200's workgroup-scope f16 x f16 -> f32 granularities (VK_NV_cooperative_matrix2, session 7's run 1).
  caps.coopmat2_workgroup = true;
  caps.coopmat2_flexible_shapes = {{16, 16, 16, "f16", "f16", "f32", "f32", "workgroup", 64},
                                   {32, 16, 16, "f16", "f16", "f32", "f32", "workgroup", 128},
                                   {32, 32, 16, "f16", "f16", "f32", "f32", "workgroup", 256}};
  return caps;
}

// The constant behind each OpTypeCooperativeMatrixKHR's scope operand (result, component, scope, rows,
// columns, use).
std::vector<uint32_t> coopmat_khr_scopes(const std::vector<uint32_t>& spirv) {
  std::map<uint32_t, uint32_t> constants;
  std::vector<uint32_t> scope_ids, out;
  for (size_t i = 5; i < spirv.size();) {
    const uint32_t op = spirv[i] & 0xFFFFu, words = spirv[i] >> 16;
    if (words == 0) break;
    if (op == shader::spv::kOpConstant && words == 4) constants[spirv[i + 2]] = spirv[i + 3];
    if (op == shader::spv::kOpTypeCoopMatKHR) scope_ids.push_back(spirv[i + 3]);
    i += words;
  }
  for (uint32_t id : scope_ids) out.push_back(constants.count(id) ? constants[id] : ~0u);
  return out;
}

// Large products without an epilogue take the workgroup-scope tile where the device has it on coopmat-khr:
// A·Bᵀ always, A·B and Aᵀ·B when their loads can go unguarded (the H200 at 8192³: +22 %, +7 %, +13 %); the
// rest keeps the shape-only default.
TEST(CoopMatRewrite, DefaultTileTakesWorkgroupScopeForLargeProducts) {
  const runtime::DeviceCaps caps = coop_caps();
  const MatmulShape nt = shape(4096, 4096, 64, false, true, 1, MatmulInput::F16);
  auto tile = [](const runtime::DeviceCaps& c, const MatmulShape& s, MatmulTier t,
                 const kernels::MatmulEpilogue& ep = {}) {
    return kernels::default_coopmat_tile(c, s, t, ep).to_string();
  };
  EXPECT_EQ(tile(caps, nt, MatmulTier::CoopMatKHR), "128x128x32/2x2/s1/w");
  EXPECT_NO_THROW(kernels::select_matmul(caps, nt, MatmulTier::CoopMatKHR, {},
                                         kernels::default_coopmat_tile(caps, nt, MatmulTier::CoopMatKHR)));
  const std::string plain = "128x256x32/4x4/g4/s1";
  EXPECT_EQ(tile(caps, nt, MatmulTier::CoopMatNV), plain) << "workgroup scope only through the KHR rewrite";
  EXPECT_EQ(tile(caps, nt, MatmulTier::CoopMatKHR, doubled(true)), plain) << "an epilogue";
  // A·B and Aᵀ·B only with K a multiple of 32 and aligned rows (unguarded loads).
  const std::string wg = "128x128x32/2x2/s1/w";
  EXPECT_EQ(tile(caps, shape(4096, 4096, 64, false, false, 1, MatmulInput::F16), MatmulTier::CoopMatKHR), wg)
      << "A·B";
  EXPECT_EQ(tile(caps, shape(4096, 4096, 64, true, false, 1, MatmulInput::F16), MatmulTier::CoopMatKHR), wg)
      << "Aᵀ·B";
  EXPECT_EQ(tile(caps, shape(4096, 4096, 72, false, false, 1, MatmulInput::F16), MatmulTier::CoopMatKHR),
            plain)
      << "K 72";
  EXPECT_EQ(tile(caps, shape(4096, 4096, 68, true, false, 1, MatmulInput::F16), MatmulTier::CoopMatKHR),
            plain)
      << "K 68";
  EXPECT_EQ(tile(caps, shape(4096, 4096, 68, false, true, 1, MatmulInput::F16), MatmulTier::CoopMatKHR), wg)
      << "A·Bᵀ, K 68";
  EXPECT_EQ(tile(caps, shape(4000, 4096, 64, false, true, 1, MatmulInput::F16), MatmulTier::CoopMatKHR),
            plain)
      << "M 4000";
  EXPECT_EQ(tile(caps, shape(2048, 2048, 64, false, true, 1, MatmulInput::F16), MatmulTier::CoopMatKHR),
            "128x128x32/2x4")
      << "small products keep their workgroups";
  EXPECT_EQ(
      tile(caps, shape(4096, 4096, 64, false, true, 1, MatmulInput::F32RoundF16), MatmulTier::CoopMatKHR),
      plain)
      << "f32 buffers rounded on load (Mixed16)";
  EXPECT_EQ(
      tile(caps, shape(4096, 4096, 64, false, false, 1, MatmulInput::F32RoundF16), MatmulTier::CoopMatKHR),
      plain)
      << "f32 buffers rounded on load (Mixed16), A·B";
  runtime::DeviceCaps no_wg = caps;
  no_wg.coopmat2_workgroup = false;
  EXPECT_EQ(tile(no_wg, nt, MatmulTier::CoopMatKHR), plain);
  runtime::DeviceCaps no_shape = caps;
  no_shape.coopmat2_flexible_shapes.pop_back();
  no_shape.coopmat2_flexible_shapes.pop_back();  // none for 128 invocations
  EXPECT_EQ(tile(no_shape, nt, MatmulTier::CoopMatKHR), plain);
}

// Mixed16's small products take the scalar tier (it rounds on load too, and was 2-5x faster on the H200 below
// ~2^25 multiply-adds); larger ones and f16 buffers keep the cooperative tier.
TEST(CoopMatRewrite, SmallMixed16ProductsTakeTheScalarTier) {
  const runtime::DeviceCaps caps = coop_caps();
  auto tier = [&](uint32_t m, uint32_t n, uint32_t k, uint32_t batch, MatmulInput in) {
    return kernels::choose_tier(caps, shape(m, n, k, false, false, batch, in), MatmulTier::CoopMatKHR);
  };
  EXPECT_EQ(tier(32, 128, 784, 1, MatmulInput::F32RoundF16), MatmulTier::Scalar) << "the MLP's first layer";
  EXPECT_EQ(tier(784, 128, 32, 1, MatmulInput::F32RoundF16), MatmulTier::Scalar) << "its weight gradient";
  EXPECT_EQ(tier(256, 256, 256, 1, MatmulInput::F32RoundF16), MatmulTier::Scalar);
  EXPECT_EQ(tier(384, 384, 384, 1, MatmulInput::F32RoundF16), MatmulTier::CoopMatKHR);
  EXPECT_EQ(tier(256, 256, 256, 2, MatmulInput::F32RoundF16), MatmulTier::CoopMatKHR) << "the batch counts";
  EXPECT_EQ(tier(32, 128, 784, 1, MatmulInput::F16), MatmulTier::CoopMatKHR) << "f16 buffers: unchanged";
  EXPECT_EQ(tier(4, 128, 784, 1, MatmulInput::F32RoundF16), MatmulTier::Gemv);
}

// The execution modes a module asks for (OpExecutionMode: mode -> its first literal).
std::map<uint32_t, uint32_t> execution_modes(const std::vector<uint32_t>& spirv) {
  std::map<uint32_t, uint32_t> out;
  for (size_t pos = 5; pos < spirv.size();) {
    const uint32_t count = spirv[pos] >> 16;
    if (count == 0) break;
    if ((spirv[pos] & 0xffff) == 16 && count >= 4) out[spirv[pos + 2]] = spirv[pos + 3];
    pos += count;
  }
  return out;
}

// With f16_rte_conversion the Mixed16 cooperative kernel's 16-byte loads round by the conversion: RTE_F16
// set, and the module (after the KHR rewrite) asks for RoundingModeRTE (4462) and DenormPreserve (4459) on 16
// bits. Element loads and devices without it keep to_in's integer rounding.
TEST(CoopMatRewrite, Mixed16RoundsByConversionWhereTheDeviceLetsIt) {
  runtime::DeviceCaps caps = coop_caps();
  for (bool rte : {true, false}) {
    caps.f16_rte_conversion = rte;
    for (uint32_t k : {256u, 45u}) {
      const MatmulShape s = shape(512, 512, k, false, true, 1, MatmulInput::F32RoundF16);
      const kernels::MatmulKernel kern = kernels::select_matmul(caps, s, MatmulTier::CoopMatKHR);
      const auto& defs = kern.pass.source.defines;
      const bool set = std::any_of(defs.begin(), defs.end(), [](const shader::Define& d) {
        return d.name == "RTE_F16" && d.value == "1";
      });
      EXPECT_EQ(set, rte && k == 256) << "rte " << rte << " K " << k;
      const runtime::KernelDesc d = kernels::build_matmul_kernel(kern.pass, compile_options());
      const std::map<uint32_t, uint32_t> modes = execution_modes(d.spirv);
      EXPECT_EQ(modes.count(4462) && modes.at(4462) == 16, set) << "RoundingModeRTE 16, K " << k;
      EXPECT_EQ(modes.count(4459) && modes.at(4459) == 16, set) << "DenormPreserve 16, K " << k;
    }
  }
}

TEST(CoopMatRewrite, EveryCooperativeVariantValidatesAsNvAndRewritesToKhr) {
  const runtime::DeviceCaps caps = coop_caps();
  for (int t = 0; t < 4; ++t) {
    for (uint32_t k : {64u, 45u}) {                    // 16-byte loads, element loads
      for (int variant = 0; variant < 3; ++variant) {  // f16, epilogue; f32 rounded on load (Mixed16)
        const bool epilogue = variant == 1;
        MatmulShape s =
            shape(128, 128, k, t & 1, t & 2, 1, variant == 2 ? MatmulInput::F32RoundF16 : MatmulInput::F16);
        const kernels::MatmulKernel kern =
            kernels::select_matmul(caps, s, MatmulTier::CoopMatKHR, doubled(epilogue));
        ASSERT_TRUE(kern.pass.rewrite_to_khr);
        // compile_glsl validates the NV module; an invalid one throws here.
        const std::vector<uint32_t> nv = shader::compile_glsl(kern.pass.source, compile_options()).spirv;
        auto before = opcode_counts(nv);
        EXPECT_EQ(before[shader::spv::kOpTypeCoopMatNV], 3) << kern.pass.source.label;
        EXPECT_GT(before[shader::spv::kOpMulAddNV], 0);
        EXPECT_TRUE(has_capability(nv, shader::spv::kCapCoopMatNV));

        shader::CoopMatRewriteStats st;
        const std::vector<uint32_t> khr = shader::rewrite_coopmat_nv_to_khr(nv, kern.pass.source.label, &st);
        auto after = opcode_counts(khr);
        for (uint32_t op : {shader::spv::kOpTypeCoopMatNV, shader::spv::kOpLoadNV, shader::spv::kOpStoreNV,
                            shader::spv::kOpMulAddNV, shader::spv::kOpLengthNV}) {
          EXPECT_EQ(after.count(op), 0u) << "NV opcode " << op << " left in " << kern.pass.source.label;
        }
        EXPECT_EQ(after[shader::spv::kOpTypeCoopMatKHR], 3);
        EXPECT_EQ(after[shader::spv::kOpLoadKHR], before[shader::spv::kOpLoadNV]);
        EXPECT_EQ(after[shader::spv::kOpStoreKHR], before[shader::spv::kOpStoreNV]);
        EXPECT_EQ(after[shader::spv::kOpMulAddKHR], before[shader::spv::kOpMulAddNV]);
        EXPECT_EQ(st.uses[0], 1u) << "one MatrixA type";
        EXPECT_EQ(st.uses[1], 1u) << "one MatrixB type";
        EXPECT_EQ(st.uses[2], 1u) << "one accumulator type";
        EXPECT_TRUE(has_capability(khr, shader::spv::kCapCoopMatKHR));
        EXPECT_FALSE(has_capability(khr, shader::spv::kCapCoopMatNV));
        EXPECT_TRUE(has_bytes(khr, "SPV_KHR_cooperative_matrix"));
        EXPECT_FALSE(has_bytes(khr, "SPV_NV_cooperative_matrix"));
        EXPECT_EQ(khr[3], nv[3] + 3) << "three new constants";
        // Three more instructions (the constants); loads and stores grow by nothing (operands reorder).
        EXPECT_EQ(khr.size(), nv.size() + 3 * 4 + st.types);
      }
    }
  }
}

TEST(CoopMatRewrite, EveryTileCompilesAndOversizedTilesAreRejected) {
  const runtime::DeviceCaps caps = coop_caps();
  for (const char* tile :
       {"128x128x32/2x4", "128x256x16/2x4", "256x128x16/4x2", "128x128x16/2x4", "128x128x32/4x2",
        "128x128x32/4x4/d2", "128x256x32/4x4/s1", "64x128x32/2x2/d3", "128x128x32/2x4/s1"}) {
    for (int t = 0; t < 3; ++t) {
      const MatmulShape s = shape(1024, 1024, 1024, t == 1, t == 2, 1, MatmulInput::F16);
      const kernels::MatmulKernel k =
          kernels::select_matmul(caps, s, MatmulTier::CoopMatKHR, {}, kernels::CoopMatTile::parse(tile));
      EXPECT_EQ(k.pass.grid[0] * kernels::CoopMatTile::parse(tile).bn, 1024u);
      const runtime::KernelDesc d = kernels::build_matmul_kernel(k.pass, compile_options());
      EXPECT_EQ(opcode_counts(d.spirv).count(shader::spv::kOpTypeCoopMatNV), 0u) << tile;
    }
  }
  const MatmulShape s = shape(1024, 1024, 1024, false, false, 1, MatmulInput::F16);
  // 2 x (128 x 40 + 32 x 264) halves + 4 KiB = 58 KiB: over the H200's 48 KiB.
  EXPECT_THROW(kernels::select_matmul(caps, s, MatmulTier::CoopMatNV, {},
                                      kernels::CoopMatTile::parse("128x256x32/2x4")),
               ConfigError);
  // 32 subgroups; 6; 16 subgroups whose 16-byte loads do not divide (128 x 16 halves over 512 invocations);
  // one shared stage with loads two tiles ahead.
  for (const char* tile : {"128x256x32/4x8", "128x128x32/2x3", "128x256x16/4x4/s1", "128x256x32/4x4/s1/d2"}) {
    EXPECT_THROW(
        kernels::select_matmul(caps, s, MatmulTier::CoopMatNV, {}, kernels::CoopMatTile::parse(tile)),
        ConfigError)
        << tile;
  }
  EXPECT_THROW(kernels::CoopMatTile::parse("128x128"), ConfigError);
  EXPECT_THROW(kernels::CoopMatTile::parse("128x128x32/2x4/s3"), ConfigError);
  EXPECT_THROW(kernels::CoopMatTile::parse("128x128x32/2x4/q1"), ConfigError);
  EXPECT_THROW(kernels::CoopMatTile::parse("128x128x32/2x4/p0"), ConfigError);
  EXPECT_THROW(kernels::CoopMatTile::parse("128x128x32/2x4/d0"), ConfigError);
  EXPECT_THROW(kernels::CoopMatTile::parse("128x128x32/2x4/d4"), ConfigError);
  EXPECT_EQ(kernels::CoopMatTile::parse("128x256x32/4x4/g4/s1/d2").to_string(), "128x256x32/4x4/g4/s1/d2");
  EXPECT_EQ(kernels::CoopMatTile::parse("128x128x32/4x4/d1").to_string(), "128x128x32/4x4");
  EXPECT_EQ(kernels::CoopMatTile::parse("128x256x32/4x4/s1").threads(), 512u);
  // Large products take the 128x256 single-stage tile in every layout; small ones keep 128x128.
  EXPECT_EQ(
      kernels::default_coopmat_tile(shape(4096, 4096, 64, false, false, 1, MatmulInput::F16)).to_string(),
      "128x256x32/4x4/g4/s1");
  EXPECT_EQ(
      kernels::default_coopmat_tile(shape(2048, 2048, 64, false, false, 1, MatmulInput::F16)).to_string(),
      "128x128x32/2x4");
  EXPECT_EQ(
      kernels::default_coopmat_tile(shape(4096, 4096, 64, false, true, 1, MatmulInput::F16)).to_string(),
      "128x256x32/4x4/g4/s1");
  EXPECT_EQ(
      kernels::default_coopmat_tile(shape(4096, 4096, 64, true, false, 1, MatmulInput::F16)).to_string(),
      "128x256x32/4x4/g4/s1");
  EXPECT_EQ(kernels::CoopMatTile::parse("128x256x32/2x4/g8/s1").to_string(), "128x256x32/2x4/g8/s1");
  EXPECT_EQ(kernels::CoopMatTile::parse("128x128x32/2x4/g0/s2").to_string(), "128x128x32/2x4");
  // One shared stage halves the shared memory: 128x256x32 fits in 48 KiB with it, not without.
  EXPECT_NO_THROW(kernels::select_matmul(caps, s, MatmulTier::CoopMatNV, {},
                                         kernels::CoopMatTile::parse("128x256x32/2x4/s1")));
  for (const char* tile : {"128x128x32/2x4/g8", "128x128x64/2x4/s1", "128x256x32/2x4/g4/s1"}) {
    for (int t = 0; t < 3; ++t) {
      const kernels::MatmulKernel k =
          kernels::select_matmul(caps, shape(1000, 1000, 200, t == 1, t == 2, 1, MatmulInput::F16),
                                 MatmulTier::CoopMatKHR, {}, kernels::CoopMatTile::parse(tile));
      const runtime::KernelDesc d = kernels::build_matmul_kernel(k.pass, compile_options());
      EXPECT_EQ(opcode_counts(d.spirv).count(shader::spv::kOpTypeCoopMatNV), 0u) << tile;
    }
  }
}

// Workgroup-scope tiles ("/w"): the staged tiles multiplied by one workgroup-scope instruction each. Every
// layout and both stage counts compile, rewrite to KHR with Workgroup scope (2) on all three matrix types,
// and selection refuses what the kernel cannot do (NV tier, an epilogue, ragged M or N, no
// VK_NV_cooperative_matrix2, no shape for the invocation count). They run on the H200
// (MatmulTiers.WorkgroupScopeTilesMatchCpu), not on lavapipe.
TEST(CoopMatRewrite, WorkgroupScopeTilesCompileWithWorkgroupScopeAndRefuseWhatTheyCannotRun) {
  const runtime::DeviceCaps caps = coop_caps();
  for (const char* tile : {"128x128x32/2x2/s1/w", "128x128x32/2x2/w", "128x256x32/2x4/s1/w"}) {
    for (int t = 0; t < 4; ++t) {
      for (MatmulInput in : {MatmulInput::F16, MatmulInput::F32RoundF16}) {
        const uint32_t kdim =
            in == MatmulInput::F16 ? 256 : 200;  // K the tile divides: unguarded 16-byte loads
        const MatmulShape s = shape(1024, 1024, kdim, t & 1, t & 2, 2, in);
        const kernels::MatmulKernel k =
            kernels::select_matmul(caps, s, MatmulTier::CoopMatKHR, {}, kernels::CoopMatTile::parse(tile));
        EXPECT_EQ(k.pass.source.label.back(), 'w') << k.pass.source.label;
        const auto& defs = k.pass.source.defines;
        const bool full = std::any_of(defs.begin(), defs.end(), [](const shader::Define& d) {
          return d.name == "FULL_TILES" && d.value == "1";
        });
        EXPECT_EQ(full, kdim == 256) << tile << " K " << kdim;
        const runtime::KernelDesc d = kernels::build_matmul_kernel(k.pass, compile_options());
        EXPECT_EQ(opcode_counts(d.spirv).count(shader::spv::kOpTypeCoopMatNV), 0u) << tile;
        EXPECT_EQ(coopmat_khr_scopes(d.spirv), (std::vector<uint32_t>{2, 2, 2})) << tile << " " << d.label;
      }
    }
  }
  EXPECT_EQ(kernels::CoopMatTile::parse("128x128x32/2x2/w/s1").to_string(), "128x128x32/2x2/s1/w");
  EXPECT_TRUE(kernels::CoopMatTile::parse("128x128x32/2x2/s1/w").workgroup);
  for (const char* bad : {"128x128x32/2x2/w/w", "128x128x32/2x2/w3", "128x128x32/2x2/wx"})
    EXPECT_THROW(kernels::CoopMatTile::parse(bad), ConfigError) << bad;
  const kernels::CoopMatTile w = kernels::CoopMatTile::parse("128x128x32/2x2/s1/w");
  const MatmulShape s = shape(1024, 1024, 200, false, false, 1, MatmulInput::F16);
  auto refusal = [&](const runtime::DeviceCaps& c, const MatmulShape& sh, MatmulTier tier, bool epilogue,
                     const kernels::CoopMatTile& tile) -> std::string {
    try {
      kernels::select_matmul(c, sh, tier, doubled(epilogue), tile);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(refusal(caps, s, MatmulTier::CoopMatNV, false, w).find("coopmat-khr tier"), std::string::npos);
  EXPECT_NE(refusal(caps, s, MatmulTier::CoopMatKHR, true, w).find("epilogue"), std::string::npos);
  EXPECT_NE(refusal(caps, shape(1000, 1024, 200, false, false, 1, MatmulInput::F16), MatmulTier::CoopMatKHR,
                    false, w)
                .find("M 1000"),
            std::string::npos);
  runtime::DeviceCaps no_wg = caps;
  no_wg.coopmat2_workgroup = false;
  EXPECT_NE(refusal(no_wg, s, MatmulTier::CoopMatKHR, false, w).find("VK_NV_cooperative_matrix2"),
            std::string::npos);
  EXPECT_NE(
      refusal(caps, s, MatmulTier::CoopMatKHR, false, kernels::CoopMatTile::parse("128x128x32/4x4/s1/w"))
          .find("512 invocations"),
      std::string::npos);
}

// Codegen names a fused kernel's epilogue buffers b3, b4, .. (Emitter::buffer_decls): the cooperative
// kernel's own names must not collide with them. On the H200 a Mixed16 Adam step failed to compile its fused
// weight-gradient update ('b4': "nameless block contains a member that already has a name") before the
// 16-byte views were renamed.
TEST(CoopMatRewrite, EpilogueBuffersNamedLikeCodegenCompile) {
  const runtime::DeviceCaps caps = coop_caps();
  kernels::MatmulEpilogue ep;
  ep.extra_buffers = 3;
  for (int i = 3; i < 6; ++i) {
    const std::string n = std::to_string(i);
    ep.buffer_decls +=
        "layout(std430, set = 0, binding = " + n + ") buffer Buf" + n + " { float d[]; } b" + n + ";\n";
  }
  ep.expr = "v + b3.d[col] + b4.d[col] + b5.d[col]";
  for (MatmulInput in : {MatmulInput::F16, MatmulInput::F32RoundF16}) {
    for (int t = 0; t < 3; ++t) {
      const MatmulShape s = shape(256, 128, 64, t == 1, t == 2, 1, in);  // 16-byte loads
      for (const char* tile : {"128x128x32/2x4", "128x256x32/4x4/g4/s1", "128x128x32/2x4/d2"}) {
        const kernels::MatmulKernel k =
            kernels::select_matmul(caps, s, MatmulTier::CoopMatKHR, ep, kernels::CoopMatTile::parse(tile));
        EXPECT_NO_THROW(kernels::build_matmul_kernel(k.pass, compile_options())) << tile << " " << name(s);
      }
    }
  }
}

TEST(CoopMatRewrite, UseTypeAndLayoutOperands) {
  // A 16x8x16 product loaded column-major: check the KHR operands word by word.
  const char* src = R"(#version 450
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_memory_scope_semantics : require
layout(local_size_x = 32) in;
layout(std430, binding = 0) buffer A { float16_t a[]; };
layout(std430, binding = 1) buffer C { float c[]; };
void main() {
  fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> ma;
  fcoopmatNV<16, gl_ScopeSubgroup, 16, 8> mb;
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 8> acc = fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>(0.0);
  coopMatLoadNV(ma, a, 0, 16, true);
  coopMatLoadNV(mb, a, 256, 8, false);
  acc = coopMatMulAddNV(ma, mb, acc);
  coopMatStoreNV(acc, c, 0, 8, false);
}
)";
  const std::vector<uint32_t> nv =
      shader::compile_glsl({"rewrite_operands", src, {}}, compile_options()).spirv;
  const std::vector<uint32_t> khr = shader::rewrite_coopmat_nv_to_khr(nv, "rewrite_operands");
  std::map<uint32_t, uint32_t> constants;                   // id -> value of the 32-bit integer constants
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> types;  // id -> (rows id, use id)
  std::vector<uint32_t> load_layouts;
  for (size_t pos = 5; pos < khr.size(); pos += khr[pos] >> 16) {
    const uint32_t op = khr[pos] & 0xffff, count = khr[pos] >> 16;
    if (op == shader::spv::kOpConstant && count == 4) constants[khr[pos + 2]] = khr[pos + 3];
    if (op == shader::spv::kOpTypeCoopMatKHR) {
      ASSERT_EQ(count, 7u);
      types[khr[pos + 1]] = {khr[pos + 5], khr[pos + 6]};  // columns, use
    }
    if (op == shader::spv::kOpLoadKHR) load_layouts.push_back(constants.at(khr[pos + 4]));
    if (op == shader::spv::kOpMulAddKHR) {
      ASSERT_EQ(count, 6u) << "float products carry no signedness operands";
    }
  }
  ASSERT_EQ(types.size(), 3u);
  std::vector<uint32_t> uses;
  for (const auto& [id, t] : types) uses.push_back(constants.at(t.second));
  std::sort(uses.begin(), uses.end());
  EXPECT_EQ(uses, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(load_layouts, (std::vector<uint32_t>{1, 0})) << "column-major then row-major";
}

TEST(CoopMatRewrite, RejectsATypeInTwoRolesAndNonModules) {
  // 16x16x16 makes A and B one SPIR-V type: KHR cannot express that.
  const char* src = R"(#version 450
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_memory_scope_semantics : require
layout(local_size_x = 32) in;
layout(std430, binding = 0) buffer A { float16_t a[]; };
layout(std430, binding = 1) buffer C { float c[]; };
void main() {
  fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> ma, mb;
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
  coopMatLoadNV(ma, a, 0, 16, false);
  coopMatLoadNV(mb, a, 256, 16, false);
  acc = coopMatMulAddNV(ma, mb, acc);
  coopMatStoreNV(acc, c, 0, 16, false);
}
)";
  const std::vector<uint32_t> nv = shader::compile_glsl({"two_roles", src, {}}, compile_options()).spirv;
  try {
    shader::rewrite_coopmat_nv_to_khr(nv, "two_roles");
    ADD_FAILURE() << "expected a ShaderError";
  } catch (const ShaderError& e) {
    EXPECT_NE(std::string(e.what()).find("one role"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("MatrixA and as MatrixB"), std::string::npos) << e.what();
    EXPECT_EQ(e.label(), "two_roles");
  }
  EXPECT_THROW(shader::rewrite_coopmat_nv_to_khr(std::vector<uint32_t>{1, 2, 3}, "junk"), ShaderError);
  // A module without cooperative matrices has nothing to rewrite.
  const char* plain = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() {}\n";
  const std::vector<uint32_t> p = shader::compile_glsl({"plain", plain, {}}, compile_options()).spirv;
  EXPECT_THROW(shader::rewrite_coopmat_nv_to_khr(p, "plain"), ShaderError);
}

}  // namespace
}  // namespace meganeura::test
