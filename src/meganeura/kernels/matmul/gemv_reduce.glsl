
// The GEMV's sums of each output column's GEMV_KS lane partials (one per K slice), for up to MMAX rows and
// GEMV_SLOTS weights. GEMV_SG (a device whose subgroups, with arithmetic, are at most GEMV_KS wide, and x·Wᵀ):
// lanes are numbered subgroup by subgroup (gemv_lane), so a column's slices are whole subgroups, subgroupAdd
// sums them and shared memory holds one partial a subgroup (one a column on 32-wide subgroups). Otherwise
// every lane's partial goes through shared memory and one thread adds a column's GEMV_KS of them in order.
// The H100's decode spent 1.2 ms a token in 121 GEMV passes whose RMSNorm prologue summed 256 partials in
// one thread.
#ifndef GEMV_SG
#define GEMV_SG 0
#endif
#if GEMV_SG
const uint GEMV_PART = 64u;  // partials a row and slot: 256 lanes in subgroups of at least 4
uint gemv_lane() { return gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID; }
#else
const uint GEMV_PART = 256u;
uint gemv_lane() { return gl_LocalInvocationIndex; }
#endif
shared float gemv_red[GEMV_SLOTS * MMAX * GEMV_PART];

// Slot `slot`'s partial sums of this lane, the `idx`-th of the workgroup (column idx / GEMV_KS, slice
// idx % GEMV_KS); gemv_total reads them after a barrier().
void gemv_put(uint slot, float acc[MMAX], uint idx) {
  [[unroll]] for (uint i = 0u; i < MMAX; ++i) {
    if (i < p.M) {
#if GEMV_SG
      const float s = subgroupAdd(acc[i]);
      if (gl_SubgroupInvocationID == 0u) gemv_red[(slot * MMAX + i) * GEMV_PART + gl_SubgroupID] = s;
#else
      gemv_red[(slot * MMAX + i) * GEMV_PART + idx] = acc[i];
#endif
    }
  }
}

// Row `row`'s sum for the workgroup's column `col` (0 .. GEMV_NT - 1).
float gemv_total(uint slot, uint row, uint col) {
#if GEMV_SG
  const uint per = GEMV_KS / gl_SubgroupSize;
#else
  const uint per = GEMV_KS;
#endif
  const uint base = (slot * MMAX + row) * GEMV_PART + col * per;
  float s = 0.0;
  for (uint q = 0u; q < per; ++q) s += gemv_red[base + q];
  return s;
}
