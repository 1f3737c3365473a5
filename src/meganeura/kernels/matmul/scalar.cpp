// The scalar tier: f32 FMA in three tiles, 128x128 (8x8 per thread, BK 8) and 64x64 (4x4 per thread, BK 32),
// both double-buffered shared memory with register prefetch (scalar.comp, BT the edge), and 16x16 (one output
// per thread, scalar_small.comp) for outputs too small to spread over the GPU otherwise. Runs everywhere; the
// lavapipe path.
#include <algorithm>
#include <string>

#include "meganeura/kernels/matmul/shaders.hpp"  // generated from kernels/matmul/*.comp, *.glsl
#include "meganeura/kernels/matmul/tiers.hpp"

namespace meganeura::kernels {

namespace glsl {
std::string scalar(const MatmulEpilogue& epilogue, const std::string& blocks) {
  return common(epilogue, false) + shaders::inputs_glsl + blocks + shaders::access_glsl +
         shaders::split_glsl + shaders::scalar_comp + shaders::split_fixup_glsl;
}
std::string scalar_small(const MatmulEpilogue& epilogue, const std::string& blocks) {
  return common(epilogue, false) + shaders::inputs_glsl + blocks + shaders::access_glsl +
         shaders::split_glsl + shaders::scalar_small_comp + shaders::split_fixup_glsl;
}
}  // namespace glsl

namespace tiers {

namespace {
// The stores of a thread's TT x TT outputs (MM_PUT: split.glsl) (scalar.comp's layout: row m0 + (i / 4) * 64
// + ty * 4 + i % 4, column likewise with tx), one statement each, so that every acc index is a constant
// whatever the driver's unrolling does.
std::string store_tile(uint32_t t) {
  const uint32_t tt = t / 16;
  std::string s;
  for (uint32_t i = 0; i < tt; ++i) {
    s += "{ const uint row = m0 + " + std::to_string((i / 4) * 64 + i % 4) + "u + ty * 4u; if (row < p.M) {";
    for (uint32_t j = 0; j < tt; ++j)
      s += " { const uint col = n0 + " + std::to_string((j / 4) * 64 + j % 4) +
           "u + tx * 4u; if (col < p.N) MM_PUT(cbase + row * MM_DST_LD + col, row, col, acc[" +
           std::to_string(i) + "][" + std::to_string(j) + "]); }";
    s += " } } ";
  }
  return s;
}

// The same stores for a fused parameter update (MN_UPDATE_PRELOAD, codegen/optimizer.cpp), unsplit: the state
// of up to 16 elements (4 rows of the 64 tile, 2 of the 128) loaded before any of them is updated, so that
// their loads overlap instead of waiting one element at a time behind the previous element's stores.
std::string store_tile_preload(uint32_t t) {
  const uint32_t tt = t / 16, rows = std::max<uint32_t>(1, 16 / tt);
  const auto at = [](uint32_t i, uint32_t j, const std::string& what) {
    return "{ const uint row = m0 + " + std::to_string((i / 4) * 64 + i % 4) + "u + ty * 4u, col = n0 + " +
           std::to_string((j / 4) * 64 + j % 4) + "u + tx * 4u; if (row < p.M && col < p.N) " + what + " } ";
  };
  std::string s;
  for (uint32_t i0 = 0; i0 < tt; i0 += rows) {
    s += "{ mn_state ";
    for (uint32_t k = 0; k < rows * tt; ++k) s += (k ? ", u" : "u") + std::to_string(k);
    s += "; ";
    for (uint32_t i = i0; i < i0 + rows; ++i)
      for (uint32_t j = 0; j < tt; ++j)
        s += at(i, j,
                "u" + std::to_string((i - i0) * tt + j) + " = mn_update_load(cbase + row * p.ldc + col);");
    for (uint32_t i = i0; i < i0 + rows; ++i)
      for (uint32_t j = 0; j < tt; ++j)
        s += at(i, j,
                "mn_update_with(cbase + row * p.ldc + col, epilogue(acc[" + std::to_string(i) + "][" +
                    std::to_string(j) + "], row, col, batch), u" + std::to_string((i - i0) * tt + j) + ");");
    s += "} ";
  }
  return s;
}
}  // namespace

void scalar_pass(const runtime::DeviceCaps& caps, const MatmulShape& s, uint32_t t, const MatmulEpilogue& pe,
                 MatmulPass& pass, std::string& label) {
  if (t == 16) {
    pass.source.glsl = glsl::scalar_small(pe, block_code(s));
  } else {
    pass.source.glsl = glsl::scalar(pe, block_code(s));
    pass.source.defines.push_back({"BT", std::to_string(t) + "u"});
    // Vec4s of each operand a thread stages per K tile (scalar.comp): two for the 64 tile where both
    // double-buffered tiles (16 · BK · BT bytes) fit the device's shared memory at BK = 32. The 128 tile
    // keeps one: it ran at 128 registers a thread on the H100 (two workgroups an SM), and eight more
    // registers of staged loads would halve that. Neither is timed yet (docs/performance.md, 2026-12-07
    // fifth).
    pass.source.defines.push_back({"LPT", t == 64 && caps.max_shared_memory >= 32768 ? "2u" : "1u"});
    // 4-element loads of f32 operands, and of an f16 weight B (8 bytes; element loads made the f16 prefill 3x
    // slower than f32's on the H100): every row start of A and B on a 4-element boundary.
    const bool vec = s.input == MatmulInput::F32 && s.load_a == MatmulLoad::Plain &&
                     (s.load_b == MatmulLoad::Plain || s.load_b == MatmulLoad::F16) &&
                     row_starts_aligned(s, 4);
    pass.source.defines.push_back({"VEC_LOADS", vec ? "1" : "0"});
    pass.source.defines.push_back({"MM_STORE_TILE", store_tile(t)});
    if (pe.store == "mn_update")
      pass.source.defines.push_back({"MM_STORE_TILE_PRELOAD", store_tile_preload(t)});
    if (vec) label += "_v";
  }
  pass.grid[0] = ceil_div(s.n, t);
  pass.grid[1] = ceil_div(s.m, t);
  label += "_" + std::to_string(t);
}

}  // namespace tiers

}  // namespace meganeura::kernels
