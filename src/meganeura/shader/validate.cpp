// SPIRV-Tools validation for the Vulkan target, and disassembly for tools.
#include <spirv-tools/libspirv.hpp>

#include "meganeura/shader/shader.hpp"

namespace meganeura::shader {

void validate_spirv(std::span<const uint32_t> spirv, const std::string& label, uint32_t vulkan_minor) {
  spv_target_env env = SPV_ENV_VULKAN_1_2;
  if (vulkan_minor == 0)
    env = SPV_ENV_VULKAN_1_0;
  else if (vulkan_minor == 1)
    env = SPV_ENV_VULKAN_1_1;
  else if (vulkan_minor >= 3)
    env = SPV_ENV_VULKAN_1_3;
  if (spirv.empty()) {
    throw ShaderError(
        "[shader::validate_spirv] expected a SPIR-V module for kernel '" + label + "', got 0 words", label,
        "");
  }
  spvtools::SpirvTools tools(env);
  std::string diagnostics;
  tools.SetMessageConsumer([&](spv_message_level_t, const char*, const spv_position_t& pos, const char* msg) {
    diagnostics += "  word " + std::to_string(pos.index) + ": " + msg + "\n";
  });
  spvtools::ValidatorOptions opts;
  // Generated kernels may use std430/scalar layouts; the device enables scalarBlockLayout where it has it.
  opts.SetScalarBlockLayout(true);
  if (!tools.Validate(spirv.data(), spirv.size(), opts)) {
    throw ShaderError("[shader::validate_spirv] expected a valid SPIR-V module for kernel '" + label +
                          "', got validation errors:\n" + diagnostics,
                      label, "");
  }
}

std::string disassemble(std::span<const uint32_t> spirv) {
  spvtools::SpirvTools tools(SPV_ENV_VULKAN_1_3);
  std::string text, diagnostics;
  tools.SetMessageConsumer(
      [&](spv_message_level_t, const char*, const spv_position_t&, const char* msg) { diagnostics += msg; });
  if (!tools.Disassemble(spirv.data(), spirv.size(), &text,
                         SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES | SPV_BINARY_TO_TEXT_OPTION_INDENT)) {
    throw ShaderError("[shader::disassemble] expected a SPIR-V module, got " + diagnostics, "", "");
  }
  return text;
}

}  // namespace meganeura::shader
