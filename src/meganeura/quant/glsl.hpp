#pragma once
// GLSL ports of the block dequantizers (the formulas of blocks.hpp, in the same order, `precise` so that no
// multiply-add is fused: each value is the CPU reference's bit for bit), for kernels that keep weights in
// block form and dequantize as they load. Blocks are read from a buffer of 32-bit words (any block size, no
// 16-bit storage needed); element i is the i-th value of the flat tensor, whose rows are whole blocks.
#include <string>

#include "meganeura/quant/blocks.hpp"

namespace meganeura::quant {

// GLSL defining, for block type t (Q4_0 .. Q6_K) stored in the uint array `words` (e.g. "b", "b3.d"):
//   float FN(uint i)                    element i;
//   void  FN_8(uint i, out float v[8])  elements i .. i + 7 (i a multiple of 8: one block, one sub-block);
// and the helpers FN_byte, FN_h16, FN_half, FN_u32. Throws ConfigError for a type that is not block-quantized.
std::string glsl_dequantize(Type t, const std::string& words, const std::string& fn);

}  // namespace meganeura::quant
