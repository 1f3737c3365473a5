#pragma once
// GLSL templates of the matmul tiers (internal to kernels/matmul.cpp). Variants are chosen by defines:
// TRANS_A, TRANS_B, INPUT_F16, INPUT_ROUND_F16, HAS_EPILOGUE, SPLIT_K (slices of K, 1: one pass); scalar adds
// BT (tile edge, 128 or 64), coopmat VEC_LOADS and DIRECT_STORE.
#include <string>

#include "meganeura/kernels/matmul.hpp"

namespace meganeura::kernels::glsl {

// `epilogue.expr` becomes the body of `float epilogue(float v, uint row, uint col, uint batch)`.
// `blocks`: the dequantizing loads of block-quantized operands (A_LOAD / B_LOAD >= 3): GLSL defining
// float mnq_a(uint i) over `a`, float mnq_b(uint i) and void mnq_b_8(uint i, out float v[8]) over `b`.
std::string gemv(const MatmulEpilogue& epilogue, const std::string& blocks = "");
// GEMV over several weights of one A (MatmulEpilogue::products; TRANS_B): `blocks` also defines mnq_e<j>_8
// over `e<j>w` for each product when B is block-quantized.
std::string gemv_multi(const MatmulEpilogue& epilogue, const std::string& blocks = "");
std::string scalar(const MatmulEpilogue& epilogue,
                   const std::string& blocks = "");  // BT x BT tile, BT = 128 or 64
std::string scalar_small(const MatmulEpilogue& epilogue,
                         const std::string& blocks = "");  // 16x16, one output a thread
// BM, BN, BK, WARPS_M, WARPS_N, GROUP, STAGES and LOCAL_SIZE come as defines; the K loop is written for
// `stages` shared stages (1 or 2) and, with two, `depth` register sets of global loads in flight (1..3);
// `workgroup` (one stage only) takes the workgroup-scope loop, which overlaps nothing with the multiply.
std::string coopmat_nv(const MatmulEpilogue& epilogue, uint32_t stages, uint32_t depth, bool workgroup);
std::string split_sum(
    const MatmulEpilogue& epilogue);  // split-K's second pass: sums the slices, then the epilogue
// Mixed16's f16 copy of both operands: A's `na` f32 values rounded to f16 (ties to even) at half 0 of binding
// 2, B's `nb` at half `b_offset` (even); 256 invocations a workgroup, two values each, over a flat x-y grid.
std::string f16_copy(uint64_t na, uint64_t nb, uint64_t b_offset);

}  // namespace meganeura::kernels::glsl
