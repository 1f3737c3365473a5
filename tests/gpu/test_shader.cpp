// The shader toolchain: GLSL -> validated SPIR-V, the disk cache, and the errors a kernel author sees.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "gpu_fixture.hpp"
#include "meganeura/shader/cache.hpp"
#include "meganeura/shader/shader.hpp"

namespace {

using meganeura::ShaderError;
namespace shader = meganeura::shader;
namespace fs = std::filesystem;

const char* kScale = R"(#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer Data { float x[]; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < x.length()) x[i] = x[i] * SCALE;
}
)";

// A fresh directory per test, removed afterwards.
struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device rd;
    path =
        fs::temp_directory_path() / ("meganeura-shader-test-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

size_t files_in(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.is_regular_file();
  return n;
}

TEST(Shader, CompilesToValidSpirv) {
  shader::CompileResult r = shader::compile_glsl({"scale", kScale, {{"SCALE", "2.0"}}});
  ASSERT_GT(r.spirv.size(), 5u);
  EXPECT_EQ(r.spirv[0], 0x07230203u);  // SPIR-V magic
  EXPECT_FALSE(r.cache_hit);
  EXPECT_NO_THROW(shader::validate_spirv(r.spirv, "scale"));
}

TEST(Shader, CacheMissThenHit) {
  TempDir dir;
  shader::CompileOptions opt;
  opt.cache_dir = (dir.path / "nested").string();  // created on demand
  opt.device_key = "device-a";
  shader::CompileResult first = shader::compile_glsl({"scale", kScale, {{"SCALE", "2.0"}}}, opt);
  EXPECT_FALSE(first.cache_hit);
  ASSERT_FALSE(first.cache_path.empty());
  EXPECT_TRUE(fs::exists(first.cache_path));
  EXPECT_EQ(files_in(dir.path / "nested"), 1u);

  shader::CompileResult second = shader::compile_glsl({"another label", kScale, {{"SCALE", "2.0"}}}, opt);
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.spirv, first.spirv);

  // Each input of the key makes a new entry: defines, device, source.
  EXPECT_FALSE(shader::compile_glsl({"scale", kScale, {{"SCALE", "3.0"}}}, opt).cache_hit);
  shader::CompileOptions other = opt;
  other.device_key = "device-b";
  EXPECT_FALSE(shader::compile_glsl({"scale", kScale, {{"SCALE", "2.0"}}}, other).cache_hit);
  EXPECT_FALSE(
      shader::compile_glsl({"scale", std::string(kScale) + "\n", {{"SCALE", "2.0"}}}, opt).cache_hit);
  EXPECT_EQ(files_in(dir.path / "nested"), 4u);
}

TEST(Shader, CorruptCacheEntryIsRecompiled) {
  TempDir dir;
  shader::CompileOptions opt;
  opt.cache_dir = dir.path.string();
  shader::CompileResult first = shader::compile_glsl({"scale", kScale, {{"SCALE", "2.0"}}}, opt);
  ASSERT_FALSE(first.cache_path.empty());
  fs::resize_file(first.cache_path, fs::file_size(first.cache_path) / 2);
  shader::CompileResult again = shader::compile_glsl({"scale", kScale, {{"SCALE", "2.0"}}}, opt);
  EXPECT_FALSE(again.cache_hit);
  EXPECT_EQ(again.spirv, first.spirv);
}

std::vector<char> bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<char>& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(b.data(), std::streamsize(b.size()));
}

// Every byte of an entry (magic, checksum, lengths, key, module), inverted one at a time: each damaged file
// is found, deleted, named in the warning, and replaced by the same module compiled from source.
TEST(Shader, EveryCorruptedByteOfACacheEntryIsDetectedAndRecompiled) {
  TempDir dir;
  shader::CompileOptions opt;
  opt.cache_dir = dir.path.string();
  const shader::ShaderSource src{"scale", kScale, {{"SCALE", "2.0"}}};
  const shader::CompileResult first = shader::compile_glsl(src, opt);
  ASSERT_FALSE(first.cache_path.empty());
  const std::vector<char> good = bytes_of(first.cache_path);
  ASSERT_GT(good.size(), first.spirv.size() * 4);
  size_t failures = 0;
  ::testing::internal::CaptureStderr();  // one warning per damaged file: a thousand lines
  for (size_t i = 0; i < good.size() && failures < 5; ++i) {
    std::vector<char> bad = good;
    bad[i] = char(bad[i] ^ 0xFF);
    write_bytes(first.cache_path, bad);
    const shader::CompileResult r = shader::compile_glsl(src, opt);
    const bool ok = !r.cache_hit && r.spirv == first.spirv &&
                    r.cache_warning.find(first.cache_path) != std::string::npos &&
                    bytes_of(first.cache_path) == good;
    if (!ok) {
      ++failures;
      ADD_FAILURE() << "byte " << i << " of " << good.size() << ": hit " << r.cache_hit << ", same module "
                    << (r.spirv == first.spirv) << ", warning '" << r.cache_warning << "'";
    }
  }
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warnings.find("meganeura: warning: the SPIR-V cache entry '" + first.cache_path + "' is damaged"),
            std::string::npos);
  write_bytes(first.cache_path, good);
  EXPECT_TRUE(shader::compile_glsl(src, opt).cache_hit);
}

