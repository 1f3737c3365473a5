// GGUF files across implementations: files our writer makes read identically with PyPI gguf's GGUFReader,
// files its GGUFWriter makes read identically with ours, and (opt-in) the real SmolLM2 Q4_1 file.
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <random>

#include "gguf_oracle.hpp"
#include "meganeura/core/error.hpp"
#include "meganeura/quant/quant.hpp"

using namespace meganeura;
using namespace meganeura::test;
using gguf::Value;
using gguf::ValueType;
using quant::Type;

namespace {

// Every value type, arrays of every element type, arrays of arrays of arrays, odd strings.
std::vector<std::pair<std::string, Value>> every_kind_of_metadata(bool pypi_writable) {
  std::vector<std::pair<std::string, Value>> m = {
      {"general.architecture", Value::of_string("llama")},
      {"test.u8", Value::of_u8(250)},
      {"test.i8", Value::of_i8(-128)},
      {"test.u16", Value::of_u16(65535)},
      {"test.i16", Value::of_i16(-30000)},
      {"test.u32", Value::of_u32(4000000000u)},
      {"test.i32", Value::of_i32(std::numeric_limits<int32_t>::min())},
      {"test.f32", Value::of_f32(-1.5e-40f)},  // an f32 subnormal travels by its bits
      {"test.bool", Value::of_bool(true)},
      {"test.string", Value::of_string("h\xc3\xa9llo \xe2\x96\x81 wor\tld")},
      {"test.u64", Value::of_u64(std::numeric_limits<uint64_t>::max())},
      {"test.i64", Value::of_i64(std::numeric_limits<int64_t>::min())},
      {"test.f64", Value::of_f64(-0.0)},
      {"test.arr.u8", Value::array_of(ValueType::U8, std::vector<uint8_t>{0, 1, 255})},
      {"test.arr.i8", Value::array_of(ValueType::I8, std::vector<int8_t>{-1, 127})},
      {"test.arr.u16", Value::array_of(ValueType::U16, std::vector<uint16_t>{7, 65535})},
      {"test.arr.i16", Value::array_of(ValueType::I16, std::vector<int16_t>{-7})},
      {"test.arr.u32", Value::array_of(ValueType::U32, std::vector<uint32_t>{1, 2, 3})},
      {"test.arr.i32", Value::array_of(ValueType::I32, std::vector<int32_t>{-3, 0, 3})},
      {"test.arr.f32", Value::array_of(ValueType::F32, std::vector<float>{0.1f, -2.5f, 1e30f})},
      {"test.arr.bool", Value::array_of(ValueType::Bool, std::vector<uint8_t>{1, 0, 1})},
      {"test.arr.u64", Value::array_of(ValueType::U64, std::vector<uint64_t>{1ull << 63})},
      {"test.arr.i64", Value::array_of(ValueType::I64, std::vector<int64_t>{-(1ll << 40)})},
      {"test.arr.f64", Value::array_of(ValueType::F64, std::vector<double>{3.141592653589793, -1e300})},
      {"test.arr.string", Value::string_array({"a", "", "\xc4\xa0the", std::string("nul\0byte", 8)})},
      {"test.arr.nested",
       Value::array_array({Value::array_array({Value::array_of(ValueType::I32, std::vector<int32_t>{1, 2}),
                                               Value::array_of(ValueType::I32, std::vector<int32_t>{3})}),
                           Value::array_array({Value::string_array({"x", "yz"})})})},
      {"test.arr.ragged",
       Value::array_array({Value::array_of(ValueType::F32, std::vector<float>{1.0f}),
                           Value::array_of(ValueType::F32, std::vector<float>{2.0f, 3.0f, 4.0f})})},
      {"general.alignment", Value::of_u32(64)},
  };
  if (!pypi_writable) {  // GGUFWriter refuses empty strings and arrays; the format allows them
    m.push_back({"test.empty.string", Value::of_string("")});
    m.push_back({"test.empty.array", Value::array_of(ValueType::U32, std::vector<uint32_t>{})});
  }
  return m;
}

// A tensor of each type, quantized from random values, with 1 to 4 dimensions.
std::vector<gguf::Contents::Tensor> every_type_of_tensor(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 0.5f);
  const std::vector<std::pair<Type, std::vector<uint64_t>>> specs = {
      {Type::F32, {5}},      {Type::F16, {7, 3}},         {Type::BF16, {4, 2, 3}},
      {Type::Q8_0, {64, 3}}, {Type::Q4_0, {32, 2, 2, 2}}, {Type::Q4_1, {96, 1}},
      {Type::Q5_0, {32, 5}}, {Type::Q5_1, {64, 2}},       {Type::Q4_K, {256, 2}},
      {Type::Q5_K, {512}},   {Type::Q6_K, {256, 3}},
  };
  std::vector<gguf::Contents::Tensor> out;
  for (const auto& [type, dims] : specs) {
    uint64_t count = 1;
    for (uint64_t d : dims) count *= d;
    std::vector<float> x(count);
    for (float& v : x) v = n(rng);
    out.push_back({std::string("t.") + quant::name(type) + ".weight", dims, type, quant::quantize(type, x)});
  }
  return out;
}

