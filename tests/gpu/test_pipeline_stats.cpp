// What the driver reports about our pipelines (VK_KHR_pipeline_executable_properties): the Device and
// Session entry points capture exactly where the device supports it, the pipeline_stats tool writes one file
// per pipeline plus a summary, and experiments/scripts/isa_mix.py counts instructions in real (spirv-dis) and
// hand-written (SASS, NIR, LLVM IR) text. Lavapipe 22.3 lacks the extension: there the tests check that
// nothing is captured and everything else still works; on a device with it they check real values. The two
// tests whose main half needs the extension end with a GTEST_SKIP labelled "device-only" on a device without
// it, so a lavapipe run counts them as skipped instead of passing them silently (scripts/device runs them).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "gpu_fixture.hpp"
#include "meganeura/kernels/matmul.hpp"

using namespace meganeura;
namespace fs = std::filesystem;

namespace {

class PipelineStats : public test::GpuTest {};

fs::path temp_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("meganeura-test-pipeline-stats-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream f(p);
  EXPECT_TRUE(f.good()) << p;
  return f.good() ? nlohmann::json::parse(f) : nlohmann::json();
}

// Runs isa_mix.py with --json on `path`; the parsed document.
nlohmann::json isa_mix(const fs::path& path) {
  const fs::path out = temp_dir() / "isa_mix.json";
  const std::string cmd = "python3 '" + test::source_path("experiments/scripts/isa_mix.py").string() +
                          "' --json '" + path.string() + "' > '" + out.string() + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return read_json(out);
}

void check_executables(const std::vector<runtime::PipelineExecutable>& exes, bool representations,
                       const std::string& what) {
  ASSERT_FALSE(exes.empty()) << what;
  for (const runtime::PipelineExecutable& e : exes) {
    EXPECT_FALSE(e.name.empty()) << what;
    ASSERT_FALSE(e.statistics.empty()) << what;
    bool nonzero = false;
    for (const runtime::PipelineStatistic& s : e.statistics) {
      EXPECT_FALSE(s.name.empty()) << what;
      EXPECT_TRUE(s.format == "bool32" || s.format == "int64" || s.format == "uint64" ||
                  s.format == "float64")
          << what << " " << s.name << " " << s.format;
      nonzero |= s.i64 != 0 || s.u64 != 0 || s.f64 != 0.0;
    }
    EXPECT_TRUE(nonzero) << what << ": every statistic is zero";
    if (representations) {
      // Every representation the driver has, and bytes in them; a driver may have none (NVIDIA's).
      ASSERT_EQ(e.representations.size(), e.representations_offered) << what;
      bool data = e.representations.empty();
      for (const runtime::PipelineRepresentation& r : e.representations) data |= !r.data.empty();
      EXPECT_TRUE(data) << what;
    } else {
      EXPECT_TRUE(e.representations.empty()) << what;
    }
  }
}

}  // namespace

TEST_F(PipelineStats, DeviceCapturesOnlyWhatAKernelAsksForAndOnlyWhereSupported) {
  runtime::Device& dev = test::gpu_device();
  kernels::MatmulShape s;
  s.m = 40;
  s.n = 24;
  s.k = 16;
  const kernels::MatmulKernel kern = kernels::select_matmul(dev.caps(), s, kernels::MatmulTier::Scalar);
  shader::CompileOptions copt;
  copt.device_key = dev.caps().fingerprint();
  runtime::KernelDesc desc = kernels::build_matmul_kernel(kern.pass, copt);
  const runtime::KernelId plain = dev.create_kernel(desc);
  desc.capture = runtime::PipelineCapture::Statistics;
  const runtime::KernelId stats = dev.create_kernel(desc);
  desc.capture = runtime::PipelineCapture::Representations;
  const runtime::KernelId reps = dev.create_kernel(desc);
  EXPECT_TRUE(dev.pipeline_executables(plain).empty());
  if (dev.caps().pipeline_executable_info) {
    check_executables(dev.pipeline_executables(stats), false, "statistics");
    check_executables(dev.pipeline_executables(reps), true, "representations");
  } else {
    EXPECT_TRUE(dev.pipeline_executables(stats).empty());
    EXPECT_TRUE(dev.pipeline_executables(reps).empty());
  }
  EXPECT_THROW(dev.pipeline_executables(reps + 1000), DeviceError);
  if (!dev.caps().pipeline_executable_info)
    GTEST_SKIP() << "device-only: the statistics and representations half needs "
                    "VK_KHR_pipeline_executable_properties, "
                    "which this device lacks (only 'nothing captured' was checked)";
}

