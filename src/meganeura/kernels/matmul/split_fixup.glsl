// split-K's fix-up, appended after the tier's main. The workgroup learns that it is last through SPLIT_FLAG
// (of type SPLIT_FLAG_T), an element of the tier's shared tiles, dead once its products are stored: a shared
// variable of its own would push the 64 tile's 32 KiB (lavapipe's whole allowance) over the limit.
#if SPLIT_K > 1
// The fix-up of a split product, called by every invocation after its tile's partial stores (the
// "threadfence reduction" pattern): each invocation's stores are made visible device-wide before the
// workgroup takes its ticket, and the workgroup that takes the last one adds the tile's SPLIT_K partials of
// each output in slice order (the same sums, in the same order, as a separate summing pass: deterministic),
// then applies the epilogue. No workgroup waits for another, so any dispatch order is safe.
void split_fixup(uint m0, uint n0, uint bm, uint bn, uint batch) {
  memoryBarrierBuffer();
  barrier();
  if (gl_LocalInvocationIndex == 0u) {
    const uint t = (batch * gl_NumWorkGroups.y + gl_WorkGroupID.y) * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    const bool last = atomicAdd(ticket[t], 1u) == uint(SPLIT_K) - 1u;
    if (last) ticket[t] = 0u;  // the next dispatch to use it follows a pipeline barrier
    SPLIT_FLAG = SPLIT_FLAG_T(last);
  }
  barrier();
  if (SPLIT_FLAG == SPLIT_FLAG_T(0)) return;
  memoryBarrierBuffer();
  const uint mn = p.M * p.N, total = (gl_NumWorkGroups.z / uint(SPLIT_K)) * mn;
  for (uint e = gl_LocalInvocationIndex; e < bm * bn; e += gl_WorkGroupSize.x) {
    const uint row = m0 + e / bn, col = n0 + e % bn;
    if (row >= p.M || col >= p.N) continue;
    const uint at = batch * mn + row * p.N + col;
    float v = 0.0;
    [[unroll]] for (uint s = 0u; s < uint(SPLIT_K); ++s) v += part[s * total + at];
    STORE_C(batch * p.sc + row * p.ldc + col, epilogue(v, row, col, batch));
  }
}
#endif
