uvec4 ra@[A_VPT], rb@[B_VPT];
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
