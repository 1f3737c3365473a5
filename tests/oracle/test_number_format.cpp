// The narrow number formats (ir/number_format.hpp) and the op round_to_format against PyPI ml_dtypes and
// onnx's reference cast (tests/oracle/number_format_oracle.py; both pinned in
// scripts/requirements-oracle.txt): the table's facts against ml_dtypes.finfo, every code's value, and the
// rounding of every representable value, the halfway points and their neighbours, overflow, tiny values, ±0,
// ±Inf, NaN and random f32 values, for every format with and without saturation (E8M0: every rounding mode).
// Values compare as f32 bit patterns (signed zeros included); a NaN must meet a NaN, of the same sign where
// the format's NaNs are signed; a format without NaN turns NaN into a zero, of whichever sign.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "meganeura/ir/number_format.hpp"
#include "meganeura/reference/interpreter.hpp"
#include "paths.hpp"

namespace meganeura::test {
namespace {

namespace fs = std::filesystem;

const nlohmann::json& oracle_doc() {
  static const nlohmann::json doc = [] {
    const fs::path dir = work_dir("oracle");
    fs::create_directories(dir);
    const fs::path out = dir / ("number_format." + std::to_string(::getpid()) + ".json");
    const fs::path err = dir / ("number_format." + std::to_string(::getpid()) + ".err");
    const std::string cmd = "python3 '" + source_path("tests/oracle/number_format_oracle.py").string() +
                            "' '" + out.string() + "' 2>'" + err.string() + "'";
    const int rc = std::system(cmd.c_str());
    std::ifstream e(err);
    const std::string text((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
    if (rc != 0)
      throw std::runtime_error(
          "number_format_oracle.py failed (is the pinned ml_dtypes installed? "
          "scripts/install-oracles.sh):\n" +
          text);
    std::ifstream in(out);
    nlohmann::json d = nlohmann::json::parse(in);
    std::error_code ec;
    fs::remove(out, ec);
    fs::remove(err, ec);
    return d;
  }();
  return doc;
}

std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08X", v);
  return b;
}

// Whether `got` is the oracle's `want` under the comparison above.
bool same(uint32_t got, uint32_t want, NumberFormat f) {
  const float g = std::bit_cast<float>(got), w = std::bit_cast<float>(want);
  const NanCode nan = format_info(f).nan;
  if (std::isnan(w)) {
    if (!std::isnan(g)) return false;
    return !(nan == NanCode::AllOnes || nan == NanCode::Ieee) || (got >> 31) == (want >> 31);
  }
  return got == want;
}

TEST(NumberFormatOracle, FactsMatchMlDtypes) {
  const auto& doc = oracle_doc();
  ASSERT_EQ(doc["formats"].size(), size_t(NumberFormat::Count_));
  for (const auto& e : doc["formats"]) {
    const NumberFormat f = NumberFormat(e["index"].get<int>());
    const FormatInfo& i = format_info(f);
    EXPECT_EQ(std::string(i.name), e["name"].get<std::string>());
    EXPECT_EQ(i.bits, e["bits"].get<int>()) << i.name;
    EXPECT_EQ(i.max_finite, e["max"].get<double>()) << i.name;
    EXPECT_EQ(format_min_positive(f), e["smallest_subnormal"].get<double>()) << i.name;
  }
}

TEST(NumberFormatOracle, EveryCodeDecodesAsMlDtypes) {
  for (const auto& e : oracle_doc()["formats"]) {
    const NumberFormat f = NumberFormat(e["index"].get<int>());
    const auto& codes = e["codes"];
    ASSERT_EQ(codes.size(), size_t(1) << format_info(f).bits);
    for (uint32_t c = 0; c < codes.size(); ++c) {
      const uint32_t got = std::bit_cast<uint32_t>(float(decode_format(c, f)));
      // a NaN code's sign is part of the code; compare it wherever the format has signed NaNs
      EXPECT_TRUE(same(got, codes[c].get<uint32_t>(), f))
          << format_info(f).name << " code " << c << ": " << hex(got) << " vs "
          << hex(codes[c].get<uint32_t>());
    }
  }
}

TEST(NumberFormatOracle, RoundingMatchesMlDtypesAndOnnx) {
  size_t checked = 0;
  for (const auto& e : oracle_doc()["formats"]) {
    const NumberFormat f = NumberFormat(e["index"].get<int>());
    for (const auto& c : e["cases"]) {
      const bool saturate = c["saturate"].get<int>() != 0;
      const FormatRounding r = FormatRounding(c["rounding"].get<int>());
      const auto& xs = c["x"];
      const auto& want = c["want"];
      ASSERT_EQ(xs.size(), want.size());
      int failures = 0;
      for (size_t k = 0; k < xs.size() && failures < 10; ++k) {
        const uint32_t x = xs[k].get<uint32_t>(), w = want[k].get<uint32_t>();
        const float wf = std::bit_cast<float>(w);
        const uint32_t got =
            std::bit_cast<uint32_t>(round_to_format(std::bit_cast<float>(x), f, saturate, r));
        // NaN into a format without NaN: ml_dtypes gives a zero of either sign, we give +0
        const bool ok =
            same(got, w, f) || (format_info(f).nan == NanCode::None && std::isnan(std::bit_cast<float>(x)) &&
                                wf == 0.0f && std::bit_cast<float>(got) == 0.0f);
        if (!ok) ++failures;
        EXPECT_TRUE(ok) << format_info(f).name << (saturate ? " saturate" : "") << " rounding " << int(r)
                        << ": x = " << std::bit_cast<float>(x) << " (" << hex(x) << "): got "
                        << std::bit_cast<float>(got) << " (" << hex(got) << "), want " << wf << " (" << hex(w)
                        << ")";
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 60000u);
}

// The op's row reaches the same function: one graph per format, evaluated by the reference interpreter.
TEST(NumberFormatOracle, OpReferenceMatchesMlDtypes) {
  for (const auto& e : oracle_doc()["formats"]) {
    const NumberFormat f = NumberFormat(e["index"].get<int>());
    const auto& c = e["cases"][0];
    std::vector<double> xs;
    for (const auto& v : c["x"]) xs.push_back(std::bit_cast<float>(v.get<uint32_t>()));
    Graph g;
    NodeId x = g.input("x", {int64_t(xs.size())});
    NodeId y =
        g.round_to_format(x, f, c["saturate"].get<int>() != 0, FormatRounding(c["rounding"].get<int>()));
    g.set_outputs({y});
    const HostTensor out = reference::evaluate(g, {{"x", HostTensor({int64_t(xs.size())}, xs)}}, y);
    for (size_t k = 0; k < xs.size(); ++k) {
      if (std::isnan(xs[k])) continue;  // a format without NaN: any zero (above)
      const uint32_t got = std::bit_cast<uint32_t>(float(out[k]));
      const uint32_t w = c["want"][k].get<uint32_t>();
      ASSERT_TRUE(same(got, w, f)) << format_info(f).name << " x = " << xs[k] << ": " << hex(got) << " vs "
                                   << hex(w);
    }
  }
}

}  // namespace
}  // namespace meganeura::test