// A file whose checksum is right but whose module does not validate (a writer's bug, a hand-made file):
// recompiled too, never a ShaderError carrying the GLSL.
TEST(Shader, CachedModuleThatDoesNotValidateIsRecompiled) {
  TempDir dir;
  shader::CompileOptions opt;
  opt.cache_dir = dir.path.string();
  const shader::ShaderSource src{"scale", kScale, {{"SCALE", "2.0"}}};
  const shader::CompileResult first = shader::compile_glsl(src, opt);
  std::vector<char> b = bytes_of(first.cache_path);
  // Layout: magic(8) checksum(8) | key_len(8) key words(8) module; break the module's 6th word (an opcode).
  const size_t module = b.size() - first.spirv.size() * 4;
  b[module + 5 * 4] = char(0xFF);
  b[module + 5 * 4 + 1] = char(0xFF);
  const uint64_t sum = shader::detail::fnv1a64(b.data() + 16, b.size() - 16);
  std::memcpy(b.data() + 8, &sum, 8);
  write_bytes(first.cache_path, b);
  shader::CompileResult r;
  ASSERT_NO_THROW(r = shader::compile_glsl(src, opt));
  EXPECT_FALSE(r.cache_hit);
  EXPECT_EQ(r.spirv, first.spirv);
  EXPECT_NE(r.cache_warning.find(first.cache_path), std::string::npos) << r.cache_warning;
  EXPECT_NE(r.cache_warning.find("does not validate"), std::string::npos) << r.cache_warning;
  EXPECT_TRUE(shader::compile_glsl(src, opt).cache_hit);
}

TEST(Shader, BrokenGlslThrowsWithLineNumbersAndLabel) {
  const std::string broken =
      "#version 450\n"
      "layout(local_size_x = 1) in;\n"
      "void main() {\n"
      "  float y = undefined_thing * 2.0;\n"
      "}\n";
  try {
    shader::compile_glsl({"matmul_fwd(fc1)", broken, {}});
    FAIL() << "expected ShaderError";
  } catch (const ShaderError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.label(), "matmul_fwd(fc1)");
    EXPECT_NE(msg.find("matmul_fwd(fc1)"), std::string::npos) << msg;
    EXPECT_NE(msg.find(":4:"), std::string::npos) << "compiler diagnostic with the line number: " << msg;
    EXPECT_NE(msg.find("undefined_thing"), std::string::npos) << msg;
    EXPECT_NE(e.numbered_source().find("   4 |   float y = undefined_thing * 2.0;"), std::string::npos)
        << e.numbered_source();
    EXPECT_NE(msg.find("   1 | #version 450"), std::string::npos) << msg;
  }
}

TEST(Shader, NumberedSource) {
  EXPECT_EQ(shader::numbered_source("a\nb\n"), "   1 | a\n   2 | b\n");
  EXPECT_EQ(shader::numbered_source("a\n\nc"), "   1 | a\n   2 | \n   3 | c\n");
}

TEST(Shader, InvalidSpirvIsRejected) {
  std::vector<uint32_t> good = shader::compile_glsl({"scale", kScale, {{"SCALE", "2.0"}}}).spirv;
  // A module cut short is not a module.
  std::vector<uint32_t> truncated(good.begin(), good.begin() + good.size() / 2);
  EXPECT_THROW(shader::validate_spirv(truncated, "truncated"), ShaderError);
  // A well-formed header followed by garbage.
  std::vector<uint32_t> garbage = {0x07230203u, 0x00010500u, 0u, 100u, 0u, 0xdeadbeefu, 0x12345678u};
  try {
    shader::validate_spirv(garbage, "garbage kernel");
    FAIL() << "expected ShaderError";
  } catch (const ShaderError& e) {
    EXPECT_EQ(e.label(), "garbage kernel");
    EXPECT_NE(std::string(e.what()).find("garbage kernel"), std::string::npos);
  }
  EXPECT_THROW(shader::validate_spirv({}, "empty"), ShaderError);
}

TEST(Shader, StructurallyInvalidModuleIsRejected) {
  // Disassembled by hand: a compute entry point whose main function has no OpReturn/terminator.
  std::vector<uint32_t> good = shader::compile_glsl({"scale", kScale, {{"SCALE", "2.0"}}}).spirv;
  std::vector<uint32_t> bad = good;
  // Drop the final OpFunctionEnd (opcode 56, one word): the function is left unterminated.
  ASSERT_EQ(bad.back() & 0xffffu, 56u);
  bad.pop_back();
  EXPECT_THROW(shader::validate_spirv(bad, "unterminated"), ShaderError);
}

// The matmul tiers are written against GL_NV_cooperative_matrix (glslang 12 has no KHR front end): it must
// compile and pass validation here even though lavapipe cannot run it.
TEST(Shader, NvCooperativeMatrixCompilesAndValidates) {
  const char* src = R"(#version 450
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 32) in;
layout(std430, set = 0, binding = 0) readonly buffer A { float16_t a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float16_t b[]; };
layout(std430, set = 0, binding = 2) buffer C { float c[]; };
void main() {
  fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> ma, mb;
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
  coopMatLoadNV(ma, a, 0, 16, false);
  coopMatLoadNV(mb, b, 0, 16, false);
  acc = coopMatMulAddNV(ma, mb, acc);
  coopMatStoreNV(acc, c, 0, 16, false);
}
)";
  shader::CompileResult r = shader::compile_glsl({"coopmat_nv_16x16x16", src, {}});
  EXPECT_GT(r.spirv.size(), 20u);
}

}  // namespace
