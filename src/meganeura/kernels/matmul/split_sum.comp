
// The summing pass of split-K: one thread per output element adds its SPLIT_K partial products in slice order
// (deterministic) and applies the epilogue. Partials are [slice][batch][M][N]; the grid covers batch x M x N
// elements flat over x and y.
layout(std430, set = 0, binding = 0) readonly buffer BufP { float part[]; };
void main() {
  const uint mn = p.M * p.N, total = gl_NumWorkGroups.z * mn;
  const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationIndex;
  if (i >= mn) return;
  const uint batch = gl_WorkGroupID.z, at = batch * mn + i;
  float v = 0.0;
  [[unroll]] for (uint s = 0u; s < uint(SPLIT_K); ++s) v += part[s * total + at];
  const uint row = i / p.N, col = i % p.N;
  STORE_C(batch * p.sc + row * p.ldc + col, epilogue(v, row, col, batch));
}
