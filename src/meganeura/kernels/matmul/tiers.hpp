#pragma once
// The matmul tiers behind kernels/matmul.hpp (internal to kernels/). Each tier owns one file: its shaders
// (kernels/matmul/<tier>*.comp, *.glsl, embedded at build time) and the defines and grid of its pass.
//   gemv.cpp     M <= 8, one pass over B            gemv.comp
//   scalar.cpp   f32 FMA tiles 128, 64 and 16        scalar.comp, scalar_small.comp
//   coopmat.cpp  NV / KHR cooperative matrices       coopmat*.comp, coopmat*.glsl
//   common.cpp   what they share: the prelude, operand access, the f16 copy
//   split.glsl   split-K: each slice's K range and its partial stores; split_fixup.glsl (after the tier's
//                main) the last slice's sum
// Defines every pass takes: TRANS_A, TRANS_B, INPUT_F16, INPUT_ROUND_F16, A_LOAD, B_LOAD, HAS_EPILOGUE,
// SPLIT_K.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "meganeura/kernels/matmul.hpp"
#include "meganeura/quant/blocks.hpp"

namespace meganeura::kernels {

namespace glsl {
// The GLSL of each pass. `epilogue.expr` becomes the body of `float epilogue(float v, uint row, uint col,
// uint batch)`. `blocks`: the dequantizing loads of block-quantized operands (A_LOAD / B_LOAD >= 3): GLSL
// defining float mnq_a(uint i) over `a`, float mnq_b(uint i) and void mnq_b_8(uint i, out float v[8]) over
// `b`.
std::string gemv(const MatmulEpilogue& epilogue, const std::string& blocks = "");
// GEMV over several weights of one A (MatmulEpilogue::products; TRANS_B): `blocks` also defines mnq_e<j>_8
// over `e<j>w` for each product when B is block-quantized.
std::string gemv_multi(const MatmulEpilogue& epilogue, const std::string& blocks = "");
// Defines `void FN(uint i, out float v[8])`: values i .. i + 7 (i a multiple of 8) of the weight at
// `binding`.
std::string vec8_loader(uint32_t binding, const std::string& fn);
// BT x BT tile, BT = 128 or 64 (define BT; VEC_LOADS for 16-byte f32 loads).
std::string scalar(const MatmulEpilogue& epilogue, const std::string& blocks = "");
// 16x16, one output a thread.
std::string scalar_small(const MatmulEpilogue& epilogue, const std::string& blocks = "");
// BM, BN, BK, WARPS_M, WARPS_N, GROUP, STAGES and LOCAL_SIZE come as defines; the K loop is written for
// `stages` shared stages (1 or 2) and, with two, `depth` register sets of global loads in flight (1..3);
// `workgroup` (one stage only) takes the workgroup-scope loop, which overlaps nothing with the multiply.
std::string coopmat_nv(const MatmulEpilogue& epilogue, uint32_t stages, uint32_t depth, bool workgroup);
// Mixed16's f16 copy of both operands: A's `na` f32 values rounded to f16 (ties to even) at half 0 of binding
// 2, B's `nb` at half `b_offset` (even); 256 invocations a workgroup, two values each, over a flat x-y grid.
// B is read as `load_b` says (f32, f16 copied bit for bit, bf16, or GGUF blocks dequantized), then rounded.
std::string f16_copy(uint64_t na, uint64_t nb, uint64_t b_offset, MatmulLoad load_b);

// Shared by the tiers' GLSL (common.cpp): the prelude (version, extensions, element type, push constants, C
// and the epilogue's buffers, the epilogue function); `coopmat` adds the cooperative-matrix extensions.
std::string common(const MatmulEpilogue& epilogue, bool coopmat);
// `text` with each @KEY@ replaced (every occurrence; a key that is absent is a bug in the caller).
std::string fill(std::string text, const std::vector<std::pair<std::string, std::string>>& values);
}  // namespace glsl

namespace tiers {
// Leading dimensions and batch strides with the packed defaults filled in.
MatmulShape resolved(MatmulShape s);
uint32_t ceil_div(uint32_t a, uint32_t b);
// Whether every row start of the stored A and B (contiguous extent, leading dimension, batch stride) is a
// multiple of `elems` elements: the condition for loads of `elems` at a time.
bool row_starts_aligned(const MatmulShape& s, uint32_t elems);
quant::Type block_type(MatmulLoad l);  // Q4_0 .. Q6_K
// The dequantizing loads of block-quantized operands: mnq_a(i) / mnq_b(i) over the word arrays a / b.
std::string block_code(const MatmulShape& s);
bool cooperative(MatmulTier t);
// matmul.cpp: the rule's split of `v` capped at max_fill_split(K), and the workgroups `v`'s tile gives with
// it (choose_variant's and default_coopmat_tile's test of whether a tile fills the device).
uint32_t fill_split(const runtime::DeviceCaps& caps, const MatmulShape& shape, const MatmulVariant& v);
uint64_t fill_workgroups(const runtime::DeviceCaps& caps, const MatmulShape& shape, const MatmulVariant& v);

// gemv.cpp: the GEMV pass's shader and grid.
std::string gemv_unavailable(const MatmulShape& shape);
// appends to `label` (".x<P>" for a GEMV of several weights)
void gemv_pass(const runtime::DeviceCaps& caps, const MatmulShape& s, const MatmulEpilogue& pe,
               MatmulPass& pass, std::string& label);
// scalar.cpp: the `tile` x `tile` pass (128, 64 or 16): shader, defines, grid; appends to `label`.
void scalar_pass(const runtime::DeviceCaps& caps, const MatmulShape& s, uint32_t tile,
                 const MatmulEpilogue& pe, MatmulPass& pass, std::string& label);
// coopmat.cpp
std::string coopmat_unavailable(const runtime::DeviceCaps& caps, const MatmulShape& shape, MatmulTier tier);
// The cooperative pass of `tile` (throws ConfigError for a tile that does not fit); `ps` is the product
// pass's shape (split: C is the scratch), `s` the product's.
void coopmat_pass(const runtime::DeviceCaps& caps, MatmulTier tier, const MatmulShape& s,
                  const MatmulShape& ps, const MatmulEpilogue& pe, const CoopMatTile& tile, uint32_t split,
                  MatmulPass& pass, std::string& label);
}  // namespace tiers

}  // namespace meganeura::kernels
