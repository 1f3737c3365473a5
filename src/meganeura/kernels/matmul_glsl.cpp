// The matmul GLSL templates. Shapes travel as push constants so that one compiled kernel serves every size;
// tile sizes are constants because they size shared arrays and unrolled loops.
#include "meganeura/kernels/matmul_glsl.hpp"

namespace meganeura::kernels::glsl {
namespace {

// x rounded to the nearest f16 (ties to even), kept in f32. Integer arithmetic, because NVIDIA's driver folds
// unpackHalf2x16(packHalf2x16(x)) back to x (seen on the H200, 2026-12-02). Normal range: round the
// significand to 11 bits; below 2^-14 (f16 subnormals): to a multiple of 2^-24; beyond 65504: infinity.
const char* kRoundF16 = R"(float round_f16(float x) {
  if (isnan(x)) return x;
  if (abs(x) < 6.103515625e-05) return roundEven(x * 16777216.0) * 5.9604644775390625e-08;
  const uint u = floatBitsToUint(x);
  const float r = uintBitsToFloat((u + 0x0FFFu + ((u >> 13u) & 1u)) & 0xFFFFE000u);
  return abs(r) > 65504.0 ? uintBitsToFloat((u & 0x80000000u) | 0x7F800000u) : r;
}
)";

std::string common(const MatmulEpilogue& ep, bool coopmat) {
  // 16-bit storage is enabled, not required: a kernel that declares no 16-bit buffer does not need the
  // feature.
  std::string s =
      "#version 450\n#extension GL_EXT_control_flow_attributes : require\n"
      "#extension GL_EXT_shader_16bit_storage : enable\n"
      "#extension GL_EXT_shader_explicit_arithmetic_types_int16 : enable\n";
  if (coopmat) {
    s += "#extension GL_NV_cooperative_matrix : require\n"
         "#extension GL_KHR_shader_subgroup_basic : require\n"
         "#extension GL_KHR_memory_scope_semantics : require\n"
         "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n";
  }
  s += R"(#if INPUT_F16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define ELEM float16_t
#else
#define ELEM float
#endif
#if INPUT_ROUND_F16
)" + std::string(kRoundF16) +
       R"(float to_in(float x) { return round_f16(x); }
#else
float to_in(ELEM x) { return float(x); }
#endif
#ifndef LOCAL_SIZE
#define LOCAL_SIZE 256
#endif
layout(local_size_x = LOCAL_SIZE) in;
layout(push_constant) uniform Push { uint M, N, K, lda, ldb, ldc, sa, sb, sc; } p;
)";
  s += "layout(std430, set = 0, binding = 2) buffer BufC { " + ep.c_type + " c[]; };\n";
  if (!ep.buffer_decls.empty()) {
    s += ep.buffer_decls;
  } else {
    unsigned taken = 0;  // gemv_multi's product bindings come first and are declared by the template
    for (const MatmulEpilogue::GemvProduct& pr : ep.products) taken += pr.stored ? 2 : 1;
    for (unsigned i = taken; i < ep.extra_buffers; ++i) {
      const std::string n = std::to_string(i);
      s += "layout(std430, set = 0, binding = " + std::to_string(3 + i) + ") readonly buffer BufE" + n +
           " { float e" + n + "[]; };\n";
    }
  }
  s += ep.operand_decls + ep.decls;
  s += "#ifndef CUSTOM_BATCH_BASE\nuint a_base(uint batch) { return batch * p.sa; }\n"
       "uint b_base(uint batch) { return batch * p.sb; }\n#endif\n";
  s += "float epilogue(float v, uint row, uint col, uint batch) { return " +
       (ep.expr.empty() ? std::string("v") : "(" + ep.expr + ")") + "; }\n";
  s += ep.store.empty() ? "#define STORE_C(i, v) c[i] = " + ep.c_type + "(v)\n"
                        : "#define STORE_C(i, v) " + ep.store + "(i, v)\n";
  return s;
}

const char* kScalarInputs = R"(
// A_LOAD / B_LOAD (MatmulLoad): 0 the element type ELEM; 1 f16 and 2 bf16 held as uint16_t and widened by
// integer arithmetic (exact, subnormals kept, whatever the driver's conversions do); 3 and above GGUF blocks held
// as 32-bit words, element i dequantized by mnq_a(i) / mnq_b(i) (quant/glsl.hpp, defined after these buffers).
#ifndef A_LOAD
#define A_LOAD 0
#endif
#ifndef B_LOAD
#define B_LOAD 0
#endif
float mm_half_value(uint h) {
  const uint s = (h & 0x8000u) << 16u, e = (h >> 10u) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0u) return uintBitsToFloat(s | floatBitsToUint(float(m) * 5.9604644775390625e-08));
  return uintBitsToFloat(s | (e == 31u ? 0x7F800000u : (e + 112u) << 23u) | (m << 13u));
}
#if A_LOAD == 0
layout(std430, set = 0, binding = 0) readonly buffer BufA { ELEM a[]; };
#define A_VALUE(i) to_in(a[i])
#elif A_LOAD >= 3
layout(std430, set = 0, binding = 0) readonly buffer BufA { uint a[]; };
#define A_VALUE(i) to_in(mnq_a(i))
#else
layout(std430, set = 0, binding = 0) readonly buffer BufA { uint16_t a[]; };
#if A_LOAD == 1
#define A_VALUE(i) to_in(mm_half_value(uint(a[i])))
#else
#define A_VALUE(i) to_in(uintBitsToFloat(uint(a[i]) << 16u))
#endif
#endif
#if B_LOAD == 0
layout(std430, set = 0, binding = 1) readonly buffer BufB { ELEM b[]; };
#define B_VALUE(i) to_in(b[i])
#elif B_LOAD >= 3
layout(std430, set = 0, binding = 1) readonly buffer BufB { uint b[]; };
#define B_VALUE(i) to_in(mnq_b(i))
#else
layout(std430, set = 0, binding = 1) readonly buffer BufB { uint16_t b[]; };
#if B_LOAD == 1
#define B_VALUE(i) to_in(mm_half_value(uint(b[i])))
#else
#define B_VALUE(i) to_in(uintBitsToFloat(uint(b[i]) << 16u))
#endif
#endif
)";