TEST_F(PipelineStats, SessionReportsEveryDistinctPipelineWithItsDispatches) {
  Graph g;
  NodeId x = g.input("x", {5, 7});
  NodeId h = g.named(g.relu(g.matmul(x, g.parameter("w1", {7, 6}))), "h");
  NodeId y = g.matmul(h, g.parameter("w2", {6, 3}));
  g.set_outputs({g.mse_loss(y, g.input("target", {5, 3}))});
  auto dev = std::shared_ptr<runtime::Device>(&test::gpu_device(), [](runtime::Device*) {});
  for (bool ir : {false, true}) {
    SessionConfig c = test::gpu_config();
    c.cache_dir.clear();
    c.dump_plan.clear();
    c.trace_path.clear();
    c.gpu_timing = !ir;
    c.pipeline_ir = ir;
    Session s = build(g, c, dev);
    const std::vector<PipelineReport> ps = s.pipelines();
    ASSERT_FALSE(ps.empty());
    std::set<std::string> hashes;
    std::set<size_t> dispatches;
    for (const PipelineReport& p : ps) {
      EXPECT_FALSE(p.label.empty());
      EXPECT_EQ(p.kernel_hash.size(), 16u);
      hashes.insert(p.kernel_hash);
      ASSERT_FALSE(p.dispatches.empty()) << p.label;
      for (size_t d : p.dispatches) EXPECT_TRUE(dispatches.insert(d).second) << "dispatch " << d << " twice";
      if (dev->caps().pipeline_executable_info)
        check_executables(p.executables, ir, p.label);
      else
        EXPECT_TRUE(p.executables.empty()) << p.label;
    }
    EXPECT_EQ(hashes.size(), ps.size()) << "one report per distinct kernel";
    EXPECT_EQ(*dispatches.rbegin() + 1, dispatches.size()) << "every dispatch, once";
    EXPECT_GE(dispatches.size(), s.report().kernels);
  }
  if (!dev->caps().pipeline_executable_info)
    GTEST_SKIP()
        << "device-only: the executables' statistics need VK_KHR_pipeline_executable_properties, which this "
           "device lacks (labels, hashes and dispatch lists were checked)";
}

// Every pipeline goes through the device's cache: its data starts with the Vulkan header of this device.
TEST_F(PipelineStats, PipelineCacheDataHasTheDevicesHeader) {
  runtime::Device* dev = &test::gpu_device();
  const uint64_t before = dev->pipeline_cache_data().size();
  kernels::MatmulShape s;
  s.m = s.n = s.k = 64;
  const kernels::MatmulKernel k = kernels::select_matmul(dev->caps(), s, kernels::MatmulTier::Scalar);
  shader::CompileOptions o;
  o.device_key = dev->caps().fingerprint();
  dev->create_kernel(kernels::build_matmul_kernel(k.pass, o));
  const std::vector<std::byte> blob = dev->pipeline_cache_data();
  ASSERT_GE(blob.size(), 32u);
  uint32_t header[4];
  std::memcpy(header, blob.data(), sizeof(header));
  EXPECT_GE(header[0], 32u);  // header length: 16 + VK_UUID_SIZE
  EXPECT_EQ(header[1], 1u);   // VK_PIPELINE_CACHE_HEADER_VERSION_ONE
  EXPECT_EQ(header[2], dev->caps().vendor_id);
  EXPECT_EQ(header[3], dev->caps().device_id);
  EXPECT_GE(blob.size(), before);
}

