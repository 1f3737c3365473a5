
// 16 x 16 threads, one output each, over a 16 x 16 tile: for outputs too small to occupy a GPU with 128 x 128
// tiles. Staging puts the stored matrix's contiguous dimension across adjacent threads.
const uint BT = 16u;
shared float As[BT][BT + 1u];  // [k][m]
shared float Bs[BT][BT + 1u];  // [k][n]
#define SPLIT_FLAG As[0][0]    // split_fixup.glsl
#define SPLIT_FLAG_T float
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
  if (row < p.M && col < p.N) MM_PUT(MM_DST_BASE + row * MM_DST_LD + col, row, col, acc);
#if SPLIT_K > 1
  split_fixup(m0, n0, BT, BT, batch);
#endif
}
