// glslang over the matmul shader files (src/meganeura/kernels/matmul/*.comp, *.glsl) as each tier composes
// them, with the defines that tier's select_matmul gives: every transpose, input type, operand load, epilogue
// and split the tier takes, for the scalar, GEMV and cooperative tiers (NV; KHR compiles the same GLSL) on a
// device description that offers all of them. Device-free: glslangValidator (Debian's glslang-tools,
// scripts/install-deps.sh) only parses and compiles to SPIR-V; nothing runs. A missing glslangValidator
// fails.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include <unistd.h>

#include "fake_caps.hpp"
#include "meganeura/kernels/matmul.hpp"
#include "meganeura/nn/nn.hpp"
#include "meganeura/session/pipeline.hpp"

using namespace meganeura;
using kernels::MatmulInput;
using kernels::MatmulLoad;
using kernels::MatmulTier;

namespace {

// fake_caps plus 16-bit storage and arithmetic, 32-wide subgroups, shared memory and cooperative matrices of
// both kinds (workgroup scope included), so that every tier's every variant can be selected.
runtime::DeviceCaps all_tiers_caps() {
  runtime::DeviceCaps c = meganeura::test::fake_caps();
  c.subgroup_size = 32;
  c.max_shared_memory = 96 * 1024;
  c.max_workgroup_invocations = 1024;
  c.compute_units = 132;
  c.storage_16bit = c.fp16_arithmetic = true;
  c.f16_rte_conversion = true;
  c.coopmat_nv = c.coopmat_khr = c.coopmat2_workgroup = true;
  runtime::CoopMatShape s{16, 8, 16, "f16", "f16", "f32", "f32", "subgroup", 0};
  c.coopmat_nv_shapes = c.coopmat_khr_shapes = {s};
  runtime::CoopMatShape w{16, 16, 16, "f16", "f16", "f32", "f32", "workgroup", 128};
  c.coopmat2_flexible_shapes = {w};
  return c;
}

struct Lint {
  // One folder a process: ctest runs each TEST as its own process, in parallel, and a shared folder let one
  // test's log.txt or N.comp overwrite another's (seen on the 16-core device, never on 2 cores).
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("meganeura_matmul_lint_" + std::to_string(::getpid()));
  ~Lint() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::set<std::string> seen;  // source + defines already linted
  int count = 0;

  // Writes the pass's GLSL and runs glslangValidator with its defines; returns glslang's output on failure.
  std::string check(const kernels::MatmulPass& pass) {
    std::string key = pass.source.glsl;
    std::string flags;
    for (const auto& d : pass.source.defines) {
      flags += " '-D" + d.name + "=" + d.value + "'";
      key += "|" + d.name + "=" + d.value;
    }
    if (!seen.insert(key).second) return "";
    std::filesystem::create_directories(dir);
    const std::filesystem::path file = dir / (pass.source.label + "_" + std::to_string(count++) + ".comp");
    std::ofstream(file) << pass.source.glsl;
    const std::filesystem::path log = dir / "log.txt";
    const std::string cmd = "glslangValidator -V --target-env vulkan1.2 -o /dev/null" + flags + " '" +
                            file.string() + "' > '" + log.string() + "' 2>&1";
    if (std::system(cmd.c_str()) == 0) return "";
    std::ifstream in(log);
    std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return pass.source.label + " (" + file.string() + ", defines" + flags + "):\n" + out;
  }
};

kernels::MatmulShape shape(uint32_t m, uint32_t n, uint32_t k, bool ta, bool tb, MatmulInput in,
                           MatmulLoad lb = MatmulLoad::Plain) {
  kernels::MatmulShape s;
  s.m = m;
  s.n = n;
  s.k = k;
  s.trans_a = ta;
  s.trans_b = tb;
  s.input = in;
  s.load_b = lb;
  return s;
}

kernels::MatmulEpilogue bias_relu() {
  kernels::MatmulEpilogue e;
  e.expr = "max(v + e0[col], 0.0)";
  e.extra_buffers = 1;
  return e;
}

}  // namespace

TEST(MatmulGlslLint, GlslangValidatorIsInstalled) {
  ASSERT_EQ(std::system("glslangValidator --version > /dev/null 2>&1"), 0)
      << "glslangValidator not found: install glslang-tools (scripts/install-deps.sh)";
}

// The check itself can fail: a pass whose GLSL does not compile is reported with glslang's message.
TEST(MatmulGlslLint, ABrokenShaderIsReported) {
  kernels::MatmulPass pass =
      kernels::select_matmul(all_tiers_caps(), shape(64, 64, 64, false, false, MatmulInput::F32),
                             kernels::MatmulVariant::parse("scalar.16"))
          .pass;
  Lint lint;
  EXPECT_EQ(lint.check(pass), "");
  pass.source.glsl += "\nvoid broken() { undeclared_name += 1.0; }\n";
  EXPECT_NE(lint.check(pass).find("undeclared_name"), std::string::npos);
}