TEST_F(PipelineStats, ToolWritesOneFilePerPipelineAndASummary) {
  const fs::path dir = temp_dir() / "matmul";
  fs::remove_all(dir);
  const std::string cmd = "MEGANEURA_CACHE_DIR=off '" + test::tool("pipeline_stats").string() +
                          "' --matmul 64,100x36x20 "
                          "--tier scalar --cache --out '" +
                          dir.string() + "' > '" + (temp_dir() / "tool.log").string() + "' 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0)
      << cmd << "\n"
      << [&] {
           std::ifstream log(temp_dir() / "tool.log");
           return std::string((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
         }();
  const nlohmann::json sum = read_json(dir / "summary.json");
  EXPECT_EQ(sum["schema"], "meganeura.pipeline_stats.v1");
  EXPECT_EQ(sum["device"]["name"], test::gpu_device().caps().name);
  EXPECT_EQ(sum["supported"].get<bool>(), test::gpu_device().caps().pipeline_executable_info);
  EXPECT_EQ(sum["capture"], "representations");
  ASSERT_EQ(sum["pipelines"].size(), 2u);
  for (const nlohmann::json& p : sum["pipelines"]) {
    EXPECT_EQ(p["variant"], "matmul.scalar");
    const fs::path file = dir / p["file"].get<std::string>();
    ASSERT_TRUE(fs::exists(file)) << file;
    std::ifstream f(file);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("=== spirv: "), std::string::npos) << file;
    EXPECT_EQ(p["executables"].empty(), !sum["supported"].get<bool>());
    for (const nlohmann::json& e : p["executables"]) {
      EXPECT_FALSE(e["statistics"].empty());
      // every representation the driver has (NVIDIA's driver has none)
      EXPECT_EQ(e["representations"].size(), e["representations_offered"].get<size_t>());
      for (const auto& [name, st] : e["statistics"].items())
        EXPECT_NE(text.find(name), std::string::npos) << name;
    }
    // The SPIR-V section counts: the tiled scalar kernel loads, stores and waits at barriers.
    const nlohmann::json mix = isa_mix(file);
    bool spirv = false;
    for (const nlohmann::json& s : mix["sections"]) {
      if (s["section"].get<std::string>().rfind("spirv", 0) != 0) continue;
      spirv = true;
      EXPECT_GT(s["base"]["OpLoad"].get<int>(), 0);
      EXPECT_GT(s["base"]["OpStore"].get<int>(), 0);
      EXPECT_GT(s["key"]["barriers"]["OpControlBarrier"].get<int>(), 0);
      EXPECT_EQ(s["verdict"], "no tensor-core MMA instruction in this text");
    }
    EXPECT_TRUE(spirv) << file;
  }
  // --cache: the driver's pipeline cache as it came, and every ELF image found in it, each named in the
  // summary.
  ASSERT_TRUE(sum.contains("pipeline_cache")) << sum.dump();
  EXPECT_EQ(fs::file_size(dir / "pipeline_cache.bin"), sum["pipeline_cache"]["bytes"].get<uint64_t>());
  EXPECT_GE(sum["pipeline_cache"]["bytes"].get<uint64_t>(), 32u);
  for (const nlohmann::json& e : sum["pipeline_cache"]["elf_images"])
    EXPECT_EQ(fs::file_size(dir / e["file"].get<std::string>()), e["bytes"].get<uint64_t>());
  // A model: one file per distinct pipeline of its training session.
  const fs::path mdir = temp_dir() / "mlp";
  ASSERT_EQ(std::system(("MEGANEURA_CACHE_DIR=off '" + test::tool("pipeline_stats").string() +
                         "' --model mlp --batch 4 "
                         "--no-ir --out '" +
                         mdir.string() + "' > /dev/null 2>&1")
                            .c_str()),
            0);
  const nlohmann::json msum = read_json(mdir / "summary.json");
  EXPECT_EQ(msum["capture"], "statistics");
  EXPECT_GE(msum["pipelines"].size(), 5u);
  for (const nlohmann::json& p : msum["pipelines"])
    EXPECT_TRUE(fs::exists(mdir / p["file"].get<std::string>()));
  // Bad arguments: refused.
  EXPECT_NE(
      std::system(("'" + test::tool("pipeline_stats").string() + "' --matmul 64 > /dev/null 2>&1").c_str()),
      0);
  EXPECT_NE(std::system(("'" + test::tool("pipeline_stats").string() + "' --matmul 6x4 --out '" +
                         dir.string() + "' > /dev/null 2>&1")
                            .c_str()),
            0);
}

// Real spirv-dis text of a kernel written here: the counts follow from the GLSL (one OpControlBarrier per
// barrier(), one OpAtomicIAdd per atomicAdd).
TEST_F(PipelineStats, IsaMixCountsSpirvInstructionsOfAKnownKernel) {
  const std::string glsl = R"(#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer B { uint v[]; };
shared uint tile[64];
void main() {
  uint i = gl_LocalInvocationID.x;
  tile[i] = v[i];
  barrier();
  atomicAdd(v[0], tile[63 - i]);
  barrier();
  atomicAdd(v[1], tile[i]);
  barrier();
})";
  const std::vector<uint32_t> spirv = test::compile_test_kernel("isa_mix_probe", glsl);
  const fs::path file = temp_dir() / "probe.spvasm";
  std::ofstream(file) << shader::disassemble(spirv);
  const nlohmann::json mix = isa_mix(file);
  ASSERT_EQ(mix["sections"].size(), 1u);
  const nlohmann::json& s = mix["sections"][0];
  EXPECT_EQ(s["base"]["OpControlBarrier"], 3);
  EXPECT_EQ(s["base"]["OpAtomicIAdd"], 2);
  EXPECT_EQ(s["base"]["OpFunction"], 1);
  EXPECT_EQ(s["base"]["OpEntryPoint"], 1);
  EXPECT_FALSE(s["base"].contains("SPIR"));  // the "; SPIR-V" header is a comment
}

