// The GGUF block types against PyPI gguf's `gguf.quants`: our dequantizers bit-exact on random blocks (with
// zero, subnormal, huge, infinite and NaN f16 scales), our quantizers byte-exact where gguf-py has one, and
// every quantizer's round trip (decoded by gguf-py) within a bound derived from the input alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "gguf_oracle.hpp"
#include "meganeura/quant/half.hpp"
#include "meganeura/quant/quant.hpp"

using namespace meganeura;
using namespace meganeura::test;
using quant::Type;

namespace {

// Byte offsets of each type's f16 scale fields inside a block.
std::vector<size_t> scale_fields(Type t) {
  switch (t) {
    case Type::Q4_0:
    case Type::Q5_0:
    case Type::Q8_0: return {0};
    case Type::Q4_1:
    case Type::Q5_1:
    case Type::Q4_K:
    case Type::Q5_K: return {0, 2};
    case Type::Q6_K: return {208};
    default: return {};
  }
}

constexpr uint16_t kSpecialScales[] = {
    0x0000, 0x8000,          // zeros
    0x0001, 0x03ff, 0x8201,  // subnormals
    0x0400, 0x7bff, 0xfbff,  // smallest normal, largest finite
    0x7c00, 0xfc00,          // infinities
    0x7e00, 0x7c01, 0xfe55,  // NaNs, quiet and signalling
    0x3c00, 0x1400,          // 1, 2^-10
};

// Random blocks: random bytes, scales random f16 patterns in a sensible range, then the special scales.
std::vector<uint8_t> random_blocks(Type t, std::mt19937& rng, size_t blocks) {
  const auto& ti = quant::info(t);
  std::vector<uint8_t> b(blocks * ti.block_bytes);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  const auto fields = scale_fields(t);
  std::uniform_int_distribution<int> sensible(0x1000, 0x4400);  // about 2^-12 .. 4
  size_t special = 0;
  for (size_t k = 0; k < blocks; ++k)
    for (size_t f : fields) {
      uint16_t h = static_cast<uint16_t>(sensible(rng) | (rng() & 1 ? 0x8000 : 0));
      if (k % 3 == 1) h = kSpecialScales[special++ % std::size(kSpecialScales)];
      if (k % 3 == 2) h = static_cast<uint16_t>(rng());  // any pattern at all
      std::memcpy(b.data() + k * ti.block_bytes + f, &h, 2);
    }
  return b;
}

// f32 test inputs: blocks of normal values at scales from 1e-6 to 1e4, with constant, zero and outlier
// blocks.
std::vector<float> test_values(Type t, std::mt19937& rng, size_t blocks) {
  const size_t be = std::max<size_t>(quant::info(t).block_elems, 32);
  const float scales[] = {1.0f, 1e-3f, 1e3f, 1e-6f, 1e4f, 0.25f};
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> v(blocks * be);
  for (size_t k = 0; k < blocks; ++k) {
    float* x = v.data() + k * be;
    const float s = scales[k % std::size(scales)];
    for (size_t i = 0; i < be; ++i) x[i] = n(rng) * s;
    if (k % 7 == 3) std::fill(x, x + be, 0.0f);
    if (k % 7 == 4) std::fill(x, x + be, -0.375f * s);
    if (k % 7 == 5) x[rng() % be] = 6.0f * s;  // one outlier (within f16 range at every scale)
    if (k % 7 == 6)
      for (size_t i = 0; i < be; ++i) x[i] = std::fabs(x[i]) + s;  // all positive
  }
  return v;
}

const Type kAll[] = {Type::F32,  Type::F16,  Type::BF16, Type::Q8_0, Type::Q4_0, Type::Q4_1,
                     Type::Q5_0, Type::Q5_1, Type::Q4_K, Type::Q5_K, Type::Q6_K};

double f16_error(double v) { return std::max(std::fabs(v) * std::ldexp(1.0, -11), std::ldexp(1.0, -25)); }

// The largest round-trip error a correct quantizer may make on block x, from x alone (see quant/quantize.cpp:
// the legacy types' rounding is ggml's; the K types cover each sub-block's range by rounding scales up).
std::vector<double> error_bounds(Type t, std::span<const float> x) {
  std::vector<double> bound(x.size());
  auto range = [&](size_t at, size_t n, double& lo, double& hi, double& amax) {
    lo = hi = x[at];
    amax = 0;
    for (size_t i = at; i < at + n; ++i) {
      lo = std::min<double>(lo, x[i]);
      hi = std::max<double>(hi, x[i]);
      amax = std::max<double>(amax, std::fabs(x[i]));
    }
  };
  const size_t be = quant::info(t).block_elems;
  for (size_t b0 = 0; b0 < x.size(); b0 += be) {
    double lo, hi, amax, e = 0;
    range(b0, be, lo, hi, amax);
    switch (t) {
      case Type::F32: e = 0; break;
      case Type::F16: e = f16_error(amax); break;  // half an ulp: 2^-11 relative, 2^-25 absolute
      case Type::BF16: e = amax * std::ldexp(1.0, -8) + 1e-38; break;
      case Type::Q8_0: e = 0.5 * amax / 127 + 127 * f16_error(amax / 127); break;
      case Type::Q4_0: e = amax / 8 + 8 * f16_error(amax / 8); break;  // -max lands on the clipped level 7
      case Type::Q5_0: e = amax / 16 + 16 * f16_error(amax / 16); break;
      case Type::Q4_1: e = 0.5 * (hi - lo) / 15 + 15 * f16_error((hi - lo) / 15) + f16_error(lo); break;
      case Type::Q5_1: e = 0.5 * (hi - lo) / 31 + 31 * f16_error((hi - lo) / 31) + f16_error(lo); break;
      default: break;
    }
    if (t == Type::Q4_K || t == Type::Q5_K) {
      const double levels = t == Type::Q4_K ? 15 : 31;
      double R = 0, r[8];
      for (int j = 0; j < 8; ++j) {
        double l, h, a;
        range(b0 + 32 * j, 32, l, h, a);
        r[j] = std::max(h, 0.0) - std::min(l, 0.0);
        R = std::max(R, r[j]);
      }
      for (int j = 0; j < 8; ++j)
        for (size_t i = 0; i < 32; ++i)
          bound[b0 + 32 * j + i] = 0.5 * (r[j] + 2 * R / 63) / levels * 1.01 + r[j] * std::ldexp(1.0, -10) +
                                   63 * levels * std::ldexp(1.0, -24) + 1e-6 * R;
      continue;
    }
    if (t == Type::Q6_K) {
      double A = amax, a[16];
      for (int j = 0; j < 16; ++j) {
        double l, h;
        range(b0 + 16 * j, 16, l, h, a[j]);
      }
      for (int j = 0; j < 16; ++j)
        for (size_t i = 0; i < 16; ++i)
          bound[b0 + 16 * j + i] = 0.5 * (a[j] + A / 127) / 31 * 1.01 + a[j] * std::ldexp(1.0, -10) +
                                   127 * 32 * std::ldexp(1.0, -25) + 1e-6 * A;
      continue;
    }
    for (size_t i = b0; i < b0 + be; ++i) bound[i] = e * (1 + 1e-6);
  }
  return bound;
}

}  // namespace

