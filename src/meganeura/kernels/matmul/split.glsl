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

// Where a tile's results go. Unsplit: through the epilogue into C. Split: raw into this slice's partial products
// (binding SPLIT_PART, [slice][batch][M][N], the workgroup's z is slice x batches + batch), which
// split_fixup() then sums.
#if SPLIT_K > 1
layout(std430, set = 0, binding = SPLIT_PART) coherent buffer BufPart { float part[]; };
// One counter a tile (batch x tile-rows x tile-columns), zero between dispatches: the workgroup that arrives
// last at its tile sums the slices and puts the count back to zero.
layout(std430, set = 0, binding = SPLIT_TICKET) coherent buffer BufTicket { uint ticket[]; };
#define MM_DST part
#define MM_DST_BASE (gl_WorkGroupID.z * p.M * p.N)
#define MM_DST_LD p.N
#define MM_PUT(i, row, col, v) part[i] = (v)
shared bool mm_last;
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
    mm_last = atomicAdd(ticket[t], 1u) == uint(SPLIT_K) - 1u;
    if (mm_last) ticket[t] = 0u;  // the next dispatch to use it follows a pipeline barrier
  }
  barrier();
  if (!mm_last) return;
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
#else
#define MM_DST c
#define MM_DST_BASE (gl_WorkGroupID.z * p.sc)
#define MM_DST_LD p.ldc
#define MM_PUT(i, row, col, v) STORE_C(i, epilogue(v, row, col, batch))
#endif
