// Checkpoint files against an in-memory store: round trip, damaged files, mismatched stores, and a save
// that dies before its rename.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <span>

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
    EXPECT_TRUE(fs::exists(tmp));                 // the new file was fully written...
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

// The in-memory reader (what fuzz/fuzz_checkpoint.cpp drives) is the one behind the path: same tensors,
// same header, the same refusals, named by the name it was given.
TEST(Checkpoint, BytesEntryReadsWhatThePathReadsAndNamesTheGivenName) {
  const fs::path d = temp_dir("bytes");
  MemoryStore src = model(1);
  save_checkpoint((d / "a.ckpt").string(), src);
  const std::vector<uint8_t> b = bytes_of(d / "a.ckpt");
  const auto file = std::as_bytes(std::span<const uint8_t>(b));
  MemoryStore dst = model(50);
  const RestoreReport r = restore_checkpoint_bytes(file, "in-memory.ckpt", dst);
  EXPECT_EQ(r.parameters, 2u);
  EXPECT_EQ(r.optimizer_state, 2u);
  expect_holds(dst, 1);
  EXPECT_EQ(dst.metadata().at("optimizer_step"), "6");
  const CheckpointContents a = inspect_checkpoint((d / "a.ckpt").string());
  const CheckpointContents m = inspect_checkpoint_bytes(file, "in-memory.ckpt");
  EXPECT_EQ(m.metadata, a.metadata);
  ASSERT_EQ(m.entries.size(), a.entries.size());
  for (size_t i = 0; i < a.entries.size(); ++i) {
    EXPECT_EQ(m.entries[i].info.name, a.entries[i].info.name);
    EXPECT_EQ(m.entries[i].offset, a.entries[i].offset);
    EXPECT_EQ(m.entries[i].crc32, a.entries[i].crc32);
  }
  MemoryStore other = model(50);
  try {
    restore_checkpoint_bytes(file.first(file.size() - 1), "in-memory.ckpt", other);
    ADD_FAILURE() << "a truncated image restored";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("'in-memory.ckpt'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(other.writes(), 0u);
  EXPECT_THROW(inspect_checkpoint_bytes({}, "empty.ckpt"), CheckpointError);
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

TEST(Checkpoint, DirectoryIsACheckpointErrorNamingIt) {
  const fs::path d = temp_dir("dir");
  MemoryStore dst = model(50);
  const std::string e = restore_error(d, dst);
  EXPECT_NE(e.find(d.string()), std::string::npos) << e;
  EXPECT_NE(e.find("a directory"), std::string::npos) << e;
  EXPECT_THROW(inspect_checkpoint(d.string()), CheckpointError);
  EXPECT_EQ(dst.writes(), 0u);
  fs::remove_all(d);
}

// Checksums are valid (the saver wrote the bad values itself): the counters are checked before any write.
TEST(Checkpoint, BadCountersInTheMetadataChangeNothing) {
  const fs::path d = temp_dir("counters");
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"optimizer_step", "twelve"},
                                                        {"optimizer_step", "-1"},
                                                        {"optimizer_step", "4294967296"},
                                                        {"optimizer_step", ""},
                                                        {"update_step", "1e3"},
                                                        {"epochs_done", "99999999999"},
                                                        {"optimizer_step", "184467440737095516150"}}) {
    MemoryStore src = model(1);
    auto meta = src.metadata();
    meta[key] = value;
    src.set_metadata(meta);
    save_checkpoint((d / "c.ckpt").string(), src);
    MemoryStore dst = model(50);
    const auto before = dst.metadata();
    const std::string e = restore_error(d / "c.ckpt", dst);
    EXPECT_NE(e.find("'" + key + "'"), std::string::npos) << value << ": " << e;
    EXPECT_EQ(dst.writes(), 0u) << value;
    EXPECT_EQ(dst.metadata(), before) << value;
    expect_holds(dst, 50);
  }
  fs::remove_all(d);
}

TEST(Checkpoint, StateFromAFileThatNamesNoOptimizerIsRefused) {
  const fs::path d = temp_dir("noname");
  MemoryStore src = model(1);
  src.set_metadata({{"optimizer_step", "6"}});
  save_checkpoint((d / "a.ckpt").string(), src);
  MemoryStore dst = model(50);
  const std::string e = restore_error(d / "a.ckpt", dst);
  EXPECT_NE(e.find("expected state of adam, got a file that names no optimizer"), std::string::npos) << e;
  EXPECT_EQ(dst.writes(), 0u);
  fs::remove_all(d);
}

TEST(Checkpoint, OrphanTemporaryFilesOfThePathAreRemovedByTheNextSave) {
  const fs::path d = temp_dir("orphans");
  const fs::path path = d / "model.ckpt";
  // a pid that is surely dead: a child that exited and was reaped
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);
  const fs::path dead = path.string() + ".tmp-" + std::to_string(child);
  const fs::path alive = path.string() + ".tmp-1";  // init: alive, maybe saving right now
  const fs::path other = (d / "other.ckpt").string() + ".tmp-" + std::to_string(child);  // another path's
  const fs::path odd = path.string() + ".tmp-12ab";                                      // not a pid
  for (const fs::path& p : {dead, alive, other, odd}) put_bytes(p, std::vector<uint8_t>(64, 7));
  MemoryStore src = model(1);
  save_checkpoint(path.string(), src);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(alive));
  EXPECT_TRUE(fs::exists(other));
  EXPECT_TRUE(fs::exists(odd));
  MemoryStore dst = model(50);
  restore_checkpoint(path.string(), dst);
  expect_holds(dst, 1);
  fs::remove_all(d);
}

