
// 16 x 16 threads, each a TT x TT patch of a BT x BT tile (BT = 128: 8 x 8, BK 8; BT = 64: 4 x 4, BK 32): rows
// q*64 + ty*4 + {0..3} for q < BT/64 (likewise columns), so that a warp's shared reads are broadcasts or
// contiguous vec4s. Either way each thread stages LPT x 4 elements of each operand per K tile, their loads
// issued together. LPT (scalar.cpp) is 2 for the 64 tile where the device has 32 KiB of shared memory (the two
// double-buffered tiles' size), else 1 (BK 8 / 16): SmolLM2's training step is made of short K loops (weight
// gradients over 128 tokens, split-K slices of 96), where each K tile waits one global load latency, and with
// four elements a tile the H100 ran them at 7-15 TFLOP/s (docs/performance.md).
const uint BM = BT, BN = BT, BK = LPT * 1024u / BT, TQ = BT / 64u, TT = 4u * TQ;
shared vec4 As[2][BK][BM / 4u];
shared vec4 Bs[2][BK][BN / 4u];
#define SPLIT_FLAG As[0][0][0].x  // split_fixup.glsl
#define SPLIT_FLAG_T float
#if VEC_LOADS && !defined(A_FILL) && !defined(B_FILL)
// 16-byte loads (select_matmul sets VEC_LOADS for f32 inputs, B f32 or f16, whose row starts are all on 4-element
// boundaries; an f16 B takes 8-byte loads of four halves): the
// A and B tiles are 256 LPT vec4s each, LPT a thread, along the stored matrix's contiguous dimension. A vec4 is
// either wholly inside the matrix or wholly outside, so the first element's bounds decide. Fewer load and index
// instructions per K tile (docs/performance.md).
layout(std430, set = 0, binding = 0) readonly buffer BufAV { vec4 a_v4[]; };
#if B_LOAD == 1
// f16 weights (B_LOAD 1) times f32 activations: four halves in one 8-byte load, widened as B_VALUE widens one.
layout(std430, set = 0, binding = 1) readonly buffer BufBV { uvec2 b_h4[]; };
vec4 b_vec(uint i) {
  const uvec2 w = b_h4[i];
  return vec4(mm_half_value(w.x & 0xFFFFu), mm_half_value(w.x >> 16u), mm_half_value(w.y & 0xFFFFu),
              mm_half_value(w.y >> 16u));
}
#else
layout(std430, set = 0, binding = 1) readonly buffer BufBV { vec4 b_v4[]; };
vec4 b_vec(uint i) { return b_v4[i]; }
#endif
vec4 va[LPT], vb[LPT];
void vec_a(uint l, out uint mm, out uint kk) {
  const uint i = gl_LocalInvocationIndex + 256u * l;
#if TRANS_A
  mm = (i % (BM / 4u)) * 4u; kk = i / (BM / 4u);
#else
  kk = (i % (BK / 4u)) * 4u; mm = i / (BK / 4u);
#endif
}
void vec_b(uint l, out uint kk, out uint nn) {
  const uint i = gl_LocalInvocationIndex + 256u * l;
#if TRANS_B
  kk = (i % (BK / 4u)) * 4u; nn = i / (BK / 4u);
#else
  nn = (i % (BN / 4u)) * 4u; kk = i / (BN / 4u);
#endif
}
void fetch(uint abase, uint bbase, uint m0, uint n0, uint k0) {
  [[unroll]] for (uint l = 0u; l < LPT; ++l) {
    uint mm, kk, nn, kb;
    vec_a(l, mm, kk);
#if TRANS_A
    const uint ai = abase + (k0 + kk) * p.lda + m0 + mm;
#else
    const uint ai = abase + (m0 + mm) * p.lda + k0 + kk;
#endif
    va[l] = (m0 + mm < p.M && k0 + kk < k_end) ? a_v4[ai / 4u] : vec4(0.0);
    vec_b(l, kb, nn);
#if TRANS_B
    const uint bi = bbase + (n0 + nn) * p.ldb + k0 + kb;
#else
    const uint bi = bbase + (k0 + kb) * p.ldb + n0 + nn;
#endif
    vb[l] = (k0 + kb < k_end && n0 + nn < p.N) ? b_vec(bi / 4u) : vec4(0.0);
  }
}
void stash(uint buf) {
  [[unroll]] for (uint l = 0u; l < LPT; ++l) {
    uint mm, kk, nn, kb;
    vec_a(l, mm, kk);
#if TRANS_A
    As[buf][kk][mm >> 2u] = va[l];
#else
    [[unroll]] for (uint q = 0u; q < 4u; ++q) As[buf][kk + q][mm >> 2u][mm & 3u] = va[l][q];
#endif
    vec_b(l, kb, nn);
#if TRANS_B
    [[unroll]] for (uint q = 0u; q < 4u; ++q) Bs[buf][kb + q][nn >> 2u][nn & 3u] = vb[l][q];
#else
    Bs[buf][kb][nn >> 2u] = vb[l];
#endif
  }
}
#else
float ra[4u * LPT], rb[4u * LPT];

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
  [[unroll]] for (uint i = 0u; i < 4u * LPT; ++i) {
    uint mm, kk, nn, kb;
    tile_a(i, mm, kk);
    ra[i] = (m0 + mm < p.M && k0 + kk < k_end) ? A_at(abase, m0 + mm, k0 + kk) : 0.0;
    tile_b(i, kb, nn);
    rb[i] = (k0 + kb < k_end && n0 + nn < p.N) ? B_at(bbase, k0 + kb, n0 + nn) : 0.0;
  }
}
void stash(uint buf) {
  [[unroll]] for (uint i = 0u; i < 4u * LPT; ++i) {
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
  const uint cbase = MM_DST_BASE;
  // Each element stored by a statement of its own (scalar.cpp writes MM_STORE_TILE): as a loop, an epilogue
  // that reads other buffers left the loop rolled on the H100, acc indexed at run time and so in local
  // memory (256 bytes a thread) for the whole K loop: 15-20x slower (docs/performance.md).
#if !(SPLIT_K > 1) && defined(MM_STORE_TILE_PRELOAD)
  MM_STORE_TILE_PRELOAD
#else
  MM_STORE_TILE
#endif
#if SPLIT_K > 1
  split_fixup(m0, n0, BM, BN, batch);
#endif
}
