
  for (uint t = 0u; t < tiles; ++t) {
    fetch(0u, abase, bbase, m0, n0, kb + t * BK);
    barrier();
    stash(0u, 0u);
    barrier();
    const uint cur = 0u;
@MULTIPLY@
  }
