// The GEMV tier (M <= 8): one pass over B, K split across a 256-thread workgroup and reduced in shared memory
// (bandwidth-bound; the inference and small-batch case). Shader: gemv.comp.
#include "meganeura/kernels/matmul/shaders.hpp"  // generated from kernels/matmul/*.comp, *.glsl
#include "meganeura/kernels/matmul/tiers.hpp"

namespace meganeura::kernels {

namespace glsl {
std::string gemv(const MatmulEpilogue& epilogue, const std::string& blocks) {
  return common(epilogue, false) + shaders::inputs_glsl + blocks + shaders::access_glsl + shaders::gemv_comp;
}
}  // namespace glsl

namespace tiers {

std::string gemv_unavailable(const MatmulShape& shape) {
  if (shape.m > 8) return "GEMV handles M <= 8, got M = " + std::to_string(shape.m);
  return "";
}

void gemv_pass(const MatmulShape& s, const MatmulEpilogue& pe, MatmulPass& pass) {
  pass.source.glsl = glsl::gemv(pe, block_code(s));
  pass.grid[0] = ceil_div(s.n, 8);  // gemv.comp's GEMV_NT columns a workgroup
}

}  // namespace tiers

}  // namespace meganeura::kernels
