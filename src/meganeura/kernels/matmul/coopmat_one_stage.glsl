
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
