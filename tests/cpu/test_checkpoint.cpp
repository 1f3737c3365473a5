// Checkpoint files against an in-memory store: round trip, damaged files, mismatched stores, and a save
// that dies before its rename.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "meganeura/core/error.hpp"
#include "meganeura/train/checkpoint.hpp"

namespace fs = std::filesystem;
using namespace meganeura;

namespace {

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("meganeura-test-ckpt-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<float> ramp(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + 0.25f * static_cast<float>(i);
  return v;
}

// A model with two parameters and Adam-like state; `base` makes different stores hold different values.
MemoryStore model(float base, bool with_state = true) {
  MemoryStore s;
  s.add_f32("w1", {3, 4}, ramp(12, base));
  s.add_f32("b1", {4}, ramp(4, base + 100));
  if (with_state) {
    s.add_f32("adam.m/w1", {3, 4}, ramp(12, base + 200), TensorRole::OptimizerState);
    s.add_f32("adam.v/w1", {3, 4}, ramp(12, base + 300), TensorRole::OptimizerState);
    s.set_metadata({{"optimizer", "adam"}, {"optimizer_step", std::to_string(static_cast<int>(base) + 5)}});
  }
  return s;
}

std::vector<uint8_t> bytes_of(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void put_bytes(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

std::string restore_error(const fs::path& p, MemoryStore& dst) {
  try {
    restore_checkpoint(p.string(), dst);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

// Every tensor and the metadata of `s` equal those of a fresh model(base).
void expect_holds(MemoryStore& s, float base) {
  MemoryStore ref = model(base);
  for (const TensorInfo& t : s.tensors()) EXPECT_EQ(s.f32(t.name), ref.f32(t.name)) << t.name;
}

}  // namespace

TEST(Checkpoint, RoundTripRestoresEveryTensorAndMetadata) {
  const fs::path d = temp_dir("roundtrip");
  MemoryStore src = model(1);
  save_checkpoint((d / "a.ckpt").string(), src);
  MemoryStore dst = model(50);
  const RestoreReport r = restore_checkpoint((d / "a.ckpt").string(), dst);
  EXPECT_EQ(r.parameters, 2u);
  EXPECT_EQ(r.optimizer_state, 2u);
  expect_holds(dst, 1);
  EXPECT_EQ(dst.metadata().at("optimizer_step"), "6");
  const CheckpointContents c = inspect_checkpoint((d / "a.ckpt").string());
  EXPECT_EQ(c.version, kCheckpointVersion);
  ASSERT_EQ(c.entries.size(), 4u);
  EXPECT_EQ(c.entries[0].info.name, "w1");
  EXPECT_EQ(c.entries[0].bytes, 48u);  // logical 3*4 floats, no padding
  fs::remove_all(d);
}

TEST(Checkpoint, InferenceStoreLoadsParametersOnly) {
  const fs::path d = temp_dir("inference");
  MemoryStore src = model(1);
  save_checkpoint((d / "a.ckpt").string(), src);
  MemoryStore infer = model(50, /*with_state=*/false);
  const RestoreReport r = restore_checkpoint((d / "a.ckpt").string(), infer);
  EXPECT_EQ(r.parameters, 2u);
  EXPECT_EQ(r.optimizer_state, 0u);
  EXPECT_EQ(r.skipped_optimizer_state, 2u);
  EXPECT_EQ(infer.f32("w1"), ramp(12, 1));
  EXPECT_EQ(infer.metadata().count("optimizer_step"), 0u);
  fs::remove_all(d);
}

TEST(Checkpoint, TruncatedFilesAreRejectedAndNothingChanges) {
  const fs::path d = temp_dir("truncated");
  MemoryStore src = model(1);
  save_checkpoint((d / "a.ckpt").string(), src);
  const std::vector<uint8_t> full = bytes_of(d / "a.ckpt");
  for (size_t keep : {size_t{0}, size_t{7}, size_t{20}, full.size() / 2, full.size() - 1}) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(keep));
    put_bytes(d / "cut.ckpt", cut);
    MemoryStore dst = model(50);
    const std::string e = restore_error(d / "cut.ckpt", dst);
    EXPECT_NE(e.find("cut.ckpt"), std::string::npos) << "keep " << keep << ": " << e;
    EXPECT_EQ(dst.writes(), 0u);
    expect_holds(dst, 50);
  }
  fs::remove_all(d);
}

TEST(Checkpoint, EveryFlippedBitIsDetected) {
  const fs::path d = temp_dir("bitflip");
  MemoryStore src = model(1);
  save_checkpoint((d / "a.ckpt").string(), src);
  const std::vector<uint8_t> full = bytes_of(d / "a.ckpt");
  // Every byte position, one bit each, rotating which bit: header, checksums, payload and trailer alike.
  for (size_t i = 0; i < full.size(); ++i) {
    std::vector<uint8_t> bad = full;
    bad[i] ^= static_cast<uint8_t>(1u << (i % 8));
    put_bytes(d / "bad.ckpt", bad);
    MemoryStore dst = model(50);
    const std::string e = restore_error(d / "bad.ckpt", dst);
    ASSERT_FALSE(e.empty()) << "flip at byte " << i << " went unnoticed";
    ASSERT_EQ(dst.writes(), 0u) << "byte " << i;
  }
  // A flip inside a tensor's payload names that tensor.
  const CheckpointContents c = inspect_checkpoint((d / "a.ckpt").string());
  std::vector<uint8_t> bad = full;
  bad[c.entries[1].offset + 2] ^= 0x10;
  put_bytes(d / "bad.ckpt", bad);
  MemoryStore dst = model(50);
  const std::string e = restore_error(d / "bad.ckpt", dst);
  EXPECT_NE(e.find("'b1'"), std::string::npos) << e;
  EXPECT_NE(e.find("CRC32"), std::string::npos) << e;
  fs::remove_all(d);
}

TEST(Checkpoint, WrongShapesAndNamesAreListedAndNothingChanges) {
  const fs::path d = temp_dir("shape");
  MemoryStore src;
  src.add_f32("w1", {4, 3}, ramp(12, 1));  // transposed shape, same size
  src.add_f32("b1", {4}, ramp(4, 1));
  src.add_f32("extra", {2}, ramp(2, 1));
  src.add_f32("adam.m/w1", {3, 4}, ramp(12, 1), TensorRole::OptimizerState);
  save_checkpoint((d / "a.ckpt").string(), src);
  MemoryStore dst = model(50);
  const std::string e = restore_error(d / "a.ckpt", dst);
  EXPECT_NE(e.find("nothing was changed"), std::string::npos) << e;
  EXPECT_NE(e.find("f32[3, 4]"), std::string::npos) << e;
  EXPECT_NE(e.find("f32[4, 3]"), std::string::npos) << e;
  EXPECT_NE(e.find("unexpected parameter 'extra'"), std::string::npos) << e;
  EXPECT_NE(e.find("missing optimizer state 'adam.v/w1'"), std::string::npos) << e;
  EXPECT_EQ(dst.writes(), 0u);
  expect_holds(dst, 50);
  fs::remove_all(d);
}

TEST(Checkpoint, DtypeMismatchIsADifference) {
  const fs::path d = temp_dir("dtype");
  MemoryStore src;
  std::vector<std::byte> b(12 * 4);
  src.add(TensorInfo{"w1", TensorRole::Parameter, DType::I32, {3, 4}}, b);
  src.add_f32("b1", {4}, ramp(4, 1));
  save_checkpoint((d / "a.ckpt").string(), src);
  MemoryStore dst = model(50, false);
  const std::string e = restore_error(d / "a.ckpt", dst);
  EXPECT_NE(e.find("i32[3, 4]"), std::string::npos) << e;
  EXPECT_EQ(dst.writes(), 0u);
  fs::remove_all(d);
}

TEST(Checkpoint, SaveInterruptedBeforeRenameKeepsThePreviousFile) {
  const fs::path d = temp_dir("interrupt");
  const fs::path path = d / "model.ckpt";
  MemoryStore first = model(1);
  save_checkpoint(path.string(), first);
  const std::vector<uint8_t> before = bytes_of(path);
  MemoryStore second = model(7);
  std::string temp_seen;
  SaveOptions crash;
  crash.before_rename = [&](const std::string& tmp) {
    temp_seen = tmp;
    EXPECT_TRUE(fs::exists(tmp));  // the new file was fully written...
    throw std::runtime_error("simulated crash");  // ...but the process dies before the rename
  };
  EXPECT_THROW(save_checkpoint(path.string(), second, crash), std::runtime_error);
  EXPECT_EQ(bytes_of(path), before);
  EXPECT_FALSE(temp_seen.empty());
  EXPECT_FALSE(fs::exists(temp_seen));
  MemoryStore dst = model(50);
  restore_checkpoint(path.string(), dst);
  expect_holds(dst, 1);
  // Without the crash the same save replaces the file.
  save_checkpoint(path.string(), second);
  restore_checkpoint(path.string(), dst);
  expect_holds(dst, 7);
  fs::remove_all(d);
}

TEST(Checkpoint, MissingFileAndForeignFileAreNamed) {
  const fs::path d = temp_dir("missing");
  MemoryStore dst = model(50);
  EXPECT_NE(restore_error(d / "nope.ckpt", dst).find("nope.ckpt"), std::string::npos);
  put_bytes(d / "foreign.bin", std::vector<uint8_t>(200, 'x'));
  const std::string e = restore_error(d / "foreign.bin", dst);
  EXPECT_NE(e.find("foreign.bin"), std::string::npos) << e;
  EXPECT_NE(e.find("magic"), std::string::npos) << e;
  EXPECT_EQ(dst.writes(), 0u);
  fs::remove_all(d);
}

TEST(Checkpoint, OptimizerKindMustMatchWhenStateIsRestored) {
  const fs::path d = temp_dir("kind");
  MemoryStore src = model(1);  // metadata optimizer=adam
  save_checkpoint((d / "a.ckpt").string(), src);
  MemoryStore dst = model(50);
  dst.set_metadata({{"optimizer", "adamw"}});
  const std::string e = restore_error(d / "a.ckpt", dst);
  EXPECT_NE(e.find("expected state of adamw, got adam"), std::string::npos) << e;
  EXPECT_EQ(dst.writes(), 0u);
  fs::remove_all(d);
}
