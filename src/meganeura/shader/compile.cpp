// GLSL -> SPIR-V through shaderc, with validation and the on-disk cache.
#include <glslang/build_info.h>
#include <spirv-tools/libspirv.h>
#include <shaderc/shaderc.hpp>

#include <cstdio>

#include "meganeura/shader/cache.hpp"
#include "meganeura/shader/shader.hpp"

namespace meganeura::shader {
namespace {

shaderc_env_version env_version(uint32_t minor) {
  switch (minor) {
    case 0: return shaderc_env_version_vulkan_1_0;
    case 1: return shaderc_env_version_vulkan_1_1;
    case 2: return shaderc_env_version_vulkan_1_2;
    default: return shaderc_env_version_vulkan_1_3;
  }
}

// Every input that changes the produced words. The label is deliberately absent: two kernels with the
// same source share one cached module.
std::string cache_key(const ShaderSource& src, const CompileOptions& opt) {
  std::string key = "compiler=" + compiler_version() + "\nvulkan=1." + std::to_string(opt.vulkan_minor) +
                    "\noptimize=" + (opt.optimize ? "1" : "0") + "\ndevice=" + opt.device_key + "\n";
  for (const Define& d : src.defines) key += "define " + d.name + "=" + d.value + "\n";
  key += "source\n" + src.glsl;
  return key;
}

std::vector<uint32_t> compile_uncached(const ShaderSource& src, const CompileOptions& opt) {
  // One compiler for the process: shaderc compiles concurrently on a shared instance.
  static const shaderc::Compiler compiler;
  if (!compiler.IsValid()) {
    throw ShaderError("[shader::compile_glsl] expected a working shaderc compiler, got an invalid instance",
                      src.label, numbered_source(src.glsl));
  }
  shaderc::CompileOptions options;
  options.SetTargetEnvironment(shaderc_target_env_vulkan, env_version(opt.vulkan_minor));
  options.SetSourceLanguage(shaderc_source_language_glsl);
  options.SetOptimizationLevel(opt.optimize ? shaderc_optimization_level_performance
                                            : shaderc_optimization_level_zero);
  for (const Define& d : src.defines) options.AddMacroDefinition(d.name, d.value);
  const std::string name = src.label.empty() ? "kernel" : src.label;
  shaderc::SpvCompilationResult result =
      compiler.CompileGlslToSpv(src.glsl, shaderc_glsl_compute_shader, name.c_str(), "main", options);
  if (result.GetCompilationStatus() != shaderc_compilation_status_success) {
    const std::string numbered = numbered_source(src.glsl);
    throw ShaderError("[shader::compile_glsl] expected GLSL that compiles for kernel '" + name + "', got:\n" +
                          result.GetErrorMessage() + "source:\n" + numbered,
                      src.label, numbered);
  }
  return {result.cbegin(), result.cend()};
}

void validate_or_throw(const std::vector<uint32_t>& spirv, const ShaderSource& src,
                       const CompileOptions& opt) {
  try {
    validate_spirv(spirv, src.label, opt.vulkan_minor);
  } catch (const ShaderError& e) {
    const std::string numbered = numbered_source(src.glsl);
    throw ShaderError(std::string(e.what()) + "source:\n" + numbered, src.label, numbered);
  }
}

}  // namespace

std::string numbered_source(const std::string& glsl) {
  std::string out;
  size_t line = 1, start = 0;
  while (start <= glsl.size()) {
    size_t end = glsl.find('\n', start);
    if (end == std::string::npos) end = glsl.size();
    if (end == glsl.size() && start == end && line > 1) break;  // no empty line after a final newline
    char num[16];
    std::snprintf(num, sizeof(num), "%4zu | ", line++);
    out += num;
    out.append(glsl, start, end - start);
    out += '\n';
    start = end + 1;
  }
  return out;
}

std::string compiler_version() {
  unsigned int version = 0, revision = 0;
  shaderc_get_spv_version(&version, &revision);
  return "glslang-" + std::to_string(GLSLANG_VERSION_MAJOR) + "." + std::to_string(GLSLANG_VERSION_MINOR) +
         "." + std::to_string(GLSLANG_VERSION_PATCH) + "/spirv-tools-" + spvSoftwareVersionString() +
         "/spv-" + std::to_string(version) + "." + std::to_string(revision);
}

CompileResult compile_glsl(const ShaderSource& src, const CompileOptions& opt) {
  CompileResult out;
  std::string key, path;
  if (!opt.cache_dir.empty()) {
    key = cache_key(src, opt);
    path = detail::cache_file(opt.cache_dir, key);
    detail::CacheRead hit = detail::cache_load(path, key);
    if (hit.spirv) {
      // The checksum proves the file is what was written; the validator guards against a writer's bug (or
      // a hand-made file with a matching checksum). Either way a bad entry only costs a recompile.
      try {
        validate_spirv(*hit.spirv, src.label, opt.vulkan_minor);
        out.spirv = std::move(*hit.spirv);
        out.cache_hit = true;
        out.cache_path = path;
        return out;
      } catch (const ShaderError& e) {
        const std::string what = e.what();
        hit.damage = "its module does not validate: " + what.substr(0, what.find('\n'));
      }
    }
    if (!hit.damage.empty()) out.cache_warning = detail::cache_discard(path, hit.damage);
  }
  out.spirv = compile_uncached(src, opt);
  validate_or_throw(out.spirv, src, opt);
  if (!path.empty() && detail::cache_store(path, key, out.spirv)) out.cache_path = path;
  return out;
}

}  // namespace meganeura::shader
