#pragma once
// KHR cooperative-matrix loads -> SPV_NV_tensor_addressing tensor loads, as a pass over SPIR-V words that
// runs after rewrite_coopmat_nv_to_khr.
//
// Why: VK_NV_cooperative_matrix2 lets a driver stage workgroup-scope matrices through shared memory itself,
// and its tensor loads (OpCooperativeMatrixLoadTensorNV) are the form it is written for; glslang 12 has no
// GL_NV_cooperative_matrix2 to emit them. Each row-major load
//     %r = OpCooperativeMatrixLoadKHR %T %ptr RowMajor %stride
// from a chosen storage class becomes
//     %l0 = OpCreateTensorLayoutNV %L                     ; %L = OpTypeTensorLayoutNV 2 Constant (clamp mode
//     1) %l1 = OpTensorLayoutSetDimensionNV %L %l0 Rows(T) Columns(T) %l2 = OpTensorLayoutSetStrideNV %L %l1
//     %stride 1 %u  = OpUndef %T %r  = OpCooperativeMatrixLoadTensorNV %T %ptr %u %l2 None None
// a Rows x Columns tensor starting at %ptr, read whole: the elements of the load it replaces. Clamp mode
// Constant (reads outside give 0; none are outside) because with it the H200's driver stages the loads
// through shared memory itself: 188 TFLOP/s at 8192³ against 71 with Undefined, yet below our own staging's
// 269 (docs/performance.md, session 8; whole-buffer slices instead of blocks measured no faster and were
// removed). Column-major loads are left alone (a transposed read needs a tensor view), and so are loads
// through a pointer to anything but the matrix's component type (a uvec4 array: its KHR stride counts uvec4s,
// a tensor layout's counts elements). The module gains the capabilities TensorAddressingNV and
// CooperativeMatrixTensorAddressingNV, the extensions SPV_NV_tensor_addressing and
// SPV_NV_cooperative_matrix2, and version 1.6 (modules of 1.4 and later share its entry-point interface
// rules; earlier ones are refused). The device must enable
// VkPhysicalDeviceCooperativeMatrix2FeaturesNV::cooperativeMatrixTensorAddressing
// (DeviceCaps::coopmat2_tensor_addressing). SPIRV-Tools 2023.1 knows none of these instructions: the driver
// is the only validator, so tests check the words.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace meganeura::shader {

struct TensorLoadOptions {
  bool storage_buffers = true;  // loads through StorageBuffer / PhysicalStorageBuffer pointers
  bool shared = false;          // loads through Workgroup (shared memory) pointers
};

// Throws ShaderError (naming `label`) for a module that is not SPIR-V, is older than 1.4, or has no KHR
// cooperative-matrix type. `rewritten` (optional) receives the number of loads replaced.
std::vector<uint32_t> rewrite_loads_to_tensor_nv(std::span<const uint32_t> spirv, const std::string& label,
                                                 const TensorLoadOptions& options = {},
                                                 uint32_t* rewritten = nullptr);

namespace spv {
inline constexpr uint32_t kOpLoadTensorNV = 5367, kOpTypeTensorLayoutNV = 5370,
                          kOpCreateTensorLayoutNV = 5372, kOpTensorLayoutSetDimensionNV = 5373,
                          kOpTensorLayoutSetStrideNV = 5374;
inline constexpr uint32_t kCapCoopMatTensorAddressingNV = 5433, kCapTensorAddressingNV = 5439;
}  // namespace spv

}  // namespace meganeura::shader