TEST(MatmulGlslLint, EveryTierVariantCompiles) {
  const runtime::DeviceCaps caps = all_tiers_caps();
  Lint lint;
  std::string failures;
  auto run = [&](const kernels::MatmulShape& s, const std::string& variant,
                 const kernels::MatmulEpilogue& e) {
    const kernels::MatmulKernel k =
        kernels::select_matmul(caps, s, kernels::MatmulVariant::parse(variant), e);
    failures += lint.check(k.pass);
  };
  const kernels::MatmulEpilogue none, epi = bias_relu();
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      // The epilogue changes the store only, not the transposed loads: linted in the nn layout alone (keeps
      // the test under half a minute of CPU).
      for (const kernels::MatmulEpilogue* e : {&none, &epi}) {
        if (e == &epi && (ta || tb)) continue;
        for (MatmulInput in : {MatmulInput::F32, MatmulInput::F16, MatmulInput::F32RoundF16}) {
          // Aligned (16-byte loads) and ragged (element loads) shapes.
          for (uint32_t d : {256u, 100u}) {
            run(shape(4, d, d, ta, tb, in), "gemv", *e);
            for (const char* v : {"scalar.128", "scalar.64", "scalar.16", "scalar.64.k2", "scalar.16.k2"})
              run(shape(d, d, d, ta, tb, in), v, *e);
            if (in == MatmulInput::F32) continue;
            for (const char* v :
                 {"coopmat-nv", "coopmat-nv.k2", "coopmat-nv.128x256x32/4x4/g4/s1",
                  "coopmat-nv.128x128x32/2x4/d2", "coopmat-nv.128x128x32/2x4/d3", "coopmat-nv.64x64x32/2x2"})
              run(shape(d, d, d, ta, tb, in), v, *e);
          }
        }
      }
      // Operand loads (16-bit and GGUF blocks against f32 activations): the scalar and GEMV tiers.
      for (MatmulLoad l :
           {MatmulLoad::F16, MatmulLoad::BF16, MatmulLoad::Q4_0, MatmulLoad::Q8_0, MatmulLoad::Q6_K}) {
        run(shape(4, 256, 256, ta, tb, MatmulInput::F32, l), "gemv", none);
        run(shape(64, 256, 256, ta, tb, MatmulInput::F32, l), "scalar.64", none);
        run(shape(64, 256, 256, ta, tb, MatmulInput::F32, l), "scalar.16", none);
      }
      // The workgroup-scope tile (KHR tier; no epilogue, M and N multiples of the tile).
      run(shape(256, 256, 256, ta, tb, MatmulInput::F16), "coopmat-khr.128x128x32/2x2/s1/w", none);
      run(shape(256, 256, 256, ta, tb, MatmulInput::F16), "coopmat-khr.128x128x32/2x2/s1/w.k2", none);
    }
  }
  failures += lint.check(kernels::f16_copy_pass(caps, 1001, 77, 1008));
  EXPECT_GT(lint.count, 100);
  EXPECT_EQ(failures, "");
}

// The GEMV of several products over one A with an RMSNorm fused as A's prologue (decode's QKV and gate/up
// passes; codegen declares A_RMSNORM, A_RMS_EPS, mn_norm_w and mm_extra<j>; the products' loop sums each
// row's squares too): with subgroup sums and without (one shared slot reused: AMD's 64-wide subgroups and
// devices without subgroup arithmetic take it; its values are checked by
// LlamaDecode.KernelsWithoutSubgroupArithmeticMatchTheReference), for plain, f16 and block-quantized weights.
TEST(MatmulGlslLint, SeveralProductGemvWithAFusedNormCompilesWithAndWithoutSubgroupSums) {
  Lint lint;
  std::string failures;
  for (bool sg : {true, false}) {
    runtime::DeviceCaps caps = all_tiers_caps();
    caps.subgroup_arithmetic = sg;
    caps.min_subgroup_size = caps.max_subgroup_size = 32;
    kernels::MatmulEpilogue e;
    e.decls =
        "#define A_RMSNORM 1\n#define A_RMS_EPS 1e-5\nfloat mn_norm_w(uint k) { return 1.0 + float(k); }\n"
        "float mm_extra1;\n";
    e.expr = "v * mm_extra1";
    e.products = {{192, true}, {576, false}};
    for (MatmulLoad l : {MatmulLoad::Plain, MatmulLoad::F16, MatmulLoad::Q4_1, MatmulLoad::Q6_K}) {
      const kernels::MatmulKernel k =
          kernels::select_matmul(caps, shape(1, 576, 768, false, true, MatmulInput::F32, l),
                                 kernels::MatmulVariant::parse("gemv"), e);
      EXPECT_EQ(k.pass.source.label.find(".sg") != std::string::npos, sg) << k.pass.source.label;
      failures += lint.check(k.pass);
    }
  }
  EXPECT_EQ(lint.count, 8);
  EXPECT_EQ(failures, "");
}

