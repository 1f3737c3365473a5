float round_f16(float x) {
  if (isnan(x)) return x;
  if (abs(x) < 6.103515625e-05) return roundEven(x * 16777216.0) * 5.9604644775390625e-08;
  const uint u = floatBitsToUint(x);
  const float r = uintBitsToFloat((u + 0x0FFFu + ((u >> 13u) & 1u)) & 0xFFFFE000u);
  return abs(r) > 65504.0 ? uintBitsToFloat((u & 0x80000000u) | 0x7F800000u) : r;
}
