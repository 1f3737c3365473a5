#include "meganeura/quant/glsl.hpp"

#include "meganeura/core/error.hpp"

namespace meganeura::quant {

namespace {

// Replaces every '@' by the function name and every '$' by the array.
std::string fill(const char* text, const std::string& fn, const std::string& words) {
  std::string out;
  for (const char* c = text; *c; ++c) {
    if (*c == '@')
      out += fn;
    else if (*c == '$')
      out += words;
    else
      out += *c;
  }
  return out;
}

// Bytes and f16 fields of the word array. f16 widened by integer arithmetic (exact, subnormals kept, whatever
// the driver's conversions do).
const char* kHelpers = R"(uint @_byte(uint o) { return ($[o >> 2u] >> ((o & 3u) << 3u)) & 0xFFu; }
float @_h16(uint h) {
  const uint s = (h & 0x8000u) << 16u, e = (h >> 10u) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0u) return uintBitsToFloat(s | floatBitsToUint(float(m) * 5.9604644775390625e-08));
  return uintBitsToFloat(s | (e == 31u ? 0x7F800000u : (e + 112u) << 23u) | (m << 13u));
}
float @_half(uint o) { return @_h16(($[o >> 2u] >> ((o & 2u) << 3u)) & 0xFFFFu); }
uint @_u32(uint o) {
  const uint s = (o & 3u) << 3u, w = $[o >> 2u];
  return s == 0u ? w : (w >> s) | ($[(o >> 2u) + 1u] << (32u - s));
}
)";

// One function body per type: `b` the block, `j` the element within it, `o` the block's first byte.
const char* kQ8_0 = R"(float @(uint i) {
  const uint o = (i / 32u) * 34u, j = i % 32u;
  const float d = @_half(o);
  precise float y = float(int(@_byte(o + 2u + j) << 24u) >> 24) * d;
  return y;
}
)";
const char* kQ4_0 = R"(float @(uint i) {
  const uint o = (i / 32u) * 18u, j = i % 32u;
  const float d = @_half(o);
  const uint q = (@_byte(o + 2u + j % 16u) >> (4u * (j / 16u))) & 15u;
  precise float y = d * float(int(q) - 8);
  return y;
}
)";
const char* kQ4_1 = R"(float @(uint i) {
  const uint o = (i / 32u) * 20u, j = i % 32u;
  const float d = @_half(o), m = @_half(o + 2u);
  const uint q = (@_byte(o + 4u + j % 16u) >> (4u * (j / 16u))) & 15u;
  precise float y = d * float(q) + m;
  return y;
}
)";
const char* kQ5_0 = R"(float @(uint i) {
  const uint o = (i / 32u) * 22u, j = i % 32u;
  const float d = @_half(o);
  const uint h = (@_byte(o + 2u + j / 8u) >> (j % 8u)) & 1u;
  const uint q = ((@_byte(o + 6u + j % 16u) >> (4u * (j / 16u))) & 15u) | (h << 4u);
  precise float y = d * float(int(q) - 16);
  return y;
}
)";
const char* kQ5_1 = R"(float @(uint i) {
  const uint o = (i / 32u) * 24u, j = i % 32u;
  const float d = @_half(o), m = @_half(o + 2u);
  const uint h = (@_byte(o + 4u + j / 8u) >> (j % 8u)) & 1u;
  const uint q = ((@_byte(o + 8u + j % 16u) >> (4u * (j / 16u))) & 15u) | (h << 4u);
  precise float y = d * float(q) + m;
  return y;
}
)";
// Q4_K and Q5_K: the 6-bit scale and minimum of sub-block s (k_scale_min), from the scales at byte o + 4.
const char* kScaleMin = R"(void @_scale_min(uint o, uint s, out uint sc, out uint mn) {
  if (s < 4u) {
    sc = @_byte(o + 4u + s) & 63u;
    mn = @_byte(o + 8u + s) & 63u;
  } else {
    sc = (@_byte(o + 8u + s) & 15u) | ((@_byte(o + s) >> 6u) << 4u);
    mn = (@_byte(o + 8u + s) >> 4u) | ((@_byte(o + 4u + s) >> 6u) << 4u);
  }
}
)";
const char* kQ4_K = R"(float @(uint i) {
  const uint o = (i / 256u) * 144u, j = i % 256u, s = j / 32u, l = j % 32u;
  const float d = @_half(o), dmin = @_half(o + 2u);
  uint sc, mn;
  @_scale_min(o, s, sc, mn);
  const uint q = (@_byte(o + 16u + 32u * (s / 2u) + l) >> (4u * (s % 2u))) & 15u;
  precise float ds = d * float(sc);
  precise float y = ds * float(q) - dmin * float(mn);
  return y;
}
)";
const char* kQ5_K = R"(float @(uint i) {
  const uint o = (i / 256u) * 176u, j = i % 256u, s = j / 32u, l = j % 32u;
  const float d = @_half(o), dmin = @_half(o + 2u);
  uint sc, mn;
  @_scale_min(o, s, sc, mn);
  const uint q = ((@_byte(o + 48u + 32u * (s / 2u) + l) >> (4u * (s % 2u))) & 15u) |
                 (((@_byte(o + 16u + l) >> s) & 1u) << 4u);
  precise float ds = d * float(sc);
  precise float y = ds * float(q) - dmin * float(mn);
  return y;
}
)";
const char* kQ6_K = R"(float @(uint i) {
  const uint o = (i / 256u) * 210u, j = i % 256u, h = j / 128u, t = (j % 128u) / 32u, l = j % 32u;
  const float d = @_half(o + 208u);
  const uint q = ((@_byte(o + 64u * h + 32u * (t % 2u) + l) >> (4u * (t / 2u))) & 15u) |
                 (((@_byte(o + 128u + 32u * h + l) >> (2u * t)) & 3u) << 4u);
  const int sc = int(@_byte(o + 192u + j / 16u) << 24u) >> 24;
  precise float ds = d * float(sc);
  precise float y = ds * float(int(q) - 32);
  return y;
}
)";