TEST(GgufQuants, TypeTableMatchesPyPIGguf) {
  // The table's (id, block elements, block bytes) rows against gguf-py's GGML_QUANT_SIZES, by running it.
  const fs::path dir = gguf_scratch("table");
  std::ofstream(dir / "table.py")
      << "import json, sys\nfrom gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T\n"
         "json.dump({t.name: [int(t), *GGML_QUANT_SIZES[t]] for t in T}, open(sys.argv[1], 'w'))\n";
  const std::string cmd =
      gguf_python() + " " + (dir / "table.py").string() + " " + (dir / "table.json").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto table = nlohmann::json::parse(std::ifstream(dir / "table.json"));
  for (const auto& ti : quant::kTypes) {
    ASSERT_TRUE(table.contains(ti.name)) << ti.name;
    const auto& row = table[ti.name];
    EXPECT_EQ(row[0].get<uint32_t>(), static_cast<uint32_t>(ti.type)) << ti.name;
    EXPECT_EQ(row[1].get<uint32_t>(), ti.block_elems) << ti.name;
    EXPECT_EQ(row[2].get<uint32_t>(), ti.block_bytes) << ti.name;
  }
}

TEST(GgufQuants, DequantizeIsBitExactAgainstPyPIGguf) {
  const fs::path dir = gguf_scratch("dequant");
  std::mt19937 rng(2024);
  std::map<Type, std::vector<uint8_t>> inputs;
  for (Type t : kAll) {
    std::vector<uint8_t> b;
    if (t == Type::F16 || t == Type::BF16) {  // every 16-bit pattern
      b.resize(2 * 65536);
      for (uint32_t i = 0; i < 65536; ++i) std::memcpy(b.data() + 2 * i, &i, 2);
    } else if (t == Type::F32) {
      b = random_blocks(t, rng, 4096);
    } else {
      b = random_blocks(t, rng, 96);
    }
    write_bytes(dir / (std::string("random.") + quant::name(t) + ".blocks"), b);
    inputs[t] = std::move(b);
  }
  run_gguf_oracle("quants " + dir.string(), dir);
  for (Type t : kAll) {
    const auto ours = quant::dequantize(t, inputs[t]);
    const auto theirs = read_f32(dir / (std::string("random.") + quant::name(t) + ".f32"));
    ASSERT_EQ(ours.size(), theirs.size()) << quant::name(t);
    const long at = first_difference(ours, theirs);
    EXPECT_EQ(at, -1) << quant::name(t) << " element " << at << ": ours " << ours[at] << " (0x" << std::hex
                      << bits_of(ours[at]) << "), gguf-py " << theirs[at] << " (0x" << bits_of(theirs[at])
                      << ")";
    const size_t finite = std::count_if(ours.begin(), ours.end(), [](float f) { return std::isfinite(f); });
    EXPECT_GT(finite, ours.size() / 2)
        << quant::name(t) << ": the comparison should be mostly on finite values";
  }
}

