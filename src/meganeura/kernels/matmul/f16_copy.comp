#version 450
#define B_LOAD @B_LOAD@
#if B_LOAD == 1 || B_LOAD == 2
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_16bit_storage : require
#endif
layout(local_size_x = 256) in;
// B_LOAD (MatmulLoad): 0 f32 rounded to f16; 1 f16, copied bit for bit; 2 bf16 widened, then rounded; 3 and
// above GGUF blocks in 32-bit words, element i dequantized by mnq_b(i) (quant/glsl.hpp), then rounded.
layout(std430, set = 0, binding = 0) readonly buffer BufA { float a[]; };
#if B_LOAD == 0
layout(std430, set = 0, binding = 1) readonly buffer BufB { float b[]; };
#elif B_LOAD >= 3
layout(std430, set = 0, binding = 1) readonly buffer BufB { uint b[]; };
#else
layout(std430, set = 0, binding = 1) readonly buffer BufB { uint16_t b[]; };
#endif
layout(std430, set = 0, binding = 2) writeonly buffer BufS { uint s[]; };
@ROUND_F16@const uint NA = @NA@u, NB = @NB@u, PA = @PA@u, PB = @PB@u, OB = @OB@u;
@BLOCKS@
#if B_LOAD == 0
float b_value(uint i) { return round_f16(b[i]); }
#elif B_LOAD == 2
float b_value(uint i) { return round_f16(uintBitsToFloat(uint(b[i]) << 16u)); }
#elif B_LOAD >= 3
float b_value(uint i) { return round_f16(mnq_b(i)); }
#endif
// Two elements per invocation, rounded exactly, then packed (representable values: any rounding mode).
void main() {
  const uint p = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (p < PA) {
    const uint i = 2u * p;
    s[p] = packHalf2x16(vec2(round_f16(a[i]), i + 1u < NA ? round_f16(a[i + 1u]) : 0.0));
  } else if (p < PA + PB) {
    const uint i = 2u * (p - PA);
#if B_LOAD == 1
    s[OB + p - PA] = uint(b[i]) | (i + 1u < NB ? uint(b[i + 1u]) << 16u : 0u);
#else
    s[OB + p - PA] = packHalf2x16(vec2(b_value(i), i + 1u < NB ? b_value(i + 1u) : 0.0));
#endif
  }
}
