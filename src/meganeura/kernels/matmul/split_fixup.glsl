// split-K's fix-up, appended after the tier's main. The workgroup learns that it is last through SPLIT_FLAG
// (of type SPLIT_FLAG_T), an element of the tier's shared tiles, dead once its products are stored: a shared
// variable of its own would push the 64 tile's 32 KiB (lavapipe's whole allowance) over the limit.
#if SPLIT_K > 1
// Groups of four consecutive outputs of a tile row an invocation sums at a time (every tier's tile width is a
// multiple of 4).
const uint SPLIT_FIX_QUADS = 4u;
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
  // SPLIT_FIX_QUADS groups an invocation at a time, all their partial loads issued before any is added: one
  // workgroup sums a whole tile, too few warps to hide L2 latency one output at a time (H100, 2026-12-07: a
  // 128 x 1536 x 576 product in six slices took 53 us with the fix-up one output at a time, where its slices
  // alone had taken 30 before the fix-up moved into the kernel, on another H100). Where N is a multiple of 4
  // every group's partials of a slice are one vec4 at a 16-byte boundary (a 64 x 64 tile in one round of
  // loads a thread); otherwise four element loads, a column past C reading the group's first.
  const uint mn = p.M * p.N, total = (gl_NumWorkGroups.z / uint(SPLIT_K)) * mn, wg = gl_WorkGroupSize.x;
  const bool vec = (p.N & 3u) == 0u;
  const uint qpr = bn / 4u, groups = bm * qpr;
  for (uint e0 = gl_LocalInvocationIndex; e0 < groups; e0 += wg * SPLIT_FIX_QUADS) {
    vec4 v[SPLIT_FIX_QUADS];
    uint row[SPLIT_FIX_QUADS], col[SPLIT_FIX_QUADS], at[SPLIT_FIX_QUADS], n[SPLIT_FIX_QUADS];
    [[unroll]] for (uint q = 0u; q < SPLIT_FIX_QUADS; ++q) {
      const uint e = e0 + q * wg;
      row[q] = m0 + e / qpr;
      col[q] = n0 + (e % qpr) * 4u;
      n[q] = e < groups && row[q] < p.M && col[q] < p.N ? min(4u, p.N - col[q]) : 0u;  // columns in C
      at[q] = n[q] > 0u ? row[q] * p.N + col[q] : m0 * p.N + n0;  // a group outside C reads the tile's first
      v[q] = vec4(0.0);
    }
#ifdef MN_UPDATE_PRELOAD  // a fused parameter update: its state loaded with the partials (codegen/optimizer.cpp)
    mn_state u[SPLIT_FIX_QUADS * 4u];
    [[unroll]] for (uint q = 0u; q < SPLIT_FIX_QUADS; ++q)
      [[unroll]] for (uint x = 0u; x < 4u; ++x)
        if (x < n[q]) u[q * 4u + x] = mn_update_load(batch * p.sc + row[q] * p.ldc + col[q] + x);
#endif
    // Slice order, as the separate pass summed.
    [[unroll]] for (uint s = 0u; s < uint(SPLIT_K); ++s)
      [[unroll]] for (uint q = 0u; q < SPLIT_FIX_QUADS; ++q) {
        const uint b = s * total + batch * mn + at[q];
        if (vec) {
          v[q] += part4[b / 4u];
        } else {
          [[unroll]] for (uint x = 0u; x < 4u; ++x) v[q][x] += part[x < n[q] ? b + x : b];
        }
      }
    [[unroll]] for (uint q = 0u; q < SPLIT_FIX_QUADS; ++q)
      [[unroll]] for (uint x = 0u; x < 4u; ++x) {
        const uint i = batch * p.sc + row[q] * p.ldc + col[q] + x;
#ifdef MN_UPDATE_PRELOAD
        if (x < n[q]) mn_update_with(i, epilogue(v[q][x], row[q], col[q] + x, batch), u[q * 4u + x]);
#else
        if (x < n[q]) STORE_C(i, epilogue(v[q][x], row[q], col[q] + x, batch));
#endif
      }
  }
}
#endif