namespace {

// Recomputes the header CRC (layout in checkpoint.hpp) so that a mutation inside the header reaches the
// parser's later checks instead of stopping at the checksum.
void reseal_header(std::vector<uint8_t>& b) {
  if (b.size() < 20) return;
  uint32_t header_bytes = 0;
  std::memcpy(&header_bytes, b.data() + 12, 4);
  if (header_bytes > b.size() - 20) return;
  const uint32_t c = static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0), b.data() + 16, header_bytes));
  std::memcpy(b.data() + 16 + header_bytes, &c, 4);
}

// A valid checkpoint of a store that differs from the session's in one random way (or not at all).
MemoryStore mutated_source(std::mt19937& rng) {
  MemoryStore s;
  const int kind = std::uniform_int_distribution<int>(0, 12)(rng);  // 0 and 10..12: the session's own layout
  const std::string names[] = {"w1", "b1", "adam.m/w1", "adam.v/w1"};
  std::vector<Shape> shapes = {{3, 4}, {4}, {3, 4}, {3, 4}};
  std::vector<TensorRole> roles = {TensorRole::Parameter, TensorRole::Parameter, TensorRole::OptimizerState,
                                   TensorRole::OptimizerState};
  std::vector<std::string> ns(std::begin(names), std::end(names));
  const size_t which = std::uniform_int_distribution<size_t>(0, 3)(rng);
  if (kind == 1) shapes[which] = {int64_t(rng() % 5), 4};
  if (kind == 2)
    roles[which] = roles[which] == TensorRole::Parameter ? TensorRole::OptimizerState : TensorRole::Parameter;
  if (kind == 3) ns[which] += "x";
  for (size_t i = 0; i < 4; ++i) {
    if (kind == 4 && i == which) continue;  // a tensor missing
    const TensorInfo t{ns[i], roles[i], DType::F32, shapes[i]};
    std::vector<float> v(t.byte_size() / 4);
    for (float& x : v) x = float(rng() % 1000) / 8.0f;
    s.add(t, to_bytes(v));
  }
  if (kind == 5) s.add_f32("extra", {2}, {1, 2});
  std::map<std::string, std::string> meta = {{"optimizer", "adam"}, {"optimizer_step", "7"}};
  const std::string values[] = {"", "x", "-3", "12", "4294967295", "4294967296", "1 2", "adamw", "0x10"};
  if (kind == 6) meta["optimizer_step"] = values[rng() % 9];
  if (kind == 7) meta["optimizer"] = values[rng() % 9];
  if (kind == 8) meta.erase("optimizer");
  if (kind == 9) meta["epochs_done"] = values[rng() % 9];
  s.set_metadata(meta);
  return s;
}

}  // namespace

// 800 random valid-but-different checkpoints, then random byte damage (some with the header CRC recomputed so
// the damage reaches the parser): each restore either succeeds and the store holds exactly the file's
// tensors, or throws CheckpointError and the store is untouched. Anything else (another exception, a crash, a
// partial write) fails.
TEST(Checkpoint, RandomMutationsRestoreWhollyOrNotAtAll) {
  const fs::path d = temp_dir("property");
  const fs::path path = d / "m.ckpt";
  std::mt19937 rng(2026);
  size_t ok = 0, refused = 0;
  for (int trial = 0; trial < 800; ++trial) {
    MemoryStore src = mutated_source(rng);
    save_checkpoint(path.string(), src);
    std::vector<uint8_t> b = bytes_of(path);
    const int damage = std::uniform_int_distribution<int>(0, 5)(rng);
    if (damage == 1) b[rng() % b.size()] ^= uint8_t(1 + rng() % 255);
    if (damage == 2) b.resize(rng() % b.size());
    if (damage == 3) b.insert(b.begin() + long(rng() % b.size()), uint8_t(rng()));
    if (damage >= 4) {  // inside the header, resealed
      uint32_t header_bytes = 0;
      std::memcpy(&header_bytes, b.data() + 12, 4);
      const size_t at = 16 + rng() % header_bytes;
      b[at] = damage == 4 ? uint8_t(b[at] ^ (1u << (rng() % 8))) : uint8_t(rng());
      reseal_header(b);
    }
    put_bytes(path, b);
    MemoryStore dst = model(50);
    const auto meta_before = dst.metadata();
    try {
      restore_checkpoint(path.string(), dst);
      ++ok;
      // the store holds the file's tensors, byte for byte (read back through the format's own listing)
      const CheckpointContents c = inspect_checkpoint(path.string());
      for (const CheckpointEntry& e : c.entries) {
        bool listed = false;
        for (const TensorInfo& t : dst.tensors()) listed |= t.name == e.info.name;
        if (!listed) continue;
        std::vector<std::byte> want(e.bytes);
        std::memcpy(want.data(), b.data() + e.offset, e.bytes);
        ASSERT_EQ(dst.read(e.info), want) << "trial " << trial << " tensor " << e.info.name;
      }
      ASSERT_EQ(dst.writes(), dst.tensors().size()) << "trial " << trial;
    } catch (const CheckpointError&) {
      ++refused;
      ASSERT_EQ(dst.writes(), 0u) << "trial " << trial;
      ASSERT_EQ(dst.metadata(), meta_before) << "trial " << trial;
      expect_holds(dst, 50);
    }
  }
  // both outcomes occur, so the property was exercised both ways
  EXPECT_GT(ok, 15u);
  EXPECT_GT(refused, 250u);
  fs::remove_all(d);
}
