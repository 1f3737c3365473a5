
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
#define SPLIT_FLAG As[0].x  // split_fixup.glsl
#define SPLIT_FLAG_T uint
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
@KLOOP@  const uint cbase = MM_DST_BASE;
#if WG_SCOPE
  coopMatStoreNV(wacc, MM_DST, cbase + m0 * MM_DST_LD + n0, MM_DST_LD, false);
#else
  [[unroll]] for (uint i = 0u; i < TM; ++i) [[unroll]] for (uint j = 0u; j < TN; ++j) {
    const uint row = m0 + wm * WTM + i * 16u, col = n0 + wn * WTN + j * 8u;
#if DIRECT_STORE
    if (row + 16u <= p.M && col + 8u <= p.N) {
      coopMatStoreNV(acc[i][j], MM_DST, cbase + row * MM_DST_LD + col, MM_DST_LD, false);
      continue;
    }
#endif
    // Edges and epilogues go through shared memory, where each element's coordinates are known.
    coopMatStoreNV(acc[i][j], Cs, sg * 128u, 8u, false);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
#if !(SPLIT_K > 1) && defined(MN_UPDATE_PRELOAD)
    // A fused parameter update: the four elements' state loaded before any is updated (codegen/optimizer.cpp).
    mn_state u[4];
    [[unroll]] for (uint q = 0u; q < 4u; ++q) {
      const uint e = lane + 32u * q, r = row + e / 8u, cc = col + e % 8u;
      if (r < p.M && cc < p.N) u[q] = mn_update_load(cbase + r * p.ldc + cc);
    }
    [[unroll]] for (uint q = 0u; q < 4u; ++q) {
      const uint e = lane + 32u * q, r = row + e / 8u, cc = col + e % 8u;
      if (r < p.M && cc < p.N) mn_update_with(cbase + r * p.ldc + cc, epilogue(Cs[sg * 128u + e], r, cc, batch), u[q]);
    }
#else
    [[unroll]] for (uint q = 0u; q < 4u; ++q) {
      const uint e = lane + 32u * q, r = row + e / 8u, cc = col + e % 8u;
      if (r < p.M && cc < p.N) MM_PUT(cbase + r * MM_DST_LD + cc, r, cc, Cs[sg * 128u + e]);
    }
#endif
    subgroupBarrier();
  }
#endif
#if SPLIT_K > 1
  split_fixup(m0, n0, BM, BN, batch);
#endif
}
