// The scalar tier: f32 FMA in three tiles, 128x128 (8x8 per thread, BK 8) and 64x64 (4x4 per thread, BK 16),
// both double-buffered shared memory with register prefetch (scalar.comp, BT the edge), and 16x16 (one output
// per thread, scalar_small.comp) for outputs too small to spread over the GPU otherwise. Runs everywhere; the
// lavapipe path.
#include "meganeura/kernels/matmul/shaders.hpp"  // generated from kernels/matmul/*.comp, *.glsl
#include "meganeura/kernels/matmul/tiers.hpp"

namespace meganeura::kernels {

namespace glsl {
std::string scalar(const MatmulEpilogue& epilogue, const std::string& blocks) {
  return common(epilogue, false) + shaders::inputs_glsl + blocks + shaders::access_glsl +
         shaders::split_glsl + shaders::scalar_comp;
}
std::string scalar_small(const MatmulEpilogue& epilogue, const std::string& blocks) {
  return common(epilogue, false) + shaders::inputs_glsl + blocks + shaders::access_glsl +
         shaders::split_glsl + shaders::scalar_small_comp;
}
}  // namespace glsl

namespace tiers {

void scalar_pass(const MatmulShape& s, uint32_t t, const MatmulEpilogue& pe, MatmulPass& pass,
                 std::string& label) {
  if (t == 16) {
    pass.source.glsl = glsl::scalar_small(pe, block_code(s));
  } else {
    pass.source.glsl = glsl::scalar(pe, block_code(s));
    pass.source.defines.push_back({"BT", std::to_string(t) + "u"});
    // 4-element loads of f32 operands, and of an f16 weight B (8 bytes; element loads made the f16 prefill 3x
    // slower than f32's on the H100): every row start of A and B on a 4-element boundary.
    const bool vec = s.input == MatmulInput::F32 && s.load_a == MatmulLoad::Plain &&
                     (s.load_b == MatmulLoad::Plain || s.load_b == MatmulLoad::F16) &&
                     row_starts_aligned(s, 4);
    pass.source.defines.push_back({"VEC_LOADS", vec ? "1" : "0"});
    if (vec) label += "_v";
  }
  pass.grid[0] = ceil_div(s.n, t);
  pass.grid[1] = ceil_div(s.m, t);
  label += "_" + std::to_string(t);
}

}  // namespace tiers

}  // namespace meganeura::kernels
