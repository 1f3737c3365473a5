
// A_LOAD / B_LOAD (MatmulLoad): 0 the element type ELEM; 1 f16 and 2 bf16 held as uint16_t and widened by
// integer arithmetic (exact, subnormals kept, whatever the driver's conversions do); 3 and above GGUF blocks held
// as 32-bit words, element i dequantized by mnq_a(i) / mnq_b(i) (quant/glsl.hpp, defined after these buffers).
#ifndef A_LOAD
#define A_LOAD 0
#endif
#ifndef B_LOAD
#define B_LOAD 0
#endif
float mm_half_value(uint h) {
  const uint s = (h & 0x8000u) << 16u, e = (h >> 10u) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0u) return uintBitsToFloat(s | floatBitsToUint(float(m) * 5.9604644775390625e-08));
  return uintBitsToFloat(s | (e == 31u ? 0x7F800000u : (e + 112u) << 23u) | (m << 13u));
}
#if A_LOAD == 0
layout(std430, set = 0, binding = 0) readonly buffer BufA { ELEM a[]; };
#define A_VALUE(i) to_in(a[i])
#elif A_LOAD >= 3
layout(std430, set = 0, binding = 0) readonly buffer BufA { uint a[]; };
#define A_VALUE(i) to_in(mnq_a(i))
#else
layout(std430, set = 0, binding = 0) readonly buffer BufA { uint16_t a[]; };
#if A_LOAD == 1
#define A_VALUE(i) to_in(mm_half_value(uint(a[i])))
#else
#define A_VALUE(i) to_in(uintBitsToFloat(uint(a[i]) << 16u))
#endif
#endif
#if B_LOAD == 0
layout(std430, set = 0, binding = 1) readonly buffer BufB { ELEM b[]; };
#define B_VALUE(i) to_in(b[i])
#elif B_LOAD >= 3
layout(std430, set = 0, binding = 1) readonly buffer BufB { uint b[]; };
#define B_VALUE(i) to_in(mnq_b(i))
#else
layout(std430, set = 0, binding = 1) readonly buffer BufB { uint16_t b[]; };
#if B_LOAD == 1
#define B_VALUE(i) to_in(mm_half_value(uint(b[i])))
#else
#define B_VALUE(i) to_in(uintBitsToFloat(uint(b[i]) << 16u))
#endif
#endif
