#pragma once
// SPV_NV_cooperative_matrix -> SPV_KHR_cooperative_matrix, as a pass over SPIR-V words.
//
// Why: the matmul kernels are written in GLSL against GL_NV_cooperative_matrix because glslang 12 (Debian
// bookworm) has no KHR front end; devices that expose only VK_KHR_cooperative_matrix still get them through
// this rewrite. SPIRV-Tools 2023.1 cannot validate KHR cooperative-matrix modules, so validate the NV module
// (compile_glsl does) *before* calling this.
//
// The mapping:
//   Capability CooperativeMatrixNV            -> CooperativeMatrixKHR
//   OpExtension "SPV_NV_cooperative_matrix"   -> "SPV_KHR_cooperative_matrix"
//   OpTypeCooperativeMatrixNV  T S R C        -> OpTypeCooperativeMatrixKHR T S R C Use
//   OpCooperativeMatrixLoadNV  P Stride Col   -> OpCooperativeMatrixLoadKHR P Layout Stride
//   OpCooperativeMatrixStoreNV P O Stride Col -> OpCooperativeMatrixStoreKHR P O Layout Stride
//   OpCooperativeMatrixMulAddNV A B C         -> OpCooperativeMatrixMulAddKHR A B C [signedness operands]
//   OpCooperativeMatrixLengthNV T             -> OpCooperativeMatrixLengthKHR T
// NV types carry no use; KHR types must. Each type's use is inferred from the multiply-adds: the A operand's
// type is MatrixA, B's MatrixB, C's and the result's MatrixAccumulator; a conversion's result shares its
// operand's use. A type in two roles (A and B of one 16x16x16 product, say) is rejected: write kernels whose
// A and B shapes differ (16x8x16) instead. A type that no multiply-add reaches (loaded and stored only)
// becomes an accumulator, a use under which every load, store and element-wise operation is allowed.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace meganeura::shader {

struct CoopMatRewriteStats {
  uint32_t types = 0, loads = 0, stores = 0, muladds = 0, lengths = 0;
  uint32_t uses[3] = {0, 0, 0};  // types inferred as MatrixA, MatrixB, MatrixAccumulator
};

// Throws ShaderError (naming `label`) for a module that is not SPIR-V, uses no NV cooperative matrix, has a
// type in two roles, or a load/store whose column-major operand is not a boolean constant.
std::vector<uint32_t> rewrite_coopmat_nv_to_khr(std::span<const uint32_t> spirv, const std::string& label,
                                                CoopMatRewriteStats* stats = nullptr);

// SPIR-V opcodes and capabilities the pass reads and writes (also used by tests that inspect modules).
namespace spv {
inline constexpr uint32_t kOpCapability = 17, kOpExtension = 10, kOpConstant = 43;
inline constexpr uint32_t kCapCoopMatNV = 5357, kCapCoopMatKHR = 6022;
inline constexpr uint32_t kOpTypeCoopMatNV = 5358, kOpLoadNV = 5359, kOpStoreNV = 5360, kOpMulAddNV = 5361,
                          kOpLengthNV = 5362;
inline constexpr uint32_t kOpTypeCoopMatKHR = 4456, kOpLoadKHR = 4457, kOpStoreKHR = 4458,
                          kOpMulAddKHR = 4459, kOpLengthKHR = 4460;
}  // namespace spv

}  // namespace meganeura::shader