std::string describe_value_json(const nlohmann::json& j) { return j.dump().substr(0, 300); }

}  // namespace

TEST(GgufFile, OurWriterIsReadIdenticallyByPyPIGguf) {
  for (uint32_t version : {2u, 3u}) {
    const fs::path dir = gguf_scratch("ours-v" + std::to_string(version));
    gguf::Contents c;
    c.version = version;
    c.metadata = every_kind_of_metadata(false);
    c.tensors = every_type_of_tensor(version);
    gguf::write_gguf((dir / "model.gguf").string(), c);
    const auto ours = gguf::File::open((dir / "model.gguf").string());
    run_gguf_oracle("read " + (dir / "model.gguf").string() + " " + (dir / "py").string(), dir);
    const auto doc = nlohmann::json::parse(std::ifstream(dir / "py.json"));
    const auto blob = read_bytes(dir / "py.bin");

    EXPECT_EQ(doc["version"].get<uint32_t>(), version);
    EXPECT_EQ(doc["alignment"].get<uint64_t>(), 64u);
    EXPECT_EQ(doc["data_offset"].get<uint64_t>(), ours.data_offset());
    ASSERT_EQ(doc["metadata"].size(), c.metadata.size());
    for (size_t i = 0; i < c.metadata.size(); ++i) {
      const auto& kv = doc["metadata"][i];
      EXPECT_EQ(kv["key"].get<std::string>(), c.metadata[i].first);
      EXPECT_EQ(kv["value"], value_json(c.metadata[i].second))
          << c.metadata[i].first << ": gguf-py read " << describe_value_json(kv["value"]);
    }
    ASSERT_EQ(doc["tensors"].size(), c.tensors.size());
    for (size_t i = 0; i < c.tensors.size(); ++i) {
      const auto& t = doc["tensors"][i];
      const auto& want = c.tensors[i];
      const std::string name = want.name;
      EXPECT_EQ(t["name"].get<std::string>(), name);
      EXPECT_EQ(t["type"].get<uint32_t>(), static_cast<uint32_t>(want.type)) << name;
      EXPECT_EQ(t["dims"].get<std::vector<uint64_t>>(), want.dims) << name;
      EXPECT_EQ(t["offset"].get<uint64_t>(), ours.tensor(name).offset) << name;
      EXPECT_EQ(t["bytes"].get<uint64_t>(), want.data.size()) << name;
      const auto raw_at = t["raw_at"].get<size_t>(), raw_len = t["raw_len"].get<size_t>();
      ASSERT_EQ(raw_len, want.data.size()) << name;
      EXPECT_TRUE(std::equal(want.data.begin(), want.data.end(), blob.begin() + static_cast<long>(raw_at)))
          << name;
      std::vector<float> theirs(t["f32_len"].get<size_t>());
      std::memcpy(theirs.data(), blob.data() + t["f32_at"].get<size_t>(), theirs.size() * 4);
      EXPECT_EQ(first_difference(ours.dequantize(ours.tensor(name)), theirs), -1) << name;
    }
  }
}

