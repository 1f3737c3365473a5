// GGUF reader and writer without Python: malformed files (each a FormatError naming what is wrong), every
// truncation of a valid file, the writer's round trip, typed getters, describe(). Files are built byte by
// byte here, following the GGUF specification, so the reader is not checked only against our own writer.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "meganeura/core/error.hpp"
#include "meganeura/formats/gguf.hpp"
#include "meganeura/quant/quant.hpp"

using namespace meganeura;
using gguf::Value;
using gguf::ValueType;

namespace {

// A GGUF image written field by field.
struct Bytes {
  std::vector<uint8_t> b;
  Bytes& raw(const std::string& s) {
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& u32(uint32_t v) { return le(v, 4); }
  Bytes& u64(uint64_t v) { return le(v, 8); }
  Bytes& le(uint64_t v, size_t n) {
    for (size_t i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Bytes& str(const std::string& s) { return u64(s.size()).raw(s); }
  Bytes& header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    return raw("GGUF").u32(version).u64(tensors).u64(kvs);
  }
  Bytes& kv_u32(const std::string& k, uint32_t v) { return str(k).u32(4).u32(v); }
  Bytes& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  Bytes& pad(size_t a = 32) {
    while (b.size() % a) b.push_back(0);
    return *this;
  }
  Bytes& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
};

std::string error_of(const std::vector<uint8_t>& bytes) {
  try {
    gguf::File::parse(bytes, "bad.gguf");
  } catch (const FormatError& e) {
    return e.what();
  }
  return "(no error)";
}

// A valid file: two keys, two F32 tensors of 8 elements.
Bytes valid() {
  Bytes f;
  f.header(2, 2).kv_u32("general.alignment", 32).str("general.architecture").u32(8).str("llama");
  f.tensor("a", {8}, 0, 0).tensor("b", {4, 2}, 0, 32).pad().zeros(64);
  return f;
}

}  // namespace

TEST(Gguf, HandBuiltFileReads) {
  const auto f = gguf::File::parse(valid().b, "ok.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.architecture(), "llama");
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.tensor("b").shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(f.tensor("b").bytes, 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
}

TEST(Gguf, MalformedFilesNameWhatIsWrong) {
  struct Case {
    const char* what;
    std::function<Bytes()> make;
    std::vector<std::string> message;  // every part must appear
  };
  const uint64_t huge = 1ull << 62;
  const std::vector<Case> cases = {
      {"empty", [] { return Bytes{}; }, {"bad.gguf", "header", "truncated"}},
      {"bad magic",
       [] {
         Bytes f = valid();
         f.b[3] = 'X';
         return f;
       },
       {"magic", "GGUX"}},
      {"version 1", [] { return Bytes{}.header(0, 0, 1); }, {"version", "got 1"}},
      {"version 4", [] { return Bytes{}.header(0, 0, 4); }, {"version 2 or 3", "got 4"}},
      {"big-endian", [] { return Bytes{}.header(0, 0, 0x03000000); }, {"version", "big-endian"}},
      {"huge metadata count",
       [] { return Bytes{}.header(0, huge); },
       {"metadata count", std::to_string(huge)}},
      {"huge tensor count", [] { return Bytes{}.header(huge, 0); }, {"tensor count"}},
      {"key past end",
       [] { return Bytes{}.header(0, 1).u64(1000).raw("abc").zeros(10); },
       {"metadata entry 0", "key", "truncated"}},
      {"bad value type",
       [] { return Bytes{}.header(0, 1).str("k.t").u32(13).u32(0); },
       {"key 'k.t'", "value type", "got 13"}},
      {"string past end",
       [] { return Bytes{}.header(0, 1).str("k.s").u32(8).u64(huge).raw("xy"); },
       {"key 'k.s'", "string", "truncated"}},
      {"huge array",
       [] { return Bytes{}.header(0, 1).str("k.a").u32(9).u32(4).u64(huge).zeros(16); },
       {"key 'k.a'", "array", std::to_string(huge)}},
      {"huge string array",
       [] { return Bytes{}.header(0, 1).str("k.a").u32(9).u32(8).u64(1000).zeros(16); },
       {"key 'k.a'", "1000 string elements"}},
      {"bad array element type",
       [] { return Bytes{}.header(0, 1).str("k.a").u32(9).u32(77).u64(1).zeros(8); },
       {"key 'k.a'", "array element type", "got 77"}},
      {"arrays nested too deep",
       [] {
         Bytes f;
         f.header(0, 1).str("k.deep").u32(9);
         for (int i = 0; i < 20; ++i) f.u32(9).u64(1);
         return f.u32(4).u64(0);
       },
       {"key 'k.deep'", "nested at most 16"}},
      {"duplicate key",
       [] { return Bytes{}.header(0, 2).kv_u32("k.d", 1).kv_u32("k.d", 2); },
       {"key 'k.d'", "duplicate"}},
      {"alignment type",
       [] { return Bytes{}.header(0, 1).str("general.alignment").u32(10).u64(32); },
       {"general.alignment", "u32", "u64"}},
      {"alignment zero",
       [] { return Bytes{}.header(0, 1).kv_u32("general.alignment", 0); },
       {"general.alignment", "power of two", "got 0"}},
      {"alignment 48",
       [] { return Bytes{}.header(0, 1).kv_u32("general.alignment", 48); },
       {"general.alignment", "got 48"}},
      {"five dimensions",
       [] {
         return Bytes{}.header(1, 0).tensor("t.five", {1, 1, 1, 1, 1}, 0, 0).pad().zeros(32);
       },
       {"tensor 't.five'", "at most 4", "got 5"}},
      {"dimension product overflow",
       [] {
         return Bytes{}.header(1, 0).tensor("t.big", {1ull << 32, 1ull << 32}, 0, 0).pad();
       },
       {"tensor 't.big'", "2^63"}},
      {"dimension above int64",
       [] { return Bytes{}.header(1, 0).tensor("t.neg", {1ull << 63}, 0, 0).pad(); },
       {"tensor 't.neg'", "2^63"}},
      {"byte size overflow",
       [] { return Bytes{}.header(1, 0).tensor("t.bytes", {1ull << 62}, 0, 0).pad(); },
       {"tensor 't.bytes'", "2^64"}},
      {"unsupported type",
       [] { return Bytes{}.header(1, 0).tensor("t.q2k", {256}, 10, 0).pad().zeros(96); },
       {"tensor 't.q2k'", "Q2_K", "id 10", "Q4_K"}},
      {"unknown type",
       [] { return Bytes{}.header(1, 0).tensor("t.x", {4}, 1234, 0).pad(); },
       {"tensor 't.x'", "type 1234"}},
      {"dimension not a block multiple",
       [] {
         return Bytes{}.header(1, 0).tensor("t.q4", {33, 2}, 2, 0).pad().zeros(64);
       },
       {"tensor 't.q4'", "multiple", "Q4_0", "32"}},
      {"misaligned offset",
       [] { return Bytes{}.header(1, 0).tensor("t.mis", {4}, 0, 4).pad().zeros(64); },
       {"tensor 't.mis'", "aligned to 32", "got 4"}},
      {"offset past end",
       [] { return Bytes{}.header(1, 0).tensor("t.far", {4}, 0, 1ull << 40).pad().zeros(32); },
       {"tensor 't.far'", "past the end"}},
      {"offset overflow",
       [] { return Bytes{}.header(1, 0).tensor("t.wrap", {8}, 0, ~uint64_t{31}).pad().zeros(32); },
       {"tensor 't.wrap'", "past the end"}},
      {"data truncated",
       [] { return Bytes{}.header(1, 0).tensor("t.short", {16}, 0, 0).pad().zeros(60); },
       {"tensor 't.short'", "64 bytes", "data section of 60"}},
      {"data section past end",
       [] {
         // header ends at 65, data at 96; a tensor with bytes needs it (an empty one does not: below)
         return Bytes{}.header(1, 0).tensor("t.data1", {1}, 0, 0);
       },
       {"data section", "truncated"}},
      {"overlap",
       [] {
         return Bytes{}.header(2, 0).tensor("t.one", {16}, 0, 0).tensor("t.two", {8}, 0, 32).pad().zeros(96);
       },
       {"tensor 't.two'", "overlap", "tensor 't.one'"}},
      {"duplicate tensor",
       [] {
         return Bytes{}.header(2, 0).tensor("t.dup", {8}, 0, 0).tensor("t.dup", {8}, 0, 32).pad().zeros(64);
       },
       {"tensor 't.dup'", "duplicate"}},
      {"tensor name past end",
       [] { return Bytes{}.header(1, 0).u64(1ull << 40).raw("abcdefghijklmnopqrstuvwxyz"); },
       {"tensor info 0", "name", "truncated"}},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of(c.make().b);
    for (const std::string& part : c.message)
      EXPECT_NE(msg.find(part), std::string::npos) << c.what << ": expected '" << part << "' in: " << msg;
    EXPECT_EQ(msg.rfind("[read_gguf] bad.gguf: ", 0), 0u) << c.what << ": " << msg;
  }
}

TEST(Gguf, EveryTruncationIsAFormatError) {
  gguf::Contents c;
  c.metadata = {{"general.architecture", Value::of_string("llama")},
                {"k.nested", Value::array_array({Value::string_array({"ab", "c"}), Value::string_array({})})},
                {"k.f", Value::array_of(ValueType::F32, std::vector<float>{1, 2, 3})}};
  c.tensors.push_back({"w", {32, 2}, quant::Type::Q8_0, std::vector<uint8_t>(68, 0)});
  c.tensors.push_back({"n", {3}, quant::Type::F16, std::vector<uint8_t>(6, 0)});
  const auto full = gguf::serialize(c);
  const uint64_t data_end = gguf::File::parse(full, "full").data_offset() + 32 * 3 + 6;
  for (size_t n = 0; n < full.size(); ++n) {
    const std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<long>(n));
    if (n >= data_end) {
      EXPECT_NO_THROW(gguf::File::parse(cut, "cut")) << n;  // only the last tensor's padding is missing
    } else {
      EXPECT_THROW(gguf::File::parse(cut, "cut"), FormatError)
          << "truncated to " << n << " of " << full.size();
    }
  }
}

TEST(Gguf, WriterRoundTripsThroughTheReader) {
  gguf::Contents c;
  c.version = 2;
  c.metadata = {{"general.architecture", Value::of_string("qwen2")},
                {"qwen2.block_count", Value::of_u32(2)},
                {"qwen2.rope.freq_base", Value::of_f32(1e6f)},
                {"neg", Value::of_i32(-5)},
                {"big", Value::of_u64(1ull << 63)},
                {"flag", Value::of_bool(true)},
                {"empty", Value::string_array({})},
                {"general.alignment", Value::of_u32(128)}};
  std::vector<float> x(512);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) - 8.0f;
  c.tensors.push_back({"scalar", {}, quant::Type::F32, std::vector<uint8_t>{0, 0, 0x80, 0x3f}});
  c.tensors.push_back({"q6", {256, 2}, quant::Type::Q6_K, quant::quantize(quant::Type::Q6_K, x)});
  c.tensors.push_back({"empty", {0, 4}, quant::Type::F32, {}});
  const auto dir = std::filesystem::temp_directory_path() / ("meganeura-gguf-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "rt.gguf").string();
  gguf::write_gguf(path, c);
  const auto f = gguf::File::open(path);
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.alignment(), 128u);
  EXPECT_EQ(f.data_offset() % 128, 0u);
  ASSERT_EQ(f.metadata().size(), c.metadata.size());
  for (size_t i = 0; i < c.metadata.size(); ++i) {
    EXPECT_EQ(f.metadata()[i].first, c.metadata[i].first);
    EXPECT_TRUE(f.metadata()[i].second == c.metadata[i].second) << c.metadata[i].first;
  }
  EXPECT_EQ(f.get_uint("qwen2.block_count"), 2u);
  EXPECT_EQ(f.get_float("qwen2.rope.freq_base"), 1e6);
  EXPECT_EQ(f.get_int("neg"), -5);
  EXPECT_TRUE(f.get_bool("flag"));
  EXPECT_EQ(f.tensor("scalar").elements, 1u);
  EXPECT_EQ(f.dequantize(f.tensor("scalar")), std::vector<float>{1.0f});
  EXPECT_EQ(f.tensor("q6").offset % 128, 0u);
  const auto back = f.dequantize(f.tensor("q6"));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(back[i], x[i], 0.5 * 8.0 / 31 * 1.01) << i;
  EXPECT_EQ(f.tensor("empty").bytes, 0u);
  std::filesystem::remove_all(dir);
}

// fuzz/corpus/gguf/slow-600mb-{a,b}.bin: a 400-byte header with general.alignment 2^28 and no tensor bytes
// was rewritten padded to 256 MiB (~590 MB of peak memory in fuzz_gguf). Without tensor bytes there is no
// data section to align; with them, the reader already holds the padding the writer would add.
TEST(Gguf, HugeAlignmentWithoutTensorBytesStaysSmall) {
  gguf::Contents c;
  c.metadata = {{"general.alignment", Value::of_u32(1u << 28)}};
  EXPECT_LT(gguf::serialize(c).size(), 4096u);
  c.tensors.push_back({"empty", {0, 4}, quant::Type::F32, {}});
  const auto empty = gguf::serialize(c);
  EXPECT_LT(empty.size(), 4096u);
  const auto f = gguf::File::parse(empty, "empty-tensor.gguf");
  EXPECT_EQ(f.tensor("empty").bytes, 0u);
  EXPECT_EQ(f.alignment(), 1u << 28);
  // One tensor byte needs the data section: a file cut where it starts is refused.
  gguf::Contents d;
  d.metadata = {{"general.alignment", Value::of_u32(64)}};
  d.tensors.push_back({"one", {1}, quant::Type::F32, std::vector<uint8_t>{0, 0, 0x80, 0x3f}});
  const auto with_data = gguf::serialize(d);
  const std::vector<uint8_t> cut(with_data.begin(), with_data.end() - 64);  // the aligned data section
  EXPECT_THROW(gguf::File::parse(cut, "cut.gguf"), FormatError);
}

TEST(Gguf, GettersNameTheKeyAndTheTypes) {
  gguf::Contents c;
  c.metadata = {{"s", Value::of_string("x")}, {"neg", Value::of_i8(-1)}, {"big", Value::of_u64(~0ull)}};
  const auto f = gguf::File::parse(gguf::serialize(c), "g.gguf");
  auto msg = [](auto&& fn) {
    try {
      fn();
    } catch (const FormatError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(msg([&] { f.get_uint("s"); }).find("key 's': expected a non-negative integer, got string"),
            std::string::npos);
  EXPECT_NE(msg([&] { f.get_uint("neg"); }).find("key 'neg'"), std::string::npos);
  EXPECT_EQ(f.get_int("neg"), -1);
  EXPECT_NE(msg([&] { f.get_int("big"); }).find("fits int64"), std::string::npos);
  EXPECT_EQ(f.get_uint("big"), ~0ull);
  EXPECT_NE(msg([&] { f.get_string("missing"); }).find("expected key 'missing'"), std::string::npos);
  EXPECT_NE(msg([&] { f.tensor("w"); }).find("expected tensor 'w'"), std::string::npos);
  EXPECT_NE(msg([&] { f.get_strings("s"); }).find("an array of string"), std::string::npos);
  EXPECT_NE(msg([&] { gguf::File::open("/nonexistent/model.gguf"); }).find("/nonexistent/model.gguf"),
            std::string::npos);
}

TEST(Gguf, WriterRefusesWhatTheReaderWould) {
  auto refuses = [](gguf::Contents c, const std::string& part) {
    try {
      gguf::serialize(c);
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "no error, expected " << part;
  };
  gguf::Contents c;
  c.tensors.push_back({"t.a", {33}, quant::Type::Q8_0, std::vector<uint8_t>(34)});
  refuses(c, "tensor 't.a'");
  c.tensors = {{"t.b", {32}, quant::Type::Q8_0, std::vector<uint8_t>(33)}};
  refuses(c, "expected 34 bytes");
  c.tensors = {{"t.c", {4}, quant::Type::F32, std::vector<uint8_t>(16)},
               {"t.c", {4}, quant::Type::F32, std::vector<uint8_t>(16)}};
  refuses(c, "duplicate");
  c.tensors.clear();
  c.metadata = {{"general.alignment", Value::of_u32(3)}};
  refuses(c, "general.alignment");
  c.metadata = {{"k", Value::of_u8(1)}, {"k", Value::of_u8(2)}};
  refuses(c, "key 'k'");
  c.metadata.clear();
  c.version = 1;
  refuses(c, "version");
}

TEST(Gguf, DescribeListsArchitectureKeysAndTensors) {
  gguf::Contents c;
  c.metadata = {{"general.architecture", Value::of_string("llama")},
                {"llama.block_count", Value::of_u32(30)},
                {"tokenizer.ggml.tokens", Value::string_array({"<s>", "a\nb", "c", "d", "e"})}};
  c.tensors.push_back({"blk.0.attn_q.weight", {64, 3}, quant::Type::Q4_1, std::vector<uint8_t>(2 * 20 * 3)});
  const std::string d = gguf::File::parse(gguf::serialize(c), "m.gguf").describe();
  for (const char* part :
       {"m.gguf: GGUF v3, 3 metadata keys, 1 tensors", "architecture: llama", "llama.block_count: u32 = 30",
        "tokenizer.ggml.tokens: [string; 5] = [\"<s>\", \"a\\nb\", \"c\", \"d\", ...]",
        "blk.0.attn_q.weight: Q4_1 [3, 64], 120 bytes at +0", "tensor types: Q4_1 x1"})
    EXPECT_NE(d.find(part), std::string::npos) << "expected '" << part << "' in:\n" << d;
}