const char* kScalarAccess = R"(
// Elements of op(A) (M x K) and op(B) (K x N) at logical coordinates; the caller checks bounds. A_FILL / B_FILL
// (defined by the code generator for an operand that is a constant fill, which has no storage): that value.
#ifdef A_FILL
float A_at(uint base, uint m, uint k) { return to_in(A_FILL); }
#else
float A_at(uint base, uint m, uint k) {
#if TRANS_A
  return A_VALUE(base + k * p.lda + m);
#else
  return A_VALUE(base + m * p.lda + k);
#endif
}
#endif
#ifdef B_FILL
float B_at(uint base, uint k, uint n) { return to_in(B_FILL); }
#else
float B_at(uint base, uint k, uint n) {
#if TRANS_B
  return B_VALUE(base + n * p.ldb + k);
#else
  return B_VALUE(base + k * p.ldb + n);
#endif
}
#endif
)";

// The K range and batch of this workgroup. With SPLIT_K slices gl_WorkGroupID.z runs over slice * batches +
// batch and the unfinished product goes to [z][M][N] of the scratch (select_matmul sets p.ldc = N, p.sc = M
// N), so the store's base is z * p.sc either way. kc must match kernels::split_chunk.
const char* kSplit = R"(
uint k_end;
uint k_begin(out uint batch) {
#if SPLIT_K > 1
  const uint S = uint(SPLIT_K), batches = gl_NumWorkGroups.z / S, slice = gl_WorkGroupID.z / batches;
  batch = gl_WorkGroupID.z % batches;
  const uint kc = ((p.K + S - 1u) / S + 31u) / 32u * 32u;
  k_end = min(p.K, slice * kc + kc);
  return min(slice * kc, k_end);
#else
  batch = gl_WorkGroupID.z;
  k_end = p.K;
  return 0u;
#endif
}
)";

const char* kGemv = R"(
// Threads split into GEMV_NT output columns x GEMV_KS slices of K. With B stored N x K (TRANS_B) the K slices
// are adjacent lanes, otherwise the columns are: either way consecutive lanes read consecutive addresses.
#if TRANS_B
const uint GEMV_NT = 8u, GEMV_KS = 32u;
#else
const uint GEMV_NT = 64u, GEMV_KS = 4u;
#endif
const uint MMAX = 8u;
shared float red[MMAX * 256u];
void main() {
  const uint tid = gl_LocalInvocationIndex;
#if TRANS_B
  const uint nl = tid / GEMV_KS, ks = tid % GEMV_KS;
#else
  const uint nl = tid % GEMV_NT, ks = tid / GEMV_NT;
#endif
  const uint batch = gl_WorkGroupID.z;
  const uint n = gl_WorkGroupID.x * GEMV_NT + nl;
  const uint abase = a_base(batch), bbase = b_base(batch);
  float acc[MMAX];
  [[unroll]] for (uint i = 0u; i < MMAX; ++i) acc[i] = 0.0;
#if B_LOAD >= 3 && TRANS_B && !defined(B_FILL)
  // A weight row of GGUF blocks (K a multiple of the block): each lane dequantizes eight values of a block at a
  // time, lanes of a column take consecutive groups, so that a column's blocks are read once and in order.
  if (n < p.N) {
    const uint row = bbase + n * p.ldb;
    for (uint g = ks * 8u; g < p.K; g += GEMV_KS * 8u) {
      float bv[8];
      mnq_b_8(row + g, bv);
      [[unroll]] for (uint i = 0u; i < MMAX; ++i) {
        if (i < p.M) {
          float s = 0.0;
          [[unroll]] for (uint t = 0u; t < 8u; ++t) s += A_at(abase, i, g + t) * to_in(bv[t]);
          acc[i] += s;
        }
      }
    }
  }
#else
  if (n < p.N) {
    for (uint k = ks; k < p.K; k += GEMV_KS) {
      const float bv = B_at(bbase, k, n);
      [[unroll]] for (uint i = 0u; i < MMAX; ++i) {
        if (i < p.M) acc[i] += A_at(abase, i, k) * bv;
      }
    }
  }
#endif
  [[unroll]] for (uint i = 0u; i < MMAX; ++i) red[i * 256u + tid] = acc[i];
  barrier();
  for (uint t = tid; t < GEMV_NT * MMAX; t += 256u) {
    const uint col = t % GEMV_NT, row = t / GEMV_NT;
    const uint gn = gl_WorkGroupID.x * GEMV_NT + col;
    if (row >= p.M || gn >= p.N) continue;
    float s = 0.0;
    for (uint q = 0u; q < GEMV_KS; ++q) {
#if TRANS_B
      s += red[row * 256u + col * GEMV_KS + q];
#else
      s += red[row * 256u + q * GEMV_NT + col];
#endif
    }
    STORE_C(batch * p.sc + row * p.ldc + gn, epilogue(s, row, gn, batch));
  }
}
)";

