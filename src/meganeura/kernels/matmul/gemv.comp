
// Threads split into GEMV_NT output columns x GEMV_KS slices of K (GEMV_NT 8, or 4 or 2 for x·Wᵀ products too
// narrow to give every compute unit a workgroup; gemv_pass). With B stored N x K (TRANS_B) the K slices are
// adjacent lanes, otherwise the columns are: either way consecutive lanes read consecutive addresses (with B
// stored K x N, eight lanes read one 32-byte sector of a row). Few columns a workgroup: each lane's K loop is
// K / GEMV_KS dependent loads long, and 64 columns a workgroup made a 576-wide layer 9 workgroups of K / 4
// loads each. Partial sums: gemv_reduce.glsl.
void main() {
  const uint tid = gemv_lane();
#if TRANS_B
  const uint nl = tid / GEMV_KS, ks = tid % GEMV_KS;
#else
#if GEMV_SG
#error "GEMV_SG needs x·Wᵀ: a column's K slices must be adjacent lanes"
#endif
  const uint nl = tid % GEMV_NT, ks = tid / GEMV_NT;
#endif
  const uint batch = gl_WorkGroupID.z;
  const uint n = gl_WorkGroupID.x * GEMV_NT + nl;
  const uint abase = a_base(batch), bbase = b_base(batch);
  float acc[MMAX];
  [[unroll]] for (uint i = 0u; i < MMAX; ++i) acc[i] = 0.0;
#if (B_LOAD >= 3 || defined(GEMV_VEC8)) && TRANS_B && !defined(B_FILL)
  // A weight row of GGUF blocks (K a multiple of the block), or of f32/f16/bf16 values in groups of eight
  // (GEMV_VEC8): each lane reads eight values at a time, lanes of a column take consecutive groups, so that a
  // column's row is read once and in order.
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
  gemv_put(0u, acc, nl * GEMV_KS + ks);
  barrier();
  const uint t = gl_LocalInvocationIndex;
  if (t < GEMV_NT * MMAX) {
    const uint col = t % GEMV_NT, row = t / GEMV_NT;
    const uint gn = gl_WorkGroupID.x * GEMV_NT + col;
    if (row < p.M && gn < p.N) STORE_C(batch * p.sc + row * p.ldc + gn, epilogue(gemv_total(0u, row, col), row, gn, batch));
  }
}
