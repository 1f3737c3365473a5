#pragma once
// PyPI gguf as an oracle: runs tests/oracle/gguf_oracle.py with the `python3` on PATH (MEGANEURA_PYTHON
// overrides), where scripts/install-oracles.sh put the pinned gguf. A missing package fails the test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "meganeura/formats/gguf.hpp"
#include "paths.hpp"

namespace meganeura::test {

namespace fs = std::filesystem;

inline std::string gguf_python() {
  const char* p = std::getenv("MEGANEURA_PYTHON");
  return p && *p ? p : "python3";
}

inline fs::path gguf_oracle_script() { return source_path("tests/oracle/gguf_oracle.py"); }

// A fresh scratch folder under the build tree, one per test and process.
inline fs::path gguf_scratch(const std::string& name) {
  const fs::path d = work_dir("oracle") / ("gguf-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Runs the script with `args`; throws with its stderr when it fails.
inline void run_gguf_oracle(const std::string& args, const fs::path& scratch) {
  const fs::path err = scratch / "stderr.txt";
  const std::string cmd =
      gguf_python() + " " + gguf_oracle_script().string() + " " + args + " 2>" + err.string();
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::ifstream f(err);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    throw std::runtime_error("gguf_oracle.py " + args + " failed (exit " + std::to_string(rc) +
                             "); is PyPI gguf installed (scripts/install-oracles.sh)?\n" + text);
  }
}

inline void write_bytes(const fs::path& p, std::span<const uint8_t> b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

inline std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw std::runtime_error("expected oracle output at " + p.string() + ", got no file");
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

inline std::vector<float> read_f32(const fs::path& p) {
  const auto b = read_bytes(p);
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Bit-exact, except that any NaN matches any NaN (which payload survives a multiply by a NaN scale is the
// CPU's choice, not the format's). Returns the index of the first difference, or -1.
inline long first_difference(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (bits_of(a[i]) != bits_of(b[i])) return static_cast<long>(i);
  }
  return -1;
}

// The JSON form gguf_oracle.py uses for a metadata value, so that both directions compare exactly.
inline nlohmann::json value_json(const gguf::Value& v) {
  using gguf::ValueType;
  nlohmann::json j;
  j["type"] = static_cast<uint32_t>(v.type);
  auto scalar = [](const gguf::Value& s) -> nlohmann::json {
    switch (s.type) {
      case ValueType::I8:
      case ValueType::I16:
      case ValueType::I32:
      case ValueType::I64: return s.as_int();
      default: return s.bits;  // unsigned, bool as 0/1, floats as bit patterns
    }
  };
  auto hex = [](const std::string& s) {
    static constexpr char k[] = "0123456789abcdef";
    std::string h;
    for (unsigned char c : s) {
      h += k[c >> 4];
      h += k[c & 15];
    }
    return h;
  };
  if (v.type == ValueType::String) {
    j["hex"] = hex(v.str);
  } else if (v.type != ValueType::Array) {
    j["v"] = scalar(v);
  } else {
    j["elem"] = static_cast<uint32_t>(v.element);
    nlohmann::json items = nlohmann::json::array();
    for (uint64_t i = 0; i < v.count; ++i) {
      if (v.element == ValueType::String)
        items.push_back({{"type", 8}, {"hex", hex(v.strings[i])}});
      else if (v.element == ValueType::Array)
        items.push_back(value_json(v.arrays[i]));
      else
        items.push_back({{"type", static_cast<uint32_t>(v.element)}, {"v", scalar(v.element_value(i))}});
    }
    j["items"] = items;
  }
  return j;
}

}  // namespace meganeura::test