const char* kScalar = R"(
// 16 x 16 threads, each a TT x TT patch of a BT x BT tile (BT = 128: 8 x 8, BK 8; BT = 64: 4 x 4, BK 16): rows
// q*64 + ty*4 + {0..3} for q < BT/64 (likewise columns), so that a warp's shared reads are broadcasts or
// contiguous vec4s. Either way each thread stages 4 elements of each operand per K tile.
const uint BM = BT, BN = BT, BK = 1024u / BT, TQ = BT / 64u, TT = 4u * TQ;
shared vec4 As[2][BK][BM / 4u];
shared vec4 Bs[2][BK][BN / 4u];
#if VEC_LOADS && !defined(A_FILL) && !defined(B_FILL)
// 16-byte loads (select_matmul sets VEC_LOADS for f32 inputs whose row starts are all on 4-float boundaries): the
// A and B tiles are 256 vec4 each, one per thread, along the stored matrix's contiguous dimension. A vec4 is
// either wholly inside the matrix or wholly outside, so the first element's bounds decide. Fewer load and index
// instructions per K tile (docs/performance.md).
layout(std430, set = 0, binding = 0) readonly buffer BufAV { vec4 a_v4[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufBV { vec4 b_v4[]; };
vec4 va, vb;
void vec_a(out uint mm, out uint kk) {
  const uint i = gl_LocalInvocationIndex;
#if TRANS_A
  mm = (i % (BM / 4u)) * 4u; kk = i / (BM / 4u);
#else
  kk = (i % (BK / 4u)) * 4u; mm = i / (BK / 4u);
#endif
}
void vec_b(out uint kk, out uint nn) {
  const uint i = gl_LocalInvocationIndex;
#if TRANS_B
  kk = (i % (BK / 4u)) * 4u; nn = i / (BK / 4u);
#else
  nn = (i % (BN / 4u)) * 4u; kk = i / (BN / 4u);
#endif
}
void fetch(uint abase, uint bbase, uint m0, uint n0, uint k0) {
  uint mm, kk, nn, kb;
  vec_a(mm, kk);
#if TRANS_A
  const uint ai = abase + (k0 + kk) * p.lda + m0 + mm;
#else
  const uint ai = abase + (m0 + mm) * p.lda + k0 + kk;
#endif
  va = (m0 + mm < p.M && k0 + kk < k_end) ? a_v4[ai / 4u] : vec4(0.0);
  vec_b(kb, nn);
#if TRANS_B
  const uint bi = bbase + (n0 + nn) * p.ldb + k0 + kb;
#else
  const uint bi = bbase + (k0 + kb) * p.ldb + n0 + nn;
#endif
  vb = (k0 + kb < k_end && n0 + nn < p.N) ? b_v4[bi / 4u] : vec4(0.0);
}
void stash(uint buf) {
  uint mm, kk, nn, kb;
  vec_a(mm, kk);
#if TRANS_A
  As[buf][kk][mm >> 2u] = va;
#else
  [[unroll]] for (uint q = 0u; q < 4u; ++q) As[buf][kk + q][mm >> 2u][mm & 3u] = va[q];
#endif
  vec_b(kb, nn);
#if TRANS_B
  [[unroll]] for (uint q = 0u; q < 4u; ++q) Bs[buf][kb + q][nn >> 2u][nn & 3u] = vb[q];
#else
  Bs[buf][kb][nn >> 2u] = vb;
#endif
}
#else
float ra[4], rb[4];

// Staging indices: the contiguous dimension of each stored matrix runs across adjacent threads.
void tile_a(uint i, out uint mm, out uint kk) {
  const uint idx = gl_LocalInvocationIndex + 256u * i;
#if TRANS_A
  mm = idx % BM; kk = idx / BM;
#else
  kk = idx % BK; mm = idx / BK;
#endif
}
void tile_b(uint i, out uint kk, out uint nn) {
  const uint idx = gl_LocalInvocationIndex + 256u * i;
#if TRANS_B
  kk = idx % BK; nn = idx / BK;
#else
  nn = idx % BN; kk = idx / BN;
#endif
}
void fetch(uint abase, uint bbase, uint m0, uint n0, uint k0) {
  [[unroll]] for (uint i = 0u; i < 4u; ++i) {
    uint mm, kk, nn, kb;
    tile_a(i, mm, kk);
    ra[i] = (m0 + mm < p.M && k0 + kk < k_end) ? A_at(abase, m0 + mm, k0 + kk) : 0.0;
    tile_b(i, kb, nn);
    rb[i] = (k0 + kb < k_end && n0 + nn < p.N) ? B_at(bbase, k0 + kb, n0 + nn) : 0.0;
  }
}
void stash(uint buf) {
  [[unroll]] for (uint i = 0u; i < 4u; ++i) {
    uint mm, kk, nn, kb;
    tile_a(i, mm, kk);
    As[buf][kk][mm >> 2u][mm & 3u] = ra[i];
    tile_b(i, kb, nn);
    Bs[buf][kb][nn >> 2u][nn & 3u] = rb[i];
  }
}
#endif
void main() {
  const uint tx = gl_LocalInvocationIndex % 16u, ty = gl_LocalInvocationIndex / 16u;
  uint batch;
  const uint k0 = k_begin(batch);
  const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  const uint abase = a_base(batch), bbase = b_base(batch);
  float acc[TT][TT];
  [[unroll]] for (uint i = 0u; i < TT; ++i) [[unroll]] for (uint j = 0u; j < TT; ++j) acc[i][j] = 0.0;
  const uint tiles = (k_end - k0 + BK - 1u) / BK;
  fetch(abase, bbase, m0, n0, k0);
  stash(0u);
  barrier();
  for (uint t = 0u; t < tiles; ++t) {
    const uint cur = t & 1u;
    if (t + 1u < tiles) fetch(abase, bbase, m0, n0, k0 + (t + 1u) * BK);
    [[unroll]] for (uint k = 0u; k < BK; ++k) {
      float av[TT], bv[TT];
      [[unroll]] for (uint q = 0u; q < TQ; ++q) {
        const vec4 a4 = As[cur][k][q * 16u + ty], b4 = Bs[cur][k][q * 16u + tx];
        av[4u * q] = a4.x; av[4u * q + 1u] = a4.y; av[4u * q + 2u] = a4.z; av[4u * q + 3u] = a4.w;
        bv[4u * q] = b4.x; bv[4u * q + 1u] = b4.y; bv[4u * q + 2u] = b4.z; bv[4u * q + 3u] = b4.w;
      }
      [[unroll]] for (uint i = 0u; i < TT; ++i) [[unroll]] for (uint j = 0u; j < TT; ++j) acc[i][j] += av[i] * bv[j];
    }
    // The other buffer was last read before the previous barrier, so one barrier per tile suffices.
    if (t + 1u < tiles) stash(cur ^ 1u);
    barrier();
  }
  const uint cbase = gl_WorkGroupID.z * p.sc;
  [[unroll]] for (uint i = 0u; i < TT; ++i) {
    const uint row = m0 + (i / 4u) * 64u + ty * 4u + i % 4u;
    if (row >= p.M) continue;
    [[unroll]] for (uint j = 0u; j < TT; ++j) {
      const uint col = n0 + (j / 4u) * 64u + tx * 4u + j % 4u;
      if (col < p.N) STORE_C(cbase + row * p.ldc + col, epilogue(acc[i][j], row, col, batch));
    }
  }
}
)";

const char* kScalarSmall = R"(
// 16 x 16 threads, one output each, over a 16 x 16 tile: for outputs too small to occupy a GPU with 128 x 128
// tiles. Staging puts the stored matrix's contiguous dimension across adjacent threads.
const uint BT = 16u;
shared float As[BT][BT + 1u];  // [k][m]
shared float Bs[BT][BT + 1u];  // [k][n]
void main() {
  const uint tx = gl_LocalInvocationIndex % 16u, ty = gl_LocalInvocationIndex / 16u;
  uint batch;
  const uint kb = k_begin(batch);
  const uint m0 = gl_WorkGroupID.y * BT, n0 = gl_WorkGroupID.x * BT;
  const uint abase = a_base(batch), bbase = b_base(batch);
  float acc = 0.0;
  for (uint k0 = kb; k0 < k_end; k0 += BT) {
#if TRANS_A
    const uint am = tx, ak = ty;
#else
    const uint am = ty, ak = tx;
#endif
    As[ak][am] = (m0 + am < p.M && k0 + ak < k_end) ? A_at(abase, m0 + am, k0 + ak) : 0.0;
#if TRANS_B
    const uint bn = ty, bk = tx;
#else
    const uint bn = tx, bk = ty;
#endif
    Bs[bk][bn] = (k0 + bk < k_end && n0 + bn < p.N) ? B_at(bbase, k0 + bk, n0 + bn) : 0.0;
    barrier();
    [[unroll]] for (uint k = 0u; k < BT; ++k) acc += As[k][ty] * Bs[k][tx];
    barrier();
  }
  const uint row = m0 + ty, col = n0 + tx;
  if (row < p.M && col < p.N) STORE_C(gl_WorkGroupID.z * p.sc + row * p.ldc + col, epilogue(acc, row, col, batch));
}
)";

