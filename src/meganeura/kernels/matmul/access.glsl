
// Elements of op(A) (M x K) and op(B) (K x N) at logical coordinates; the caller checks bounds. A_FILL / B_FILL
// (defined by the code generator for an operand that is a constant fill, which has no storage): that value.
#ifdef A_FILL
float A_at(uint base, uint m, uint k) { return to_in(A_FILL); }
#else
float A_at(uint base, uint m, uint k) {
#if TRANS_A
  return A_VALUE(base + k * p.lda + m);
#else
  return A_VALUE(base + m * p.lda + k);
#endif
}
#endif
#ifdef B_FILL
float B_at(uint base, uint k, uint n) { return to_in(B_FILL); }
#else
float B_at(uint base, uint k, uint n) {
#if TRANS_B
  return B_VALUE(base + n * p.ldb + k);
#else
  return B_VALUE(base + k * p.ldb + n);
#endif
}
#endif
