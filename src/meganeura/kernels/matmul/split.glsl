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
// The same partials four at a time, for the fix-up's loads where every row starts on a 4-element boundary.
layout(std430, set = 0, binding = SPLIT_PART) coherent buffer BufPart4 { vec4 part4[]; };
// One counter a tile (batch x tile-rows x tile-columns), zero between dispatches: the workgroup that arrives
// last at its tile sums the slices and puts the count back to zero.
layout(std430, set = 0, binding = SPLIT_TICKET) coherent buffer BufTicket { uint ticket[]; };
#define MM_DST part
#define MM_DST_BASE (gl_WorkGroupID.z * p.M * p.N)
#define MM_DST_LD p.N
#define MM_PUT(i, row, col, v) part[i] = (v)
// Defined after the tier's main (split_fixup.glsl): it takes its flag from the tier's shared tiles.
void split_fixup(uint m0, uint n0, uint bm, uint bn, uint batch);
#else
#define MM_DST c
#define MM_DST_BASE (gl_WorkGroupID.z * p.sc)
#define MM_DST_LD p.ldc
#define MM_PUT(i, row, col, v) STORE_C(i, epilogue(v, row, col, batch))
#endif
