// The GEMV tier (M <= 8): one pass over B, K split across a 256-thread workgroup and reduced in shared memory
// (bandwidth-bound; the inference and small-batch case). Shader: gemv.comp.
#include <algorithm>
#include <utility>

#include "meganeura/core/error.hpp"
#include "meganeura/kernels/matmul/shaders.hpp"  // generated from kernels/matmul/*.comp, *.glsl
#include "meganeura/kernels/matmul/tiers.hpp"
#include "meganeura/quant/glsl.hpp"

namespace meganeura::kernels {

namespace glsl {
namespace {

// The buffers of gemv_multi's further products (bindings from 3, each weight read like B).
std::string product_buffers(const MatmulEpilogue& ep) {
  std::string s;
  uint32_t binding = 3;
  for (size_t j = 0; j < ep.products.size(); ++j) {
    const std::string w = "e" + std::to_string(j) + "w", b = std::to_string(binding++);
    s += "#if B_LOAD == 0\nlayout(std430, set = 0, binding = " + b + ") readonly buffer BufE" + w +
         " { ELEM " + w + "[]; };\n#define E" + std::to_string(j) + "_VALUE(i) to_in(" + w + "[i])\n";
    s += "#elif B_LOAD >= 3\nlayout(std430, set = 0, binding = " + b + ") readonly buffer BufE" + w +
         " { uint " + w + "[]; };\n";
    s += "#else\nlayout(std430, set = 0, binding = " + b + ") readonly buffer BufE" + w + " { uint16_t " + w +
         "[]; };\n#if B_LOAD == 1\n#define E" + std::to_string(j) + "_VALUE(i) to_in(mm_half_value(uint(" +
         w + "[i])))\n#else\n#define E" + std::to_string(j) + "_VALUE(i) to_in(uintBitsToFloat(uint(" + w +
         "[i]) << 16u))\n#endif\n#endif\n";
    if (ep.products[j].stored)
      s += "layout(std430, set = 0, binding = " + std::to_string(binding++) + ") buffer BufE" +
           std::to_string(j) + "c { float e" + std::to_string(j) + "c[]; };\n";
  }
  return s;
}

// The layout gemv.comp and gemv_multi share (GEMV_COLS columns x 256 / GEMV_COLS K slices, up to 8 rows) and
// gemv_reduce.glsl with `slots` sets of partial sums.
std::string gemv_layout(const std::string& slots) {
  return "#ifndef GEMV_COLS\n#define GEMV_COLS 8u\n#endif\nconst uint GEMV_NT = GEMV_COLS, GEMV_KS = 256u / "
         "GEMV_NT, "
         "MMAX = 8u;\n#if GEMV_SG\nconst uint GEMV_SLOTS = " +
         slots + ";\n#else\nconst uint GEMV_SLOTS = 1u;\n#endif\n" + shaders::gemv_reduce_glsl;
}

// main() of gemv_multi: gemv.comp's layout (TRANS_B) with one accumulator set per product. With GEMV_SG every
// product's partials go into their own slot and one barrier serves them all; otherwise one slot is reused, a
// product at a time. The thread that sums a (row, column) is the same for every product, so an unstored
// product's value is in its mm_extra<j> when the core's epilogue runs.
//
// A_RMSNORM (an RMSNorm fused as A's prologue, declared by the code generator with A_RMS_EPS and mn_norm_w):
// A's rows are the norm's input, products read x·w, and each sum is scaled by its row's 1 / rms, a scalar, so
// the squares are summed in the same loop (every column's lanes walk the whole of K) and reduced with the
// products in a slot of their own. A first pass that summed them before the products cost a dependent load
// round and two barriers in 60 of a decode step's 121 GEMV passes.
std::string gemv_multi_main(const MatmulEpilogue& ep) {
  const size_t P = ep.products.size();
  auto J = [](size_t j) { return std::to_string(j); };
  const std::string sq_slot = J(P + 1);
  std::string s = R"(
#if A_RMSNORM
#define X_OF(a, k) ((a) * mn_norm_w(k))
#else
#define X_OF(a, k) (a)
#endif
void main() {
  const uint tid = gemv_lane(), nl = tid / GEMV_KS, ks = tid % GEMV_KS;
  const uint batch = gl_WorkGroupID.z, n = gl_WorkGroupID.x * GEMV_NT + nl;
  const uint abase = a_base(batch), bbase = b_base(batch);
  float acc[MMAX], sq[MMAX];
  [[unroll]] for (uint i = 0u; i < MMAX; ++i) { acc[i] = 0.0; sq[i] = 0.0; }
)";
  for (size_t j = 0; j < P; ++j)
    s += "  float acc" + J(j) + "[MMAX];\n  [[unroll]] for (uint i = 0u; i < MMAX; ++i) acc" + J(j) +
         "[i] = 0.0;\n";
  // Every product's eight weights are loaded before the rows are read, a zero where the column is past it.
  s += "#if B_LOAD >= 3 || defined(GEMV_VEC8)\n  for (uint g = ks * 8u; g < p.K; g += GEMV_KS * 8u) {\n"
       "    float bv[8];\n    if (n < p.N) mnq_b_8(bbase + n * p.ldb + g, bv);\n"
       "    else [[unroll]] for (uint q = 0u; q < 8u; ++q) bv[q] = 0.0;\n";
  for (size_t j = 0; j < P; ++j)
    s += "    float bv" + J(j) + "[8];\n    if (n < " + std::to_string(ep.products[j].n) + "u) mnq_e" + J(j) +
         "_8(n * p.ldb + g, bv" + J(j) + ");\n    else [[unroll]] for (uint q = 0u; q < 8u; ++q) bv" + J(j) +
         "[q] = 0.0;\n";
  s += "    [[unroll]] for (uint i = 0u; i < MMAX; ++i) if (i < p.M) {\n      float t = 0.0";
  for (size_t j = 0; j < P; ++j) s += ", t" + J(j) + " = 0.0";
  s += ";\n      [[unroll]] for (uint q = 0u; q < 8u; ++q) {\n"
       "        const float a = A_at(abase, i, g + q), x = X_OF(a, g + q);\n        sq[i] += a * a;\n"
       "        t += x * to_in(bv[q]);\n";
  for (size_t j = 0; j < P; ++j) s += "        t" + J(j) + " += x * to_in(bv" + J(j) + "[q]);\n";
  s += "      }\n      acc[i] += t;\n";
  for (size_t j = 0; j < P; ++j) s += "      acc" + J(j) + "[i] += t" + J(j) + ";\n";
  s += "    }\n  }\n#else\n  for (uint k = ks; k < p.K; k += GEMV_KS) {\n    float x[MMAX];\n"
       "    [[unroll]] for (uint i = 0u; i < MMAX; ++i) {\n"
       "      const float a = i < p.M ? A_at(abase, i, k) : 0.0;\n      sq[i] += a * a;\n"
       "      x[i] = X_OF(a, k);\n    }\n"
       "    if (n < p.N) {\n      const float bv = B_at(bbase, k, n);\n"
       "      [[unroll]] for (uint i = 0u; i < MMAX; ++i) acc[i] += x[i] * bv;\n    }\n";
  for (size_t j = 0; j < P; ++j)
    s += "    if (n < " + std::to_string(ep.products[j].n) + "u) {\n      const float bv = E" + J(j) +
         "_VALUE(n * p.ldb + k);\n      [[unroll]] for (uint i = 0u; i < MMAX; ++i) acc" + J(j) +
         "[i] += x[i] * bv;\n    }\n";
  s += "  }\n#endif\n";
  // The summing thread's row and column, and its row's 1 / rms (rn): through its own slot with GEMV_SG (read
  // after the one barrier), through the shared slot first otherwise.
  s += "  const uint sum_col = gl_LocalInvocationIndex % GEMV_NT, sum_row = gl_LocalInvocationIndex / "
       "GEMV_NT;\n"
       "  const bool summer = gl_LocalInvocationIndex < GEMV_NT * MMAX && sum_row < p.M;\n"
       "  float rn = 1.0;\n#if A_RMSNORM\n  gemv_put(GEMV_SG != 0 ? " +
       sq_slot +
       "u : 0u, sq, tid);\n#if !GEMV_SG\n  barrier();\n"
       "  if (summer) rn = inversesqrt(gemv_total(0u, sum_row, sum_col) / float(p.K) + A_RMS_EPS);\n"
       "  barrier();\n#endif\n#endif\n";
  auto use = [&](size_t j) {
    const std::string n = std::to_string(ep.products[j].n) + "u";
    return "if (gn < " + n + ") {\n      const float s = rn * gemv_total(GEMV_SG != 0 ? " + J(j) +
           "u : 0u, row, col);\n      " +
           (ep.products[j].stored ? "e" + J(j) + "c[batch * p.M * " + n + " + row * " + n + " + gn] = s;"
                                  : "mm_extra" + J(j) + " = s;") +
           "\n    }\n";
  };
  const std::string head =
      "  if (summer) {\n    const uint col = sum_col, row = sum_row, gn = gl_WorkGroupID.x * GEMV_NT + "
      "col;\n";
  for (size_t j = 0; j < P; ++j) {
    s += "  gemv_put(GEMV_SG != 0 ? " + J(j) + "u : 0u, acc" + J(j) + ", tid);\n";
    s += "#if !GEMV_SG\n  barrier();\n" + head + "    " + use(j) + "  }\n  barrier();\n#endif\n";
  }
  s += "  gemv_put(GEMV_SG != 0 ? " + J(P) + "u : 0u, acc, tid);\n  barrier();\n" + head;
  s += "#if GEMV_SG && A_RMSNORM\n    rn = inversesqrt(gemv_total(" + sq_slot +
       "u, row, col) / float(p.K) + A_RMS_EPS);\n#endif\n#if GEMV_SG\n";
  for (size_t j = 0; j < P; ++j) s += "    " + use(j);
  s += "#endif\n    if (gn < p.N) STORE_C(batch * p.sc + row * p.ldc + gn, epilogue(rn * gemv_total(GEMV_SG "
       "!= 0 ? " +
       J(P) + "u : 0u, row, col), row, gn, batch));\n  }\n";
  return s + "}\n";
}

}  // namespace

// Eight consecutive values of a weight row (f32, f16 or bf16 per B_LOAD) in one or two 16-byte loads, read by
// the GEMV's eight-at-a-time loop like a GGUF block's: each lane's dependent loop is K / 256 loads long
// instead of K / 32 (f16 weights decoded slower than f32 ones, 3.88 against 3.26 ms a step on the H100,
// element by element).
std::string vec8_loader(uint32_t binding, const std::string& fn) {
  std::string s = R"(#if B_LOAD == 0
layout(std430, set = 0, binding = @B@) readonly buffer Buf@FN@ { vec4 @FN@_w[]; };
void @FN@(uint i, out float v[8]) {
  const vec4 x = @FN@_w[i / 4u], y = @FN@_w[i / 4u + 1u];
  v[0] = x.x; v[1] = x.y; v[2] = x.z; v[3] = x.w; v[4] = y.x; v[5] = y.y; v[6] = y.z; v[7] = y.w;
}
#else
layout(std430, set = 0, binding = @B@) readonly buffer Buf@FN@ { uvec4 @FN@_w[]; };
void @FN@(uint i, out float v[8]) {
  const uvec4 w = @FN@_w[i / 8u];
  [[unroll]] for (uint q = 0u; q < 4u; ++q) {
#if B_LOAD == 1
    v[2u * q] = mm_half_value(w[q] & 0xFFFFu); v[2u * q + 1u] = mm_half_value(w[q] >> 16u);
#else
    v[2u * q] = uintBitsToFloat(w[q] << 16u); v[2u * q + 1u] = uintBitsToFloat(w[q] & 0xFFFF0000u);
#endif
  }
}
#endif
)";
  for (auto [key, value] :
       {std::pair<std::string, std::string>{"@B@", std::to_string(binding)}, {"@FN@", fn}})
    for (size_t at = s.find(key); at != std::string::npos; at = s.find(key, at + value.size()))
      s.replace(at, key.size(), value);
  return s;
}

std::string gemv(const MatmulEpilogue& epilogue, const std::string& blocks) {
  return common(epilogue, false) + shaders::inputs_glsl + blocks + shaders::access_glsl + gemv_layout("1u") +
         shaders::gemv_comp;
}

std::string gemv_multi(const MatmulEpilogue& epilogue, const std::string& blocks) {
  // slots: each product's partials, then the squares of an A_RMSNORM prologue
  return common(epilogue, false) + "#ifndef A_RMSNORM\n#define A_RMSNORM 0\n#endif\n" + shaders::inputs_glsl +
         product_buffers(epilogue) + blocks + shaders::access_glsl +
         gemv_layout(std::to_string(epilogue.products.size() + 1) + "u + uint(A_RMSNORM)") +
         gemv_multi_main(epilogue);
}
}  // namespace glsl

