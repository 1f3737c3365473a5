// split-K's fix-up, appended after the tier's main. The workgroup learns that it is last through SPLIT_FLAG
// (of type SPLIT_FLAG_T), an element of the tier's shared tiles, dead once its products are stored: a shared
// variable of its own would push the 64 tile's 32 KiB (lavapipe's whole allowance) over the limit.
#if SPLIT_K > 1
const uint SPLIT_FIX_BATCH = 8u;  // outputs an invocation sums at a time (split_fixup, below)
// The fix-up of a split product, called by every invocation after its tile's partial stores (the
// "threadfence reduction" pattern): each invocation's stores are made visible device-wide before the
// workgroup takes its ticket, and the workgroup that takes the last one adds the tile's SPLIT_K partials of
// each output in slice order (the same sums, in the same order, as a separate summing pass: deterministic),
// then applies the epilogue. No workgroup waits for another, so any dispatch order is safe.
const uint SPLIT_FIX_QUADS = 4u;  // groups of four outputs an invocation sums at a time (split_fixup4)
// The fix-up where N is a multiple of 4: partials loaded as vec4s (four consecutive outputs of a row, every
// slice's at a 16-byte boundary), SPLIT_FIX_QUADS of them an invocation at a time, so that a 64 x 64 tile is
// summed in one round of loads a thread instead of two rounds of eight scalar loads per slice. The same sums
// in the same slice order as the scalar path, component by component.
void split_fixup4(uint m0, uint n0, uint bm, uint bn, uint batch, uint mn, uint total, uint wg) {
  const uint qpr = bn / 4u, quads = bm * qpr;
  for (uint e0 = gl_LocalInvocationIndex; e0 < quads; e0 += wg * SPLIT_FIX_QUADS) {
    vec4 v[SPLIT_FIX_QUADS];
    uint row[SPLIT_FIX_QUADS], col[SPLIT_FIX_QUADS];
    bool in_c[SPLIT_FIX_QUADS];
    [[unroll]] for (uint q = 0u; q < SPLIT_FIX_QUADS; ++q) {
      const uint e = e0 + q * wg;
      row[q] = m0 + e / qpr;
      col[q] = n0 + (e % qpr) * 4u;
      in_c[q] = e < quads && row[q] < p.M && col[q] < p.N;  // N % 4 == 0: then all four columns are in C
      v[q] = vec4(0.0);
    }
#ifdef MN_UPDATE_PRELOAD
    mn_state u[SPLIT_FIX_QUADS * 4u];
    [[unroll]] for (uint q = 0u; q < SPLIT_FIX_QUADS; ++q)
      [[unroll]] for (uint x = 0u; x < 4u; ++x)
        if (in_c[q]) u[q * 4u + x] = mn_update_load(batch * p.sc + row[q] * p.ldc + col[q] + x);
#endif
    [[unroll]] for (uint s = 0u; s < uint(SPLIT_K); ++s)
      [[unroll]] for (uint q = 0u; q < SPLIT_FIX_QUADS; ++q)
        v[q] += part4[(s * total + batch * mn + (in_c[q] ? row[q] * p.N + col[q] : m0 * p.N + n0)) / 4u];
    [[unroll]] for (uint q = 0u; q < SPLIT_FIX_QUADS; ++q)
      [[unroll]] for (uint x = 0u; x < 4u; ++x) {
        const uint i = batch * p.sc + row[q] * p.ldc + col[q] + x;
#ifdef MN_UPDATE_PRELOAD
        if (in_c[q]) mn_update_with(i, epilogue(v[q][x], row[q], col[q] + x, batch), u[q * 4u + x]);
#else
        if (in_c[q]) STORE_C(i, epilogue(v[q][x], row[q], col[q] + x, batch));
#endif
      }
  }
}

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
  // SPLIT_FIX_BATCH outputs an invocation at a time, all their partial loads issued before any is added: one
  // workgroup sums a whole tile, too few warps to hide L2 latency one output at a time (H100, 2026-12-07: a
  // 128 x 1536 x 576 product in six slices took 53 us with the fix-up one output at a time, where its slices
  // alone had taken 30 before the fix-up moved into the kernel, on another H100).
  const uint mn = p.M * p.N, total = (gl_NumWorkGroups.z / uint(SPLIT_K)) * mn, wg = gl_WorkGroupSize.x;
  // Two paths, not one: a single loop of four-output groups for both (a vec4 or four element loads a group)
  // made the SmolLM2 step's split products 1.6x slower on the H100 (performance.md, twelfth session).
  if ((p.N & 3u) == 0u && (bn & 3u) == 0u) {
    split_fixup4(m0, n0, bm, bn, batch, mn, total, wg);
    return;
  }
  for (uint e0 = gl_LocalInvocationIndex; e0 < bm * bn; e0 += wg * SPLIT_FIX_BATCH) {
    float v[SPLIT_FIX_BATCH];
    uint row[SPLIT_FIX_BATCH], col[SPLIT_FIX_BATCH];
    bool in_c[SPLIT_FIX_BATCH];
    [[unroll]] for (uint q = 0u; q < SPLIT_FIX_BATCH; ++q) {
      const uint e = e0 + q * wg;
      row[q] = m0 + e / bn;
      col[q] = n0 + e % bn;
      in_c[q] = e < bm * bn && row[q] < p.M && col[q] < p.N;
      v[q] = 0.0;
    }
#ifdef MN_UPDATE_PRELOAD  // a fused parameter update: its state loaded with the partials (codegen/optimizer.cpp)
    mn_state u[SPLIT_FIX_BATCH];
    [[unroll]] for (uint q = 0u; q < SPLIT_FIX_BATCH; ++q)
      if (in_c[q]) u[q] = mn_update_load(batch * p.sc + row[q] * p.ldc + col[q]);
#endif
    // Slice order, as the separate pass summed. An output outside the product reads the tile's first one.
    [[unroll]] for (uint s = 0u; s < uint(SPLIT_K); ++s)
      [[unroll]] for (uint q = 0u; q < SPLIT_FIX_BATCH; ++q)
        v[q] += part[s * total + batch * mn + (in_c[q] ? row[q] * p.N + col[q] : m0 * p.N + n0)];
    [[unroll]] for (uint q = 0u; q < SPLIT_FIX_BATCH; ++q)
#ifdef MN_UPDATE_PRELOAD
      if (in_c[q]) mn_update_with(batch * p.sc + row[q] * p.ldc + col[q], epilogue(v[q], row[q], col[q], batch), u[q]);
#else
      if (in_c[q]) STORE_C(batch * p.sc + row[q] * p.ldc + col[q], epilogue(v[q], row[q], col[q], batch));
#endif
  }
}
#endif