// Eight consecutive elements (i a multiple of 8: within one block and one sub-block), the GEMV's and the f16
// copy's load: the block's scales read once and the quants as two 32-bit words, with each value formed by the
// element function's arithmetic (so the same bits). Element by element, a Q4_1 group was 24 word loads
// instead of 3 (the driver cannot see that i + t stays in i's block) and Q4_1 decode ran slower than f32's.
const char* kQ8_0_8 = R"(void @_8(uint i, out float v[8]) {
  const uint o = (i / 32u) * 34u, j = i % 32u;
  const float d = @_half(o);
  const uint w[2] = uint[2](@_u32(o + 2u + j), @_u32(o + 6u + j));
  for (uint t = 0u; t < 8u; ++t) {
    precise float y = float(int(w[t / 4u] << (24u - 8u * (t % 4u))) >> 24) * d;
    v[t] = y;
  }
}
)";
const char* kQ4_0_8 = R"(void @_8(uint i, out float v[8]) {
  const uint o = (i / 32u) * 18u, j = i % 32u, sh = 4u * (j / 16u);
  const float d = @_half(o);
  const uint w[2] = uint[2](@_u32(o + 2u + j % 16u), @_u32(o + 6u + j % 16u));
  for (uint t = 0u; t < 8u; ++t) {
    const uint q = (w[t / 4u] >> (8u * (t % 4u) + sh)) & 15u;
    precise float y = d * float(int(q) - 8);
    v[t] = y;
  }
}
)";
const char* kQ4_1_8 = R"(void @_8(uint i, out float v[8]) {
  const uint o = (i / 32u) * 20u, j = i % 32u, sh = 4u * (j / 16u);
  const float d = @_half(o), m = @_half(o + 2u);
  const uint w[2] = uint[2](@_u32(o + 4u + j % 16u), @_u32(o + 8u + j % 16u));
  for (uint t = 0u; t < 8u; ++t) {
    const uint q = (w[t / 4u] >> (8u * (t % 4u) + sh)) & 15u;
    precise float y = d * float(q) + m;
    v[t] = y;
  }
}
)";
const char* kQ5_0_8 = R"(void @_8(uint i, out float v[8]) {
  const uint o = (i / 32u) * 22u, j = i % 32u, sh = 4u * (j / 16u);
  const float d = @_half(o);
  const uint qh = @_u32(o + 2u);
  const uint w[2] = uint[2](@_u32(o + 6u + j % 16u), @_u32(o + 10u + j % 16u));
  for (uint t = 0u; t < 8u; ++t) {
    const uint q = ((w[t / 4u] >> (8u * (t % 4u) + sh)) & 15u) | (((qh >> (j + t)) & 1u) << 4u);
    precise float y = d * float(int(q) - 16);
    v[t] = y;
  }
}
)";
const char* kQ5_1_8 = R"(void @_8(uint i, out float v[8]) {
  const uint o = (i / 32u) * 24u, j = i % 32u, sh = 4u * (j / 16u);
  const float d = @_half(o), m = @_half(o + 2u);
  const uint qh = @_u32(o + 4u);
  const uint w[2] = uint[2](@_u32(o + 8u + j % 16u), @_u32(o + 12u + j % 16u));
  for (uint t = 0u; t < 8u; ++t) {
    const uint q = ((w[t / 4u] >> (8u * (t % 4u) + sh)) & 15u) | (((qh >> (j + t)) & 1u) << 4u);
    precise float y = d * float(q) + m;
    v[t] = y;
  }
}
)";
const char* kQ4_K_8 = R"(void @_8(uint i, out float v[8]) {
  const uint o = (i / 256u) * 144u, j = i % 256u, s = j / 32u, l = j % 32u, sh = 4u * (s % 2u);
  const float d = @_half(o), dmin = @_half(o + 2u);
  uint sc, mn;
  @_scale_min(o, s, sc, mn);
  precise float ds = d * float(sc);
  const uint a = o + 16u + 32u * (s / 2u) + l;
  const uint w[2] = uint[2](@_u32(a), @_u32(a + 4u));
  for (uint t = 0u; t < 8u; ++t) {
    const uint q = (w[t / 4u] >> (8u * (t % 4u) + sh)) & 15u;
    precise float y = ds * float(q) - dmin * float(mn);
    v[t] = y;
  }
}
)";
const char* kQ5_K_8 = R"(void @_8(uint i, out float v[8]) {
  const uint o = (i / 256u) * 176u, j = i % 256u, s = j / 32u, l = j % 32u, sh = 4u * (s % 2u);
  const float d = @_half(o), dmin = @_half(o + 2u);
  uint sc, mn;
  @_scale_min(o, s, sc, mn);
  precise float ds = d * float(sc);
  const uint a = o + 48u + 32u * (s / 2u) + l;
  const uint w[2] = uint[2](@_u32(a), @_u32(a + 4u));
  const uint h[2] = uint[2](@_u32(o + 16u + l), @_u32(o + 20u + l));
  for (uint t = 0u; t < 8u; ++t) {
    const uint q = ((w[t / 4u] >> (8u * (t % 4u) + sh)) & 15u) | (((h[t / 4u] >> (8u * (t % 4u) + s)) & 1u) << 4u);
    precise float y = ds * float(q) - dmin * float(mn);
    v[t] = y;
  }
}
)";
const char* kQ6_K_8 = R"(void @_8(uint i, out float v[8]) {
  const uint o = (i / 256u) * 210u, j = i % 256u, h = j / 128u, u = (j % 128u) / 32u, l = j % 32u;
  const float d = @_half(o + 208u);
  const uint a = o + 64u * h + 32u * (u % 2u) + l, b = o + 128u + 32u * h + l;
  const uint w[2] = uint[2](@_u32(a), @_u32(a + 4u)), x[2] = uint[2](@_u32(b), @_u32(b + 4u));
  const int sc = int(@_byte(o + 192u + j / 16u) << 24u) >> 24;
  precise float ds = d * float(sc);
  for (uint t = 0u; t < 8u; ++t) {
    const uint q = ((w[t / 4u] >> (8u * (t % 4u) + 4u * (u / 2u))) & 15u) |
                   (((x[t / 4u] >> (8u * (t % 4u) + 2u * u)) & 3u) << 4u);
    precise float y = ds * float(int(q) - 32);
    v[t] = y;
  }
}
)";

}  // namespace

std::string glsl_dequantize(Type t, const std::string& words, const std::string& fn) {
  const char* body = nullptr;
  const char* group = nullptr;
  bool k = false;
  switch (t) {
    case Type::Q8_0: body = kQ8_0, group = kQ8_0_8; break;
    case Type::Q4_0: body = kQ4_0, group = kQ4_0_8; break;
    case Type::Q4_1: body = kQ4_1, group = kQ4_1_8; break;
    case Type::Q5_0: body = kQ5_0, group = kQ5_0_8; break;
    case Type::Q5_1: body = kQ5_1, group = kQ5_1_8; break;
    case Type::Q4_K:
      body = kQ4_K, group = kQ4_K_8;
      k = true;
      break;
    case Type::Q5_K:
      body = kQ5_K, group = kQ5_K_8;
      k = true;
      break;
    case Type::Q6_K: body = kQ6_K, group = kQ6_K_8; break;
    default:
      throw ConfigError(std::string("[quant::glsl_dequantize] expected a block-quantized type, got ") +
                        name(t));
  }
  std::string s = fill(kHelpers, fn, words);
  if (k) s += fill(kScaleMin, fn, words);
  return s + fill(body, fn, words) + fill(group, fn, words);
}

}  // namespace meganeura::quant