const char* kCoopmat = R"(
// WARPS_M x WARPS_N subgroups of 32 (NT = 32 * WARPS_M * WARPS_N invocations), each a (BM / WARPS_M) x
// (BN / WARPS_N) patch of the BM x BN tile held as TM x TN accumulators of 16 x 8 (the 16x8x16 shape keeps the
// A (16x16) and B (16x8) types distinct, which the KHR rewrite needs). Shared tiles keep each stored matrix's
// contiguous dimension contiguous (16-byte copies from global memory) and the fragment loads read them row- or
// column-major as the transpose needs. Rows are padded by 16 bytes.
// Two shared stages: global loads run DEPTH K tiles ahead of the multiply-adds, through DEPTH register sets
// ra0/rb0, ra1/rb1, ..: tile t + DEPTH is requested into set t % DEPTH while tile t is multiplied, and stored to
// shared memory DEPTH - 1 tiles later. The K loop is written out per set (coopmat_ring_loop) so that every set
// index is a constant: one array indexed by set went to local memory on the H200. One stage: indexed_set() and kCoopOneStageLoop.
// The 16-byte views are a_v4 / b_v4: codegen names epilogue buffers b3, b4, .. (Emitter::buffer_decls).
#if INPUT_ROUND_F16 && VEC_LOADS
layout(std430, set = 0, binding = 0) readonly buffer BufA { vec4 a_v4[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB { vec4 b_v4[]; };
#elif INPUT_ROUND_F16
layout(std430, set = 0, binding = 0) readonly buffer BufA { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB { float b[]; };
#elif VEC_LOADS
layout(std430, set = 0, binding = 0) readonly buffer BufA { uvec4 a_v4[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB { uvec4 b_v4[]; };
#else
layout(std430, set = 0, binding = 0) readonly buffer BufA { float16_t a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB { float16_t b[]; };
#endif
const uint PAD = 8u, NT = uint(LOCAL_SIZE), WARPS = WARPS_M * WARPS_N;
const uint WTM = BM / WARPS_M, WTN = BN / WARPS_N, TM = WTM / 16u, TN = WTN / 8u;
#if TRANS_A
const uint A_ROWS = BK, A_COLS = BM;
#else
const uint A_ROWS = BM, A_COLS = BK;
#endif
#if TRANS_B
const uint B_ROWS = BN, B_COLS = BK;
#else
const uint B_ROWS = BK, B_COLS = BN;
#endif
const uint A_STRIDE = (A_COLS + PAD) / 8u, B_STRIDE = (B_COLS + PAD) / 8u;  // in uvec4
const uint A_SIZE = A_ROWS * A_STRIDE, B_SIZE = B_ROWS * B_STRIDE;
const uint A_VPT = A_ROWS * A_COLS / 8u / NT, B_VPT = B_ROWS * B_COLS / 8u / NT;
shared uvec4 As[uint(STAGES) * A_SIZE];
shared uvec4 Bs[uint(STAGES) * B_SIZE];
#if !WG_SCOPE
shared float Cs[WARPS * 128u];
#endif

uvec4 pack8(float h[8]) {
  return uvec4(packHalf2x16(vec2(h[0], h[1])), packHalf2x16(vec2(h[2], h[3])), packHalf2x16(vec2(h[4], h[5])),
               packHalf2x16(vec2(h[6], h[7])));
}
#if INPUT_ROUND_F16 && VEC_LOADS && RTE_F16
// Eight f32 rounded to f16 by the conversion itself: the module asks for round-to-nearest-even and preserved
// denormals on 16-bit results (SPV_KHR_float_controls; the device's shaderRoundingModeRTEFloat16 and
// shaderDenormPreserveFloat16), one conversion per element instead of to_in's integer arithmetic.
#extension GL_EXT_spirv_intrinsics : require
spirv_execution_mode(extensions = ["SPV_KHR_float_controls"], capabilities = [4467], 4462, 16);  // RoundingModeRTE
spirv_execution_mode(extensions = ["SPV_KHR_float_controls"], capabilities = [4464], 4459, 16);  // DenormPreserve
uvec4 pack8v(vec4 x, vec4 y) {
  return uvec4(packFloat2x16(f16vec2(x.xy)), packFloat2x16(f16vec2(x.zw)), packFloat2x16(f16vec2(y.xy)),
               packFloat2x16(f16vec2(y.zw)));
}
#elif INPUT_ROUND_F16 && VEC_LOADS
uvec4 pack8v(vec4 x, vec4 y) {  // eight f32 rounded to f16 (to_in: exact whatever packHalf2x16's rounding)
  return uvec4(packHalf2x16(vec2(to_in(x.x), to_in(x.y))), packHalf2x16(vec2(to_in(x.z), to_in(x.w))),
               packHalf2x16(vec2(to_in(y.x), to_in(y.y))), packHalf2x16(vec2(to_in(y.z), to_in(y.w))));
}
#endif

// Whether (r, c) lies inside [0, rl) x [0, cl). FULL_TILES (workgroup-scope tiles of an M x N x K that the tiles
// divide): always, and the 16-byte loads go unguarded (faster: docs/performance.md).
#if FULL_TILES
#define INSIDE(r, rl, c, cl) true
#else
#define INSIDE(r, rl, c, cl) ((r) < (rl) && (c) < (cl))
#endif
// Eight halves of a stored row, zero outside [0, rlim) x [0, clim).
uvec4 fetch_a(uint base, uint gr, uint gc, uint rlim, uint clim) {
#if INPUT_ROUND_F16 && VEC_LOADS
  if (!INSIDE(gr, rlim, gc, clim)) return uvec4(0u);
  const uint i = (base + gr * p.lda + gc) / 4u;
  return pack8v(a_v4[i], a_v4[i + 1u]);
#elif VEC_LOADS
  return INSIDE(gr, rlim, gc, clim) ? a_v4[(base + gr * p.lda + gc) / 8u] : uvec4(0u);
#else
  float h[8];
  [[unroll]] for (uint e = 0u; e < 8u; ++e) h[e] = (gr < rlim && gc + e < clim) ? to_in(a[base + gr * p.lda + gc + e]) : 0.0;
  return pack8(h);
#endif
}
uvec4 fetch_b(uint base, uint gr, uint gc, uint rlim, uint clim) {
#if INPUT_ROUND_F16 && VEC_LOADS
  if (!INSIDE(gr, rlim, gc, clim)) return uvec4(0u);
  const uint i = (base + gr * p.ldb + gc) / 4u;
  return pack8v(b_v4[i], b_v4[i + 1u]);
#elif VEC_LOADS
  return INSIDE(gr, rlim, gc, clim) ? b_v4[(base + gr * p.ldb + gc) / 8u] : uvec4(0u);
#else
  float h[8];
  [[unroll]] for (uint e = 0u; e < 8u; ++e) h[e] = (gr < rlim && gc + e < clim) ? to_in(b[base + gr * p.ldb + gc + e]) : 0.0;
  return pack8(h);
#endif
}
@SETS@// The block's tile (row, column). GROUP 0: the launch order (columns fastest). GROUP g: the linear workgroup index
// walks g tile-rows column by column, so that workgroups resident together share B columns in L2 (the last
// group may hold fewer rows).
uvec2 block_tile() {
#if GROUP > 0
  const uint gx = gl_NumWorkGroups.x, gy = gl_NumWorkGroups.y;
  const uint lin = gl_WorkGroupID.y * gx + gl_WorkGroupID.x;
  const uint g = uint(GROUP), first = (lin / (g * gx)) * g, rows = min(gy - first, g);
  const uint within = lin % (g * gx);
  return uvec2(first + within % rows, within / rows);
#else
  return uvec2(gl_WorkGroupID.y, gl_WorkGroupID.x);
#endif
}
void main() {
  const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  const uint wm = sg / WARPS_N, wn = sg % WARPS_N;
  uint batch;
  const uint kb = k_begin(batch);
  const uvec2 bt = block_tile();
  const uint m0 = bt.x * BM, n0 = bt.y * BN;
  const uint abase = a_base(batch), bbase = b_base(batch);
#if WG_SCOPE
  // Workgroup scope: one accumulator for the whole tile; select_matmul guarantees a full tile and a direct store.
  fcoopmatNV<32, gl_ScopeWorkgroup, BM, BN> wacc = fcoopmatNV<32, gl_ScopeWorkgroup, BM, BN>(0.0);
  fcoopmatNV<16, gl_ScopeWorkgroup, BM, BK> wa;
  fcoopmatNV<16, gl_ScopeWorkgroup, BK, BN> wb;
#else
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 8> acc[TM][TN];
  [[unroll]] for (uint i = 0u; i < TM; ++i) [[unroll]] for (uint j = 0u; j < TN; ++j)
    acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>(0.0);
  fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[TM];
  fcoopmatNV<16, gl_ScopeSubgroup, 16, 8> fb[TN];
#endif
  const uint tiles = (k_end - kb + BK - 1u) / BK;
@KLOOP@  const uint cbase = gl_WorkGroupID.z * p.sc;
#if WG_SCOPE
  coopMatStoreNV(wacc, c, cbase + m0 * p.ldc + n0, p.ldc, false);
#else
  [[unroll]] for (uint i = 0u; i < TM; ++i) [[unroll]] for (uint j = 0u; j < TN; ++j) {
    const uint row = m0 + wm * WTM + i * 16u, col = n0 + wn * WTN + j * 8u;
#if DIRECT_STORE
    if (row + 16u <= p.M && col + 8u <= p.N) {
      coopMatStoreNV(acc[i][j], c, cbase + row * p.ldc + col, p.ldc, false);
      continue;
    }
#endif
    // Edges and epilogues go through shared memory, where each element's coordinates are known.
    coopMatStoreNV(acc[i][j], Cs, sg * 128u, 8u, false);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    [[unroll]] for (uint q = 0u; q < 4u; ++q) {
      const uint e = lane + 32u * q, r = row + e / 8u, cc = col + e % 8u;
      if (r < p.M && cc < p.N) STORE_C(cbase + r * p.ldc + cc, epilogue(Cs[sg * 128u + e], r, cc, batch));
    }
    subgroupBarrier();
  }
#endif
}
)";

// One register set of the cooperative kernel's global-load ring: @ is the set's number.
const char* kCoopSet = R"(uvec4 ra@[A_VPT], rb@[B_VPT];
// Requests K tile k0 into register set @.
void fetch@(uint abase, uint bbase, uint m0, uint n0, uint k0) {
  [[unroll]] for (uint i = 0u; i < A_VPT; ++i) {
    const uint idx = gl_LocalInvocationIndex + NT * i;
    const uint r = idx / (A_COLS / 8u), cv = idx % (A_COLS / 8u);
#if TRANS_A
    ra@[i] = fetch_a(abase, k0 + r, m0 + cv * 8u, k_end, p.M);
#else
    ra@[i] = fetch_a(abase, m0 + r, k0 + cv * 8u, p.M, k_end);
#endif
  }
  [[unroll]] for (uint i = 0u; i < B_VPT; ++i) {
    const uint idx = gl_LocalInvocationIndex + NT * i;
    const uint r = idx / (B_COLS / 8u), cv = idx % (B_COLS / 8u);
#if TRANS_B
    rb@[i] = fetch_b(bbase, n0 + r, k0 + cv * 8u, p.N, k_end);
#else
    rb@[i] = fetch_b(bbase, k0 + r, n0 + cv * 8u, k_end, p.N);
#endif
  }
}
// Stores register set @ into shared stage `buf`.
void stash@(uint buf) {
  [[unroll]] for (uint i = 0u; i < A_VPT; ++i) {
    const uint idx = gl_LocalInvocationIndex + NT * i;
    As[buf * A_SIZE + (idx / (A_COLS / 8u)) * A_STRIDE + idx % (A_COLS / 8u)] = ra@[i];
  }
  [[unroll]] for (uint i = 0u; i < B_VPT; ++i) {
    const uint idx = gl_LocalInvocationIndex + NT * i;
    Bs[buf * B_SIZE + (idx / (B_COLS / 8u)) * B_STRIDE + idx % (B_COLS / 8u)] = rb@[i];
  }
}
)";

// The multiply-adds of one K tile from shared stage `cur` into this subgroup's accumulators (workgroup scope:
// into the workgroup's, the stored tiles read whole).
const char* kCoopMultiply = R"(
        {
          const uint ao = cur * A_SIZE, bo = cur * B_SIZE;
#if WG_SCOPE
          coopMatLoadNV(wa, As, ao, A_STRIDE, bool(TRANS_A));
          coopMatLoadNV(wb, Bs, bo, B_STRIDE, bool(TRANS_B));
          wacc = coopMatMulAddNV(wa, wb, wacc);
#else
          [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
            [[unroll]] for (uint i = 0u; i < TM; ++i) {
#if TRANS_A
              coopMatLoadNV(fa[i], As, ao + kk * A_STRIDE + (wm * WTM + i * 16u) / 8u, A_STRIDE, true);
#else
              coopMatLoadNV(fa[i], As, ao + (wm * WTM + i * 16u) * A_STRIDE + kk / 8u, A_STRIDE, false);
#endif
            }
            [[unroll]] for (uint j = 0u; j < TN; ++j) {
#if TRANS_B
              coopMatLoadNV(fb[j], Bs, bo + (wn * WTN + j * 8u) * B_STRIDE + kk / 8u, B_STRIDE, true);
#else
              coopMatLoadNV(fb[j], Bs, bo + kk * B_STRIDE + (wn * WTN + j * 8u) / 8u, B_STRIDE, false);
#endif
            }
            [[unroll]] for (uint i = 0u; i < TM; ++i) [[unroll]] for (uint j = 0u; j < TN; ++j)
              acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
          }
#endif
        }
)";

// The one-stage tiles' staging (depth 1): kCoopSet with one register set read and written through an index
// that is a constant once the driver inlines (indexed_set). The driver compiles this form faster than the
// same loop over the named set (ra0/fetch0, as the two-stage ring writes it): keep the shape
// (docs/performance.md). Wait until every subgroup has read the previous tile, stash, wait for the stash,
// request the next, multiply.
const char* kCoopOneStageLoop = R"(
  [[unroll]] for (uint u = 0u; u < 1u; ++u) {
    if (u < tiles) fetch(u, abase, bbase, m0, n0, kb + u * BK);
  }
  for (uint t0 = 0u; t0 < tiles; t0 += 1u) {
    [[unroll]] for (uint u = 0u; u < 1u; ++u) {
      const uint t = t0 + u;
      if (t < tiles) {
        barrier();
        stash(u, 0u);
        barrier();
        if (t + 1u < tiles) fetch(u, abase, bbase, m0, n0, kb + (t + 1u) * BK);
        const uint cur = 0u;
@MULTIPLY@
      }
    }
  }
)";

// The workgroup-scope tiles' loop (one stage): request tile t, wait until the previous multiply has read the
// shared tiles, stash, wait for the stash, multiply; nothing overlaps the multiply. Against
// kCoopOneStageLoop's order (next tile requested before the multiply), the driver's workgroup-scope multiply
// does better without loads in flight across it (docs/performance.md).
const char* kCoopWorkgroupLoop = R"(
  for (uint t = 0u; t < tiles; ++t) {
    fetch(0u, abase, bbase, m0, n0, kb + t * BK);
    barrier();
    stash(0u, 0u);
    barrier();
    const uint cur = 0u;
@MULTIPLY@
  }
)";

std::string each_set(const std::string& text, uint32_t u) {
  std::string out;
  for (char ch : text) out += ch == '@' ? std::to_string(u) : std::string(1, ch);
  return out;
}

// kCoopSet as one array of a single set indexed by a `set` argument: ra[1][A_VPT], fetch(uint set, ..).
std::string indexed_set() {
  std::string out = kCoopSet;
  auto all = [&out](const std::string& from, const std::string& to) {
    for (size_t at = out.find(from); at != std::string::npos; at = out.find(from, at + to.size()))
      out.replace(at, from.size(), to);
  };
  all("uvec4 ra@[A_VPT], rb@[B_VPT];", "uvec4 ra[1][A_VPT], rb[1][B_VPT];");
  all("ra@[", "ra[set][");
  all("rb@[", "rb[set][");
  all("fetch@(", "fetch(uint set, ");
  all("stash@(", "stash(uint set, ");
  all("@", "`set`");  // comments
  return out;
}

// The two-stage K loop over `tiles` tiles of BK from kb, with a ring of `depth` register sets. Tile t comes
// through set t % depth, so the loop is written out `depth` times per trip with t0 + u for t: refill set u
// `depth` tiles ahead, multiply stage t & 1, store set (u + 1) % depth (tile t + 1) into the other stage
// (last read before the previous barrier), one barrier. Full trips run unguarded (guarding each tile inside
// the trip compiles to slower code); the last tiles % depth follow one by one.
std::string coopmat_ring_loop(uint32_t depth) {
  const std::string d = std::to_string(depth);
  std::string s;
  for (uint32_t u = 0; u < depth; ++u) {
    const std::string us = std::to_string(u);
    s += "  if (" + us + "u < tiles) fetch" + us + "(abase, bbase, m0, n0, kb + " + us + "u * BK);\n";
  }
  auto tile = [&](uint32_t u) {
    const std::string us = std::to_string(u), next = std::to_string((u + 1) % depth);
    return "        const uint t = t0 + " + us + "u;\n        if (t + " + d + "u < tiles) fetch" + us +
           "(abase, bbase, m0, n0, kb + (t + " + d + "u) * BK);\n        const uint cur = t & 1u;\n" +
           kCoopMultiply + "        if (t + 1u < tiles) stash" + next +
           "((t + 1u) & 1u);\n        barrier();\n";
  };
  s += "  stash0(0u);\n  barrier();\n  uint t0 = 0u;\n";
  s += "  for (; t0 + " + d + "u <= tiles; t0 += " + d + "u) {\n";
  for (uint32_t u = 0; u < depth; ++u) s += "      {\n" + tile(u) + "      }\n";
  s += "  }\n";
  for (uint32_t u = 0; u + 1 < depth; ++u)
    s += "  if (t0 + " + std::to_string(u) + "u < tiles) {\n" + tile(u) + "  }\n";
  return s;
}

const char* kSplitSum = R"(
// The summing pass of split-K: one thread per output element adds its SPLIT_K partial products in slice order
// (deterministic) and applies the epilogue. Partials are [slice][batch][M][N]; the grid covers batch x M x N
// elements flat over x and y.
layout(std430, set = 0, binding = 0) readonly buffer BufP { float part[]; };
void main() {
  const uint mn = p.M * p.N, total = gl_NumWorkGroups.z * mn;
  const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationIndex;
  if (i >= mn) return;
  const uint batch = gl_WorkGroupID.z, at = batch * mn + i;
  float v = 0.0;
  [[unroll]] for (uint s = 0u; s < uint(SPLIT_K); ++s) v += part[s * total + at];
  const uint row = i / p.N, col = i % p.N;
  STORE_C(batch * p.sc + row * p.ldc + col, epilogue(v, row, col, batch));
}
)";

}  // namespace