namespace tiers {

std::string gemv_unavailable(const MatmulShape& shape) {
  if (shape.m > 8) return "GEMV handles M <= 8, got M = " + std::to_string(shape.m);
  return "";
}

namespace {
// Weights x·Wᵀ of f32 (as f32 or rounded-f16 inputs), f16 or bf16 whose rows are whole groups of eight: the
// GEMV reads them eight values a load (glsl::vec8_loader).
bool gemv_vec8(const MatmulShape& s) {
  const bool loads =
      s.load_b == MatmulLoad::Plain || s.load_b == MatmulLoad::F16 || s.load_b == MatmulLoad::BF16;
  return s.trans_b && loads && s.input != MatmulInput::F16 && s.k % 8 == 0 && s.ldb % 8 == 0 &&
         s.stride_b % 8 == 0;
}
}  // namespace

void gemv_pass(const runtime::DeviceCaps& caps, const MatmulShape& s, const MatmulEpilogue& pe,
               MatmulPass& pass, std::string& label) {
  const bool vec8 = gemv_vec8(s);
  std::string blocks = block_code(s);
  // gemv_reduce.glsl's subgroup sums: x·Wᵀ (a column's slices adjacent), subgroups of 4 .. 32 lanes whatever
  // size the driver picks for this shader.
  if (s.trans_b && caps.subgroup_arithmetic && caps.min_subgroup_size >= 4 && caps.max_subgroup_size <= 32) {
    pass.source.defines.push_back({"GEMV_SG", "1"});
    label += ".sg";
  }
  if (vec8) {
    blocks += "#define GEMV_VEC8 1\n" + glsl::vec8_loader(1, "mnq_b_8");
    label += ".v8";
  }
  // Columns a workgroup: 8, or for x·Wᵀ fewer (4, 2; the K slices of a column more) until the grid has a
  // workgroup per compute unit: SmolLM2's 576-wide products were 72 workgroups on the H100's 132 SMs.
  uint32_t n = s.n;
  for (const MatmulEpilogue::GemvProduct& p : pe.products) n = std::max(n, p.n);
  uint32_t cols = 8;
  while (s.trans_b && cols > 2 && uint64_t(ceil_div(n, cols)) * s.batch < target_workgroups(caps)) cols /= 2;
  if (cols != 8) {
    pass.source.defines.push_back({"GEMV_COLS", std::to_string(cols) + "u"});
    label += ".c" + std::to_string(cols);
  }
  pass.grid[0] = ceil_div(n, cols);
  if (pe.products.empty()) {
    pass.source.glsl = glsl::gemv(pe, blocks);
    return;
  }
  // several weights of one A (MatmulEpilogue::products): the grid covers the widest
  if (!s.trans_b || s.trans_a)
    throw ConfigError("[kernels::select_matmul] expected x·Wᵀ for a GEMV of several weights");
  uint32_t binding = 3;  // product_buffers' order: each weight, then its stored output if any
  for (size_t j = 0; j < pe.products.size(); ++j) {
    if (is_block_load(s.load_b))
      blocks += quant::glsl_dequantize(block_type(s.load_b), "e" + std::to_string(j) + "w",
                                       "mnq_e" + std::to_string(j));
    if (vec8) blocks += glsl::vec8_loader(binding, "mnq_e" + std::to_string(j) + "_8");
    binding += pe.products[j].stored ? 2 : 1;
  }
  pass.source.glsl = glsl::gemv_multi(pe, blocks);
  label += ".x" + std::to_string(pe.products.size() + 1);
}

}  // namespace tiers

}  // namespace meganeura::kernels
