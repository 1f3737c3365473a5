
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