// Hand-written SASS, NIR and LLVM IR in pipeline_stats' section format: addresses, encodings, predicates,
// labels, directives, assignments and the statistics section are handled as documented.
TEST_F(PipelineStats, IsaMixReadsSassNirAndLlvmText) {
  const fs::path file = temp_dir() / "handwritten.txt";
  std::ofstream(file) << R"(# pipeline 0: matmul
=== executable 0: Compute (compute shader), subgroup size 32 ===
  Register Count = 128  [uint64] registers per thread
=== representation 0.0: SASS (disassembly) ===
        /*0000*/                   MOV R1, c[0x0][0x28] ;                    /* 0x00000a0000017a02 */
.L_x_0:
        /*0010*/              @!P0 BRA `(.L_x_1) ;
        /*0020*/                   LDSM.16.M88.4 R8, [R2] ;
        /*0030*/                   HMMA.16816.F32 R4, R8, R12, R4 ;
        /*0040*/                   HMMA.16816.F32 R16, R8, R14, R16 ;
        /*0050*/               @P1 LDG.E.128 R20, [R22.64] ;
        /*0060*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0070*/                   STL [R1], R4 ;
        /*0080*/                   EXIT ;
=== representation 0.1: NIR (final NIR) ===
impl main {
	block block_0:
	vec1 32 ssa_0 = load_const (0x00000000)
	vec1 32 ssa_1 = fadd ssa_0, ssa_0
	con 32    %2 = fmul %1, %1
	intrinsic store_ssbo (ssa_1, ssa_0, ssa_0) ()
}
=== representation 0.2: LLVM IR ===
define void @main() #0 {
  %1 = fadd float %a, %b
  store float %1, ptr %p, align 4
  ret void
}
attributes #0 = { nounwind }
)";
  const nlohmann::json mix = isa_mix(file);
  ASSERT_EQ(mix["sections"].size(), 3u);  // the executable section holds statistics, not code
  const nlohmann::json& sass = mix["sections"][0];
  EXPECT_EQ(sass["instructions"], 9);
  EXPECT_EQ(sass["base"]["HMMA"], 2);
  EXPECT_EQ(sass["base"]["LDG"], 1);
  EXPECT_EQ(sass["key"]["register spills (local memory)"]["STL"], 1);
  EXPECT_EQ(sass["verdict"], "warp-level MMA only (HMMA / mma.sync class), no HGMMA");
  bool full = false;
  for (const nlohmann::json& t : sass["top"]) full |= t[0] == "HMMA.16816.F32" && t[1] == 2;
  EXPECT_TRUE(full);
  const nlohmann::json& nir = mix["sections"][1];
  EXPECT_EQ(nir["base"], (nlohmann::json{{"load_const", 1}, {"fadd", 1}, {"fmul", 1}, {"store_ssbo", 1}}));
  const nlohmann::json& llvm = mix["sections"][2];
  EXPECT_EQ(llvm["base"], (nlohmann::json{{"fadd", 1}, {"store", 1}, {"ret", 1}}));
  // Binary representations (.bin) in a directory: an ELF that no disassembler reads, and something else, are
  // named in the notes; the text file is still counted.
  const fs::path dir = temp_dir() / "with-bin";
  fs::create_directories(dir);
  fs::copy_file(file, dir / "000_k.txt", fs::copy_options::overwrite_existing);
  std::ofstream(dir / "000_k.0.0.bin", std::ios::binary) << "\x7f"
                                                            "ELF not really";
  std::ofstream(dir / "000_k.0.1.bin", std::ios::binary) << "opaque";
  const nlohmann::json dmix = isa_mix(dir);
  EXPECT_EQ(dmix["sections"].size(), 3u);
  ASSERT_EQ(dmix["notes"].size(), 2u);
  EXPECT_NE(dmix["notes"][0].get<std::string>().find("an ELF file that no nvdisasm"), std::string::npos);
  EXPECT_NE(dmix["notes"][1].get<std::string>().find("not an ELF file"), std::string::npos);
}
