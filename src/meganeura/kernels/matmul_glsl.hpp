#pragma once
// GLSL templates of the matmul tiers (internal to kernels/matmul.cpp). Variants are chosen by defines:
// TRANS_A, TRANS_B, INPUT_F16, HAS_EPILOGUE, NUM_EXTRA; coopmat adds VEC_LOADS and DIRECT_STORE.
#include <string>

namespace meganeura::kernels::glsl {

// `epilogue_expr` becomes the body of `float epilogue(float v, uint row, uint col, uint batch)`.
std::string gemv(const std::string& epilogue_expr, unsigned extra_buffers);
std::string scalar(const std::string& epilogue_expr, unsigned extra_buffers);
std::string coopmat_nv(const std::string& epilogue_expr, unsigned extra_buffers);

}  // namespace meganeura::kernels::glsl
