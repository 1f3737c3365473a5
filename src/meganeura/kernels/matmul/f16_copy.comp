#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer BufA { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer BufS { uint s[]; };
@ROUND_F16@const uint NA = @NA@u, NB = @NB@u, PA = @PA@u, PB = @PB@u, OB = @OB@u;
// Two elements per invocation, rounded exactly, then packed (representable values: any rounding mode).
void main() {
  const uint p = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (p < PA) {
    const uint i = 2u * p;
    s[p] = packHalf2x16(vec2(round_f16(a[i]), i + 1u < NA ? round_f16(a[i + 1u]) : 0.0));
  } else if (p < PA + PB) {
    const uint i = 2u * (p - PA);
    s[OB + p - PA] = packHalf2x16(vec2(round_f16(b[i]), i + 1u < NB ? round_f16(b[i + 1u]) : 0.0));
  }
}
