// safetensors against the reference implementation (PyPI `safetensors`, run by
// tests/oracle/safetensors_oracle.py): our writer's files read back identically by it, its files read
// identically by us (F16/BF16 bit patterns included), its sharded checkpoints, checkpoint export both ways;
// and a table of malformed files, each a FormatError naming the file, the tensor and the field.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "meganeura/core/error.hpp"
#include "meganeura/formats/safetensors.hpp"
#include "meganeura/train/checkpoint.hpp"
#include "meganeura/train/safetensors_export.hpp"
#include "paths.hpp"

namespace {

namespace fs = std::filesystem;
using namespace meganeura;

fs::path scratch(const std::string& name) {
  const fs::path d =
      fs::path(::testing::TempDir()) / ("safetensors_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Runs the oracle script with python3 from PATH (scripts/install-oracles.sh pins its safetensors); a failure
// fails the test with the script's stderr.
void oracle(const std::string& args) {
  const std::string err =
      (fs::path(::testing::TempDir()) / ("oracle_err_" + std::to_string(::getpid()))).string();
  const std::string cmd = "python3 " +
                          meganeura::test::source_path("tests/oracle/safetensors_oracle.py").string() + " " +
                          args + " 2>" + err;
  const int rc = std::system(cmd.c_str());
  std::ifstream e(err);
  const std::string text((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
  ASSERT_EQ(rc, 0) << cmd << "\n"
                   << text << "\n(is the pinned safetensors installed? scripts/install-oracles.sh)";
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

nlohmann::json reference_read(const fs::path& file) {
  const fs::path out = file.string() + ".oracle.json";
  oracle("read " + file.string() + " " + out.string());
  return read_json(out);
}

std::string hex(std::span<const std::byte> b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (std::byte x : b) {
    s += d[uint8_t(x) >> 4];
    s += d[uint8_t(x) & 15];
  }
  return s;
}

template <class T>
std::vector<std::byte> bytes_of(const std::vector<T>& v) {
  std::vector<std::byte> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<uint16_t> bit_patterns16(size_t n, uint32_t seed) {
  std::vector<uint16_t> v = {0x7E01, 0xFC00, 0x7C00, 0x0001, 0x83FF, 0x8000, 0x7FC1, 0xFF81, 0x0080, 0x007F};
  std::mt19937 rng(seed);
  while (v.size() < n) v.push_back(static_cast<uint16_t>(rng()));
  v.resize(n);
  return v;
}

TEST(SafetensorsOracle, OurWriterIsReadIdenticallyByTheReference) {
  const fs::path dir = scratch("writer");
  std::vector<float> f32 = {NAN, -0.0f, INFINITY, -INFINITY, 1e-45f, 3.4028235e38f, 1.5f, -2.25f};
  const auto f16 = bit_patterns16(12, 1), bf16 = bit_patterns16(24, 2);
  const std::vector<int32_t> i32 = {INT32_MIN, -1, 0, 1, INT32_MAX};
  const std::vector<uint32_t> u32 = {0, 1, 0xFFFFFFFFu, 0x80000000u};
  const std::vector<float> scalar = {2.5f};
  const auto bf = bytes_of(f32), bh = bytes_of(f16), bb = bytes_of(bf16), bi = bytes_of(i32),
             bu = bytes_of(u32), bs = bytes_of(scalar);
  const std::vector<SafetensorsTensor> tensors = {{"model.f32", DType::F32, {2, 4}, bf},
                                                  {"model.f16", DType::F16, {3, 4}, bh},
                                                  {"model.bf16", DType::BF16, {2, 3, 4}, bb},
                                                  {"ids", DType::I32, {5}, bi},
                                                  {"counts", DType::U32, {2, 2}, bu},
                                                  {"empty", DType::F32, {0, 3}, {}},
                                                  {"scalar", DType::F32, {}, bs}};
  const std::map<std::string, std::string> meta = {{"format", "pt"},
                                                   {"note", "quotes \" and ü and \\ survive"}};
  const fs::path file = dir / "ours.safetensors";
  write_safetensors(file.string(), tensors, meta);

  const nlohmann::json ref = reference_read(file);
  EXPECT_EQ((ref["metadata"].get<std::map<std::string, std::string>>()), meta);
  ASSERT_EQ(ref["tensors"].size(), tensors.size());
  for (const SafetensorsTensor& t : tensors) {
    SCOPED_TRACE(t.name);
    const auto& r = ref["tensors"].at(t.name);
    EXPECT_EQ(r["dtype"], safetensors_dtype_name(t.dtype));
    EXPECT_EQ(r["shape"].get<std::vector<int64_t>>(), t.shape);
    EXPECT_EQ(r["hex"], hex(t.bytes));
    if (t.dtype != DType::BF16) {
      EXPECT_EQ(r["numpy_hex"], hex(t.bytes));  // the numpy API agrees
    }
  }
  // The reference writer pads the header to 8 bytes so every tensor is aligned; so do we.
  std::ifstream in(file, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
  // And our reader reads our file back.
  const SafetensorsFile back(file.string());
  for (const SafetensorsTensor& t : tensors)
    EXPECT_EQ(hex(back.tensor(t.name).bytes), hex(t.bytes)) << t.name;
}

TEST(SafetensorsOracle, ReferenceWriterIsReadIdentically) {
  const fs::path dir = scratch("reference");
  oracle("write " + dir.string());
  const nlohmann::json expected = read_json(dir / "expected.json");
  const SafetensorsFile file((dir / "all_dtypes.safetensors").string());
  EXPECT_EQ(file.metadata(), (expected["metadata"].get<std::map<std::string, std::string>>()));
  ASSERT_EQ(file.entries().size(), expected["tensors"].size());
  for (const auto& [name, e] : expected["tensors"].items()) {
    SCOPED_TRACE(name);
    const SafetensorsView v = file.tensor(name);
    EXPECT_EQ(safetensors_dtype_name(v.dtype), e["dtype"].get<std::string>());
    EXPECT_EQ(v.shape, e["shape"].get<std::vector<int64_t>>());
    EXPECT_EQ(hex(v.bytes), e["hex"].get<std::string>());
  }
  const SafetensorsFile np((dir / "numpy_api.safetensors").string());
  EXPECT_EQ(hex(np.tensor("w").bytes), expected["tensors"]["layers.0.weight"]["hex"].get<std::string>());
  EXPECT_EQ(hex(np.tensor("h").bytes), expected["tensors"]["layers.0.half"]["hex"].get<std::string>());
  EXPECT_EQ(np.tensor("h").dtype, DType::F16);

  // I64 is a valid safetensors dtype the IR lacks: the file opens, the tensor is a clear error.
  const std::string i64 = (dir / "with_i64.safetensors").string();
  const SafetensorsFile f(i64);
  EXPECT_EQ(f.find("position_ids")->dtype, "I64");
  EXPECT_EQ(f.tensor("w").dtype, DType::F32);
  try {
    f.tensor("position_ids");
    ADD_FAILURE() << "an I64 tensor was handed out";
  } catch (const FormatError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(i64), std::string::npos) << m;
    EXPECT_NE(m.find("'position_ids'"), std::string::npos) << m;
    EXPECT_NE(m.find("got I64"), std::string::npos) << m;
  }
}

TEST(SafetensorsOracle, ShardedCheckpointThroughItsIndex) {
  const fs::path dir = scratch("sharded");
  oracle("write " + dir.string());
  const nlohmann::json expected = read_json(dir / "expected.json");
  for (const fs::path& open : {dir / "sharded", dir / "sharded" / "model.safetensors.index.json"}) {
    const SafetensorsModel m(open.string());
    EXPECT_EQ(m.files().size(), 2u);
    EXPECT_EQ(m.names(), (std::vector<std::string>{"counts", "ids", "layers.0.half", "layers.0.weight",
                                                   "layers.1.bf16", "scalar"}));
    for (const std::string& name : m.names()) {
      EXPECT_EQ(hex(m.tensor(name).bytes), expected["tensors"][name]["hex"].get<std::string>()) << name;
    }
    EXPECT_NE(m.file_of("layers.1.bf16").path().find("model-00002-of-00002"), std::string::npos);
  }
  // A single file opens through the same class.
  const SafetensorsModel single((dir / "all_dtypes.safetensors").string());
  EXPECT_EQ(single.names().size(), expected["tensors"].size());
  EXPECT_THROW(single.tensor("nope"), FormatError);
}

// Each malformed index: the error names the index (or shard) and the entry at fault.
TEST(SafetensorsOracle, MalformedIndexesNameTheEntry) {
  const fs::path dir = scratch("bad_index");
  oracle("write " + dir.string());
  const fs::path shards = dir / "sharded";
  const std::string s1 = "model-00001-of-00002.safetensors", s2 = "model-00002-of-00002.safetensors";
  struct Case {
    std::string name, index;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"not json", "{\"weight_map\": ", {"well-formed"}},
      {"no weight_map", "{\"metadata\": {}}", {"'weight_map'", "no such field"}},
      {"shard not a string", "{\"weight_map\": {\"ids\": 3}}", {"'ids'", "shard file name"}},
      {"escaping path", "{\"weight_map\": {\"ids\": \"../" + s1 + "\"}}", {"'ids'", "relative"}},
      {"absolute path", "{\"weight_map\": {\"ids\": \"/etc/passwd\"}}", {"'ids'", "relative"}},
      {"missing shard", "{\"weight_map\": {\"ids\": \"absent.safetensors\"}}", {"absent.safetensors"}},
      {"tensor not in its shard", "{\"weight_map\": {\"ids\": \"" + s2 + "\"}}", {"'ids'", s2}},
      {"unlisted shard tensor",
       "{\"weight_map\": {\"ids\": \"" + s1 + "\", \"layers.0.half\": \"" + s1 + "\"}}",
       {"'layers.0.weight'", "does not list", s1}},
      {"duplicate key",
       "{\"weight_map\": {\"ids\": \"" + s1 + "\", \"ids\": \"" + s1 + "\"}}",
       {"'ids' twice"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path index = shards / "bad.index.json";
    std::ofstream(index) << c.index;
    try {
      SafetensorsModel m(index.string());
      ADD_FAILURE() << "accepted";
    } catch (const FormatError& e) {
      const std::string m = e.what();
      for (const std::string& n : c.needles) EXPECT_NE(m.find(n), std::string::npos) << m << "\nlacks: " << n;
      if (c.name != "missing shard") {
        EXPECT_NE(m.find(index.string()), std::string::npos) << m;
      }
    }
  }
}

// --- malformed files
// ----------------------------------------------------------------------------------------

std::string image(const std::string& header, size_t data_bytes, uint64_t claimed_length = UINT64_MAX) {
  const uint64_t n = claimed_length == UINT64_MAX ? header.size() : claimed_length;
  std::string s(8, '\0');
  std::memcpy(s.data(), &n, 8);
  return s + header + std::string(data_bytes, '\x11');
}

TEST(SafetensorsFormat, MalformedFilesNameFileTensorAndField) {
  const fs::path dir = scratch("malformed");
  const std::string t = R"("a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})";
  struct Case {
    std::string name, bytes;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"shorter than the length", std::string("\x01\x02\x03", 3), {"at least 8 bytes"}},
      {"header length over the limit", image("{}", 0, 100'000'001), {"at most 100000000", "100000001"}},
      {"header past the end", image("{}", 0, 64), {"header of 64 bytes", "truncated"}},
      {"empty header", image("", 0), {"start with '{'"}},
      {"not an object", image("[1, 2]", 0), {"start with '{'"}},
      {"truncated json", image("{\"a\": {\"dtype\": \"F3", 0), {"well-formed"}},
      {"invalid utf-8", image("{\"a\xff\": 1}", 0), {"well-formed"}},
      {"duplicate tensor", image("{" + t + ", " + t + "}", 8), {"'a' twice"}},
      {"metadata not an object", image(R"({"__metadata__": 3})", 0), {"'__metadata__'", "object of strings"}},
      {"metadata value not a string",
       image(R"({"__metadata__": {"k": 1}})", 0),
       {"'__metadata__'", "'k'", "string"}},
      {"entry not an object", image(R"({"a": 5})", 0), {"tensor 'a'", "an object"}},
      {"no dtype", image(R"({"a": {"shape": [], "data_offsets": [0, 4]}})", 4), {"tensor 'a'", "'dtype'"}},
      {"unknown dtype",
       image(R"({"a": {"dtype": "F7", "shape": [], "data_offsets": [0, 4]}})", 4),
       {"tensor 'a'", "'dtype'", "'F7'"}},
      {"shape not an array",
       image(R"({"a": {"dtype": "F32", "shape": 2, "data_offsets": [0, 8]}})", 8),
       {"tensor 'a'", "'shape'"}},
      {"negative dimension",
       image(R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8),
       {"tensor 'a'", "'shape'[0]", "-2"}},
      {"fractional dimension",
       image(R"({"a": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}})", 8),
       {"tensor 'a'", "'shape'[0]"}},
      {"element count overflow",
       image(R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})", 8),
       {"tensor 'a'", "'shape'", "overflow"}},
      {"byte count overflow",
       image(R"({"a": {"dtype": "F32", "shape": [4611686018427387904], "data_offsets": [0, 8]}})", 8),
       {"tensor 'a'", "overflow"}},
      {"offsets not a pair",
       image(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", 8),
       {"tensor 'a'", "'data_offsets'"}},
      {"offsets reversed",
       image(R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}})", 8),
       {"tensor 'a'", "begin <= end"}},
      {"size is not shape × dtype",
       image(R"({"a": {"dtype": "F16", "shape": [2], "data_offsets": [0, 8]}})", 8),
       {"tensor 'a'", "'data_offsets'", "span 4 bytes", "got 8"}},
      {"offsets past the end", image("{" + t + "}", 6), {"tensor 'a'", "'data_offsets'", "truncated"}},
      {"overlap",
       image(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                 "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
             12),
       {"tensor 'b'", "overlap tensor 'a'"}},
      {"gap",
       image(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                 "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
             12),
       {"tensor 'b'", "begin at 4", "where tensor 'a' ends", "gap"}},
      {"trailing bytes", image("{" + t + "}", 12), {"4 trailing bytes", "tensor 'a'"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path file = dir / "bad.safetensors";
    std::ofstream(file, std::ios::binary | std::ios::trunc)
        .write(c.bytes.data(), std::streamsize(c.bytes.size()));
    try {
      SafetensorsFile f(file.string());
      ADD_FAILURE() << "accepted";
    } catch (const FormatError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(file.string()), std::string::npos) << m;
      for (const std::string& n : c.needles) EXPECT_NE(m.find(n), std::string::npos) << m << "\nlacks: " << n;
    }
  }
  // Missing file, and a folder that is neither.
  EXPECT_THROW(SafetensorsFile((dir / "absent.safetensors").string()), FormatError);
  EXPECT_THROW(SafetensorsModel(dir.string()), FormatError);
  // The limits accept what they should: a header of spaces-padded JSON and an empty tensor list.
  const std::string ok = image("{}      ", 0);
  EXPECT_NO_THROW(parse_safetensors(std::as_bytes(std::span(ok.data(), ok.size())), "ok"));
}

TEST(SafetensorsFormat, WriterRejectsWhatCannotBeWritten) {
  const std::vector<float> v = {1, 2, 3};
  const auto b = bytes_of(v);
  EXPECT_THROW(serialize_safetensors({{"a", DType::F32, {2}, b}}), FormatError);  // 12 bytes for 8
  EXPECT_THROW(serialize_safetensors({{"a", DType::F32, {3}, b}, {"a", DType::F32, {3}, b}}), FormatError);
  EXPECT_THROW(serialize_safetensors({{"__metadata__", DType::F32, {3}, b}}), FormatError);
  EXPECT_THROW(write_safetensors("/nonexistent-dir/x.safetensors", {{"a", DType::F32, {3}, b}}), FormatError);
}

// --- checkpoint export
// ------------------------------------------------------------------------------------------

TEST(SafetensorsOracle, CheckpointExportRoundTrip) {
  const fs::path dir = scratch("export");
  MemoryStore store;
  store.add_f32("fc.weight", {2, 3}, {1, -2, 3.5f, NAN, 0, -0.0f});
  store.add(TensorInfo{"fc.bias", TensorRole::Parameter, DType::BF16, {4}}, bytes_of(bit_patterns16(4, 7)));
  store.add_f32("fc.weight.m1", {2, 3}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f}, TensorRole::OptimizerState);
  store.set_metadata({{"optimizer", "adam"}, {"optimizer_step", "7"}});
  const std::string ckpt = (dir / "run.ckpt").string();
  save_checkpoint(ckpt, store);

  // Parameters only by default: what the reference sees.
  const fs::path params = dir / "params.safetensors";
  checkpoint_to_safetensors(ckpt, params.string());
  nlohmann::json ref = reference_read(params);
  EXPECT_EQ(ref["tensors"].size(), 2u);
  EXPECT_EQ(ref["metadata"]["format"], "pt");
  EXPECT_EQ(ref["tensors"]["fc.weight"]["hex"], hex(store.read(store.tensors()[0])));
  EXPECT_EQ(ref["tensors"]["fc.bias"]["dtype"], "BF16");
  EXPECT_EQ(ref["tensors"]["fc.bias"]["hex"], hex(store.read(store.tensors()[1])));

  // With the optimizer state, and back to a checkpoint equal to the first.
  const fs::path full = dir / "full.safetensors";
  checkpoint_to_safetensors(ckpt, full.string(), {.optimizer_state = true});
  ref = reference_read(full);
  EXPECT_EQ(ref["tensors"].size(), 3u);
  EXPECT_EQ(ref["tensors"]["fc.weight.m1"]["hex"], hex(store.read(store.tensors()[2])));
  EXPECT_EQ(ref["metadata"]["optimizer_step"], "7");
  const std::string back = (dir / "back.ckpt").string();
  safetensors_to_checkpoint(full.string(), back);
  const CheckpointContents a = inspect_checkpoint(ckpt), b = inspect_checkpoint(back);
  EXPECT_EQ(a.metadata, b.metadata);
  ASSERT_EQ(a.entries.size(), b.entries.size());
  for (const CheckpointEntry& e : a.entries) {
    auto it = std::find_if(b.entries.begin(), b.entries.end(),
                           [&](const CheckpointEntry& x) { return x.info.name == e.info.name; });
    ASSERT_NE(it, b.entries.end()) << e.info.name;
    EXPECT_EQ(it->info, e.info);  // role, dtype, shape
    EXPECT_EQ(it->crc32, e.crc32) << e.info.name;
  }
  MemoryStore restored;
  for (const TensorInfo& t : store.tensors()) restored.add(t, std::vector<std::byte>(t.byte_size()));
  restore_checkpoint(back, restored);
  for (const TensorInfo& t : store.tensors()) EXPECT_EQ(hex(restored.read(t)), hex(store.read(t))) << t.name;

  // A file from elsewhere (the reference writer's) becomes a checkpoint of parameters.
  oracle("write " + (dir / "ref").string());
  const std::string from_ref = (dir / "from_ref.ckpt").string();
  safetensors_to_checkpoint((dir / "ref" / "all_dtypes.safetensors").string(), from_ref);
  const CheckpointContents c = inspect_checkpoint(from_ref);
  EXPECT_EQ(c.entries.size(), 7u);
  for (const CheckpointEntry& e : c.entries) EXPECT_EQ(e.info.role, TensorRole::Parameter);
  EXPECT_EQ(c.metadata.at("note").rfind("written by safetensors", 0), 0u);
}

}  // namespace
