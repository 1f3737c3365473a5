#pragma once
// GLSL compute source -> validated SPIR-V. shaderc (linked statically) compiles at run time, SPIRV-Tools
// validates every module, and an on-disk cache keyed by everything that changes the output skips both
// when the same kernel is seen again.
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "meganeura/core/error.hpp"

namespace meganeura::shader {

struct Define {
  std::string name;
  std::string value;
};

struct ShaderSource {
  std::string label;            // the kernel's provenance label; shown in every error
  std::string glsl;             // a complete compute shader, "#version 450" first
  std::vector<Define> defines;  // device facts and variants, as -D would give them
};

struct CompileOptions {
  std::string cache_dir;  // "" disables the on-disk cache (SessionConfig::cache_dir)
  std::string
      device_key;  // DeviceCaps::fingerprint(): kernels built for one device are not reused on another
  uint32_t vulkan_minor = 2;  // target Vulkan 1.<minor> (1.2 -> SPIR-V 1.5)
  bool optimize = false;      // spirv-opt -O; drivers optimise anyway, so it is off by default
};

struct CompileResult {
  std::vector<uint32_t> spirv;
  bool cache_hit = false;
  std::string cache_path;     // the file read or written; "" when the cache is off or the write failed
  std::string cache_warning;  // a damaged entry found at this key: deleted, reported on stderr, recompiled
};

// Compiles and validates. A compile or validation failure throws ShaderError carrying the label and the
// numbered source; the message holds the compiler's diagnostics (with line numbers) and the source. A
// damaged cache entry (checksum, lengths, or a module that no longer validates) never throws: it is
// deleted, named in a warning on stderr (and in cache_warning), and the kernel is compiled from source.
CompileResult compile_glsl(const ShaderSource& source, const CompileOptions& options = {});

// Runs the SPIRV-Tools validator for the Vulkan target; throws ShaderError (label, disassembly-free message)
// when the module is not valid.
void validate_spirv(std::span<const uint32_t> spirv, const std::string& label, uint32_t vulkan_minor = 2);

// spirv-dis text (friendly names, indented), for tools that dump kernels.
std::string disassemble(std::span<const uint32_t> spirv);

// "   1 | #version 450\n   2 | ..." for error messages.
std::string numbered_source(const std::string& glsl);

// Identifies the compiler build; part of every cache key.
std::string compiler_version();

}  // namespace meganeura::shader