TEST(GgufFile, PyPIWriterIsReadIdenticallyByOurs) {
  const fs::path dir = gguf_scratch("pypi");
  const auto metadata = every_kind_of_metadata(true);
  const auto tensors = every_type_of_tensor(11);
  nlohmann::json spec;
  spec["arch"] = "llama";
  spec["alignment"] = 64;
  spec["data_file"] = (dir / "tensors.bin").string();
  spec["metadata"] = nlohmann::json::array();
  for (const auto& [key, v] : metadata)
    if (key != "general.architecture" && key != "general.alignment")  // GGUFWriter adds these itself
      spec["metadata"].push_back({{"key", key}, {"value", value_json(v)}});
  std::vector<uint8_t> data;
  spec["tensors"] = nlohmann::json::array();
  for (const auto& t : tensors) {
    spec["tensors"].push_back({{"name", t.name},
                               {"type", static_cast<uint32_t>(t.type)},
                               {"dims", t.dims},
                               {"at", data.size()},
                               {"len", t.data.size()}});
    data.insert(data.end(), t.data.begin(), t.data.end());
  }
  write_bytes(dir / "tensors.bin", data);
  std::ofstream(dir / "spec.json") << spec.dump();
  run_gguf_oracle("write " + (dir / "spec.json").string() + " " + (dir / "model.gguf").string(), dir);

  const auto f = gguf::File::open((dir / "model.gguf").string());
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.architecture(), "llama");
  for (const auto& [key, v] : metadata) {
    const Value* got = f.find(key);
    ASSERT_NE(got, nullptr) << key;
    EXPECT_EQ(value_json(*got), value_json(v)) << key;
    EXPECT_TRUE(*got == v) << key;
  }
  ASSERT_EQ(f.tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& got = f.tensors()[i];
    EXPECT_EQ(got.name, tensors[i].name);
    EXPECT_EQ(got.type, tensors[i].type) << got.name;
    EXPECT_EQ(got.dims, tensors[i].dims) << got.name;
    const auto bytes = f.tensor_data(got);
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), tensors[i].data.begin(), tensors[i].data.end()))
        << got.name;
  }
}

// Opt-in (scripts/check-real-gguf.sh): MEGANEURA_REAL_GGUF names the real SmolLM2-135M-Instruct Q4_1 file.
TEST(GgufRealModel, EveryTensorAndKeyMatchesPyPIGguf) {
  const char* env = std::getenv("MEGANEURA_REAL_GGUF");
  if (!env || !*env)
    GTEST_SKIP() << "opt-in: set MEGANEURA_REAL_GGUF to the real model (scripts/check-real-gguf.sh does)";
  const std::string path = env;
  ASSERT_TRUE(fs::exists(path)) << "MEGANEURA_REAL_GGUF=" << path
                                << " does not exist: run scripts/fetch-models.sh";
  const auto f = gguf::File::open(path);
  const fs::path dir = gguf_scratch("real");
  run_gguf_oracle("read " + path + " " + (dir / "py").string() + " meta", dir);
  const auto doc = nlohmann::json::parse(std::ifstream(dir / "py.json"));
  EXPECT_EQ(doc["data_offset"].get<uint64_t>(), f.data_offset());
  ASSERT_EQ(doc["metadata"].size(), f.metadata().size());
  for (size_t i = 0; i < f.metadata().size(); ++i) {
    EXPECT_EQ(doc["metadata"][i]["key"].get<std::string>(), f.metadata()[i].first);
    EXPECT_EQ(doc["metadata"][i]["value"], value_json(f.metadata()[i].second)) << f.metadata()[i].first;
  }
  ASSERT_EQ(doc["tensors"].size(), f.tensors().size());

  // Dequantized values, streamed tensor by tensor from gguf-py (no 540 MB temporary file).
  const std::string cmd = gguf_python() + " " + gguf_oracle_script().string() + " stream " + path;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  size_t compared = 0, values = 0;
  for (const auto& t : f.tensors()) {
    char line[512];
    ASSERT_NE(std::fgets(line, sizeof line, pipe), nullptr) << "gguf-py stopped before " << t.name;
    std::string name(line);
    name.pop_back();
    ASSERT_NE(std::fgets(line, sizeof line, pipe), nullptr);
    const size_t count = std::stoull(line);
    EXPECT_EQ(name, t.name);
    ASSERT_EQ(count, t.elements) << t.name;
    std::vector<float> theirs(count);
    ASSERT_EQ(std::fread(theirs.data(), 4, count, pipe), count) << t.name;
    EXPECT_EQ(first_difference(f.dequantize(t), theirs), -1) << t.name << " (" << quant::name(t.type) << ")";
    ++compared;
    values += count;
  }
  EXPECT_EQ(::pclose(pipe), 0);
  EXPECT_EQ(compared, 272u);  // SmolLM2-135M: 30 blocks x 9 + embedding + final norm
  std::printf("compared %zu tensors, %zu values, bit-exact\n", compared, values);
}