std::string gemv(const MatmulEpilogue& epilogue, const std::string& blocks) {
  return common(epilogue, false) + kScalarInputs + blocks + kScalarAccess + kGemv;
}
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

// main() of gemv_multi: kGemv's layout (8 columns x 32 K slices, TRANS_B) with one accumulator set per
// product; the partial sums go through one shared array, a product at a time. Each reducing thread owns the
// same (row, column) in every phase, so an unstored product's value is in its mm_extra<j> when the core's
// epilogue runs.
std::string gemv_multi_main(const MatmulEpilogue& ep) {
  const size_t P = ep.products.size();
  auto J = [](size_t j) { return std::to_string(j); };
  // A_RMSNORM (an RMSNorm fused as A's prologue, declared by the code generator with A_RMS_EPS and
  // mn_norm_w): A's rows are the norm's input; a first pass sums each row's squares into rn (1 / rms),
  // products read x·w and each sum is scaled by its row's rn.
  std::string s = R"(
const uint GEMV_NT = 8u, GEMV_KS = 32u, MMAX = 8u;
shared float red[MMAX * 256u];
#ifndef A_RMSNORM
#define A_RMSNORM 0
#endif
#if A_RMSNORM
shared float rn[MMAX];
float X_at(uint base, uint m, uint k) { return A_at(base, m, k) * mn_norm_w(k); }
#else
float X_at(uint base, uint m, uint k) { return A_at(base, m, k); }
#endif
void main() {
  const uint tid = gl_LocalInvocationIndex, nl = tid / GEMV_KS, ks = tid % GEMV_KS;
  const uint batch = gl_WorkGroupID.z, n = gl_WorkGroupID.x * GEMV_NT + nl;
  const uint abase = a_base(batch), bbase = b_base(batch);
#if A_RMSNORM
  {
    float sq[MMAX];
    [[unroll]] for (uint i = 0u; i < MMAX; ++i) sq[i] = 0.0;
    for (uint k = tid; k < p.K; k += 256u) {
      [[unroll]] for (uint i = 0u; i < MMAX; ++i) if (i < p.M) { const float x = A_at(abase, i, k); sq[i] += x * x; }
    }
    [[unroll]] for (uint i = 0u; i < MMAX; ++i) red[i * 256u + tid] = sq[i];
    barrier();
    if (tid < MMAX) {
      float t = 0.0;
      for (uint q = 0u; q < 256u; ++q) t += red[tid * 256u + q];
      rn[tid] = inversesqrt(t / float(p.K) + A_RMS_EPS);
    }
    barrier();
  }
#endif
  float acc[MMAX];
  [[unroll]] for (uint i = 0u; i < MMAX; ++i) acc[i] = 0.0;
)";
  for (size_t j = 0; j < P; ++j)
    s += "  float acc" + J(j) + "[MMAX];\n  [[unroll]] for (uint i = 0u; i < MMAX; ++i) acc" + J(j) +
         "[i] = 0.0;\n";
  s += "#if B_LOAD >= 3\n  for (uint g = ks * 8u; g < p.K; g += GEMV_KS * 8u) {\n    float bv[8];\n";
  s += "    if (n < p.N) {\n      mnq_b_8(bbase + n * p.ldb + g, bv);\n"
       "      [[unroll]] for (uint i = 0u; i < MMAX; ++i) if (i < p.M) {\n        float t = 0.0;\n"
       "        [[unroll]] for (uint q = 0u; q < 8u; ++q) t += X_at(abase, i, g + q) * to_in(bv[q]);\n"
       "        acc[i] += t;\n      }\n    }\n";
  for (size_t j = 0; j < P; ++j)
    s += "    if (n < " + std::to_string(ep.products[j].n) + "u) {\n      mnq_e" + J(j) +
         "_8(n * p.ldb + g, bv);\n"
         "      [[unroll]] for (uint i = 0u; i < MMAX; ++i) if (i < p.M) {\n        float t = 0.0;\n"
         "        [[unroll]] for (uint q = 0u; q < 8u; ++q) t += X_at(abase, i, g + q) * to_in(bv[q]);\n"
         "        acc" +
         J(j) + "[i] += t;\n      }\n    }\n";
  s += "  }\n#else\n  for (uint k = ks; k < p.K; k += GEMV_KS) {\n    float x[MMAX];\n"
       "    [[unroll]] for (uint i = 0u; i < MMAX; ++i) x[i] = i < p.M ? X_at(abase, i, k) : 0.0;\n"
       "    if (n < p.N) {\n      const float bv = B_at(bbase, k, n);\n"
       "      [[unroll]] for (uint i = 0u; i < MMAX; ++i) acc[i] += x[i] * bv;\n    }\n";
  for (size_t j = 0; j < P; ++j)
    s += "    if (n < " + std::to_string(ep.products[j].n) + "u) {\n      const float bv = E" + J(j) +
         "_VALUE(n * p.ldb + k);\n      [[unroll]] for (uint i = 0u; i < MMAX; ++i) acc" + J(j) +
         "[i] += x[i] * bv;\n    }\n";
  s += "  }\n#endif\n";
  // One phase per product (the core last): partial sums into red, then one thread per (row, column) sums
  // them.
  const uint32_t nt = 8, mmax = 8;
  (void)nt;
  (void)mmax;
  auto phase = [&](const std::string& accv, const std::string& n, const std::string& use) {
    return "  [[unroll]] for (uint i = 0u; i < MMAX; ++i) red[i * 256u + tid] = " + accv +
           "[i];\n  barrier();\n"
           "  if (tid < GEMV_NT * MMAX) {\n    const uint col = tid % GEMV_NT, row = tid / GEMV_NT;\n"
           "    const uint gn = gl_WorkGroupID.x * GEMV_NT + col;\n    if (row < p.M && gn < " +
           n +
           ") {\n      float s = 0.0;\n"
           "      for (uint q = 0u; q < GEMV_KS; ++q) s += red[row * 256u + col * GEMV_KS + q];\n"
           "#if A_RMSNORM\n      s *= rn[row];\n#endif\n      " +
           use + "\n    }\n  }\n  barrier();\n";
  };
  for (size_t j = 0; j < P; ++j) {
    const std::string n = std::to_string(ep.products[j].n) + "u";
    s += phase("acc" + J(j), n,
               ep.products[j].stored ? "e" + J(j) + "c[batch * p.M * " + n + " + row * " + n + " + gn] = s;"
                                     : "mm_extra" + J(j) + " = s;");
  }
  s += phase("acc", "p.N", "STORE_C(batch * p.sc + row * p.ldc + gn, epilogue(s, row, gn, batch));");
  return s + "}\n";
}

}  // namespace