TEST(GgufQuants, QuantizersMatchPyPIGgufAndStayWithinBounds) {
  const fs::path dir = gguf_scratch("quant");
  std::mt19937 rng(77);
  std::map<Type, std::vector<float>> inputs;
  std::map<Type, std::vector<uint8_t>> ours;
  for (Type t : kAll) {
    inputs[t] = test_values(t, rng, 42);
    ours[t] = quant::quantize(t, inputs[t]);
    write_bytes(dir / (std::string("in.") + quant::name(t) + ".values"),
                {reinterpret_cast<const uint8_t*>(inputs[t].data()), inputs[t].size() * 4});
    write_bytes(dir / (std::string("ours.") + quant::name(t) + ".blocks"), ours[t]);
  }
  run_gguf_oracle("quants " + dir.string(), dir);
  // gguf-py 0.19 quantizes these types (the K types only dequantize): the same bytes, block for block.
  for (Type t :
       {Type::F32, Type::F16, Type::BF16, Type::Q8_0, Type::Q4_0, Type::Q4_1, Type::Q5_0, Type::Q5_1}) {
    const auto theirs = read_bytes(dir / (std::string("in.") + quant::name(t) + ".quant"));
    ASSERT_EQ(ours[t].size(), theirs.size()) << quant::name(t);
    const auto mismatch = std::mismatch(ours[t].begin(), ours[t].end(), theirs.begin());
    EXPECT_TRUE(mismatch.first == ours[t].end())
        << quant::name(t) << ": first different byte " << (mismatch.first - ours[t].begin()) << " (block "
        << (mismatch.first - ours[t].begin()) / quant::info(t).block_bytes << ")";
  }
  for (Type t : kAll) {
    const auto decoded =
        read_f32(dir / (std::string("ours.") + quant::name(t) + ".f32"));  // gguf-py's decoding
    const auto& x = inputs[t];
    ASSERT_EQ(decoded.size(), x.size()) << quant::name(t);
    EXPECT_EQ(first_difference(quant::dequantize(t, ours[t]), decoded), -1) << quant::name(t);
    const auto bound = error_bounds(t, x);
    size_t bad = 0, first_bad = 0;
    double worst_ratio = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double err = std::fabs(static_cast<double>(decoded[i]) - x[i]);
      if (!(err <= bound[i])) {
        if (!bad++) first_bad = i;
      }
      if (bound[i] > 0) worst_ratio = std::max(worst_ratio, err / bound[i]);
    }
    EXPECT_EQ(bad, 0u) << quant::name(t) << ": element " << first_bad << " = " << x[first_bad]
                       << " decoded as " << decoded[first_bad] << ", bound " << bound[first_bad];
    // A bound this loose would hide a quantizer that ignores half its levels: the K types must use most of
    // it.
    if (t == Type::Q4_K || t == Type::Q5_K || t == Type::Q6_K) {
      EXPECT_GT(worst_ratio, 0.5) << quant::name(t);
    }
  }
}

TEST(GgufQuants, HalfConversionsRoundToNearestEven) {
  // Spot values with known encodings (IEEE 754 binary16 / bfloat16), independent of any implementation.
  EXPECT_EQ(quant::f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(quant::f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(quant::f32_to_f16(65519.99f), 0x7bff);
  EXPECT_EQ(quant::f32_to_f16(65520.0f), 0x7c00);               // the tie rounds to even: infinity
  EXPECT_EQ(quant::f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(quant::f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // tie to even: zero
  EXPECT_EQ(quant::f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(quant::f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp: tie to even 2
  EXPECT_EQ(quant::f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(quant::f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie, even stays
  EXPECT_EQ(quant::f32_to_f16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie, odd rounds up
  EXPECT_EQ(quant::f32_to_f16(std::nanf("")) & 0x7e00, 0x7e00);
  EXPECT_EQ(quant::f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(quant::f32_to_bf16(1.0f + std::ldexp(3.0f, -8)), 0x3f82);
  for (uint32_t h = 0; h < 65536; ++h) {  // every non-NaN half survives f16 -> f32 -> f16
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;
    ASSERT_EQ(quant::f32_to_f16(quant::f16_to_f32(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}