// The scalar tiles store each output by a statement of its own (MM_STORE_TILE): a store loop with an epilogue
// that reads a buffer stayed rolled on the H100, indexing the accumulator at run time, which put it in local
// memory for the whole product (15-20x slower; docs/performance.md). Every acc element is named by constant
// indices, and scalar.comp has no loop over them.
TEST(MatmulGlslLint, ScalarTilesStoreEachOutputByAStatementOfItsOwn) {
  const kernels::MatmulEpilogue epi = bias_relu();
  for (const char* v : {"scalar.128", "scalar.64"}) {
    const kernels::MatmulPass pass =
        kernels::select_matmul(all_tiers_caps(), shape(256, 256, 256, false, false, MatmulInput::F32),
                               kernels::MatmulVariant::parse(v), epi)
            .pass;
    const uint32_t tt = std::string(v) == "scalar.128" ? 8 : 4;
    std::string tile;
    for (const shader::Define& d : pass.source.defines)
      if (d.name == "MM_STORE_TILE") tile = d.value;
    ASSERT_FALSE(tile.empty()) << v;
    for (uint32_t i = 0; i < tt; ++i)
      for (uint32_t j = 0; j < tt; ++j)
        EXPECT_NE(tile.find("acc[" + std::to_string(i) + "][" + std::to_string(j) + "]"), std::string::npos)
            << v << ": acc[" << i << "][" << j << "]";
    EXPECT_EQ(tile.find("acc[" + std::to_string(tt) + "]"), std::string::npos) << v;
    EXPECT_NE(pass.source.glsl.find("MM_STORE_TILE"), std::string::npos) << v;
    EXPECT_EQ(pass.source.glsl.find("epilogue(acc[i][j]"), std::string::npos) << v;
  }
}

// A parameter update fused into the product computing its gradient, as codegen writes it for a training step
// (mn_update_load / mn_update_with, MN_UPDATE_PRELOAD): the scalar tiles' preloading stores, the split fix-up
// and the cooperative tiers' edge epilogue, for every rule that keeps moments. Device-free, so the
// cooperative tiers (none on lavapipe) are compiled at least; their values need the device suite.
TEST(MatmulGlslLint, FusedOptimizerUpdatesCompileInEveryTier) {
  Lint lint;
  std::string failures;
  std::set<std::string> variants;
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::Sgd;
  sgd.momentum = 0.9;
  OptimizerConfig adam;
  adam.kind = OptimizerKind::Adam;
  OptimizerConfig laprop;
  laprop.kind = OptimizerKind::LaProp;
  // Rows x sizes: 512 x 1024 -> 1024 -> 520 (large weight gradients: the 128 and 64 tiles unsplit, the
  // cooperative tier under Mixed16); 4096 x 200 -> 136 -> 8 (K = 4096 over few tiles: split).
  const std::pair<int64_t, std::vector<int64_t>> mlps[] = {{512, {1024, 1024, 520}}, {4096, {200, 136, 8}}};
  for (const auto& [rows, sizes] : mlps) {
    Graph g;
    nn::Context ctx(g, 1);
    const NodeId x = g.input("x", {rows, sizes.front()});
    nn::Mlp mlp(ctx, "mlp", sizes);
    g.set_outputs({g.cross_entropy_loss(mlp(x), g.input("labels", {rows, sizes.back()}))});
    for (const OptimizerConfig& o : {sgd, adam, laprop}) {
      for (Precision p : {Precision::F32, Precision::Mixed16}) {
        SessionConfig cfg;
        cfg.optimizer = o;
        cfg.precision = p;
        if (p == Precision::Mixed16) cfg.matmul_tier = MatmulTier::CoopMatNV;
        const CompiledStep step = compile_step(g, cfg, all_tiers_caps());
        for (const GeneratedKernel& k : step.code) {
          if (k.variant.rfind("matmul.", 0) != 0 || k.glsl.find("MN_UPDATE_PRELOAD") == std::string::npos)
            continue;
          variants.insert(k.variant);
          kernels::MatmulPass pass;
          pass.source.glsl = k.glsl;
          pass.source.label = "fused_update";
          failures += lint.check(pass);
        }
      }
    }
  }
  std::string seen;
  for (const std::string& v : variants) seen += " " + v;
  for (const char* want :
       {"matmul.scalar.128", "matmul.scalar.64", "matmul.scalar.64.k", "matmul.coopmat-nv"}) {
    bool found = false;
    for (const std::string& v : variants) found = found || v.rfind(want, 0) == 0;
    EXPECT_TRUE(found) << want << " with a fused update not generated; got" << seen;
  }
  EXPECT_EQ(failures, "");
}