std::string gemv_multi(const MatmulEpilogue& epilogue, const std::string& blocks) {
  return common(epilogue, false) + kScalarInputs + product_buffers(epilogue) + blocks + kScalarAccess +
         gemv_multi_main(epilogue);
}

std::string scalar(const MatmulEpilogue& epilogue, const std::string& blocks) {
  return common(epilogue, false) + kScalarInputs + blocks + kScalarAccess + kSplit + kScalar;
}
std::string scalar_small(const MatmulEpilogue& epilogue, const std::string& blocks) {
  return common(epilogue, false) + kScalarInputs + blocks + kScalarAccess + kSplit + kScalarSmall;
}
std::string coopmat_nv(const MatmulEpilogue& epilogue, uint32_t stages, uint32_t depth, bool workgroup) {
  std::string body = kCoopmat, sets, loop;
  auto put = [](std::string& text, const std::string& key, const std::string& with) {
    text.replace(text.find(key), key.size(), with);
  };
  if (stages == 1) {
    sets = indexed_set();
    loop = workgroup ? kCoopWorkgroupLoop : kCoopOneStageLoop;
    put(loop, "@MULTIPLY@", kCoopMultiply);
  } else {
    for (uint32_t u = 0; u < depth; ++u) sets += each_set(kCoopSet, u);
    loop = coopmat_ring_loop(depth);
  }
  put(body, "@SETS@", sets);
  put(body, "@KLOOP@", loop);
  return common(epilogue, true) + kSplit + body;
}
std::string split_sum(const MatmulEpilogue& epilogue) { return common(epilogue, false) + kSplitSum; }

std::string f16_copy(uint64_t na, uint64_t nb, uint64_t b_offset) {
  const std::string pa = std::to_string((na + 1) / 2), pb = std::to_string((nb + 1) / 2);
  return "#version 450\nlayout(local_size_x = 256) in;\n"
         "layout(std430, set = 0, binding = 0) readonly buffer BufA { float a[]; };\n"
         "layout(std430, set = 0, binding = 1) readonly buffer BufB { float b[]; };\n"
         "layout(std430, set = 0, binding = 2) writeonly buffer BufS { uint s[]; };\n" +
         std::string(kRoundF16) + "const uint NA = " + std::to_string(na) + "u, NB = " + std::to_string(nb) +
         "u, PA = " + pa + "u, PB = " + pb + "u, OB = " + std::to_string(b_offset / 2) +
         "u;\n"
         "// Two elements per invocation, rounded exactly, then packed (representable values: any rounding "
         "mode).\n"
         "void main() {\n"
         "  const uint p = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + "
         "gl_LocalInvocationID.x;\n"
         "  if (p < PA) {\n"
         "    const uint i = 2u * p;\n"
         "    s[p] = packHalf2x16(vec2(round_f16(a[i]), i + 1u < NA ? round_f16(a[i + 1u]) : 0.0));\n"
         "  } else if (p < PA + PB) {\n"
         "    const uint i = 2u * (p - PA);\n"
         "    s[OB + p - PA] = packHalf2x16(vec2(round_f16(b[i]), i + 1u < NB ? round_f16(b[i + 1u]) : "
         "0.0));\n"
         "  }\n"
         "}\n";
}

}  // namespace meganeura::kernels::glsl
