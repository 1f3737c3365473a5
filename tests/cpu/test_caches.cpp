// The tuning cache file on its own (no device): every damaged byte is detected, the file deleted and named.
// The SPIR-V cache's twin of this test needs the compiler and lives in tests/gpu/test_shader.cpp; its file
// format (the in-memory reader and writer the fuzz target drives) is checked here.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "fake_caps.hpp"
#include "meganeura/session/tune_cache.hpp"
#include "meganeura/shader/cache.hpp"

using namespace meganeura;
namespace fs = std::filesystem;

namespace {

std::vector<char> bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(TuneCacheFile, EveryCorruptedByteIsDetectedDeletedAndNamed) {
  std::random_device rd;
  const fs::path dir = fs::temp_directory_path() / ("meganeura-tunecache-" + std::to_string(rd()));
  const runtime::DeviceCaps caps = meganeura::test::fake_caps();
  const std::string path = tune_cache_path(dir.string(), caps);
  TuneCache entries;
  entries[0x0123456789abcdefull] = {KernelVariant::parse("wg=64"), "fc0", "pointwise", 2.0, 1.0};
  entries[42] = {KernelVariant::parse("tier=scalar tile=16 split=1"), "fc1", "matmul", 3.0, 2.5};
  ASSERT_TRUE(tune_cache_store(path, caps, entries));
  const std::vector<char> good = bytes_of(path);
  {
    const TuneCache back = tune_cache_load(path, caps);
    ASSERT_EQ(back.size(), 2u);
    EXPECT_EQ(back.at(42).variant.to_string(), "tier=scalar tile=16 split=1");
    EXPECT_EQ(back.at(0x0123456789abcdefull).label, "fc0");
  }
  ::testing::internal::CaptureStderr();
  size_t failures = 0;
  for (size_t i = 0; i < good.size() && failures < 5; ++i) {
    std::vector<char> bad = good;
    bad[i] = char(bad[i] ^ 0xFF);
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(bad.data(), std::streamsize(bad.size()));
    }
    std::string warning;
    const TuneCache got = tune_cache_load(path, caps, &warning);
    if (!got.empty() || warning.find("the tuning cache '" + path + "' is damaged") == std::string::npos ||
        fs::exists(path)) {
      ++failures;
      ADD_FAILURE() << "byte " << i << ": " << got.size() << " entries, warning '" << warning << "', file "
                    << (fs::exists(path) ? "kept" : "deleted");
    }
  }
  ::testing::internal::GetCapturedStderr();
  // the next store writes a good file again
  ASSERT_TRUE(tune_cache_store(path, caps, entries));
  EXPECT_EQ(bytes_of(path), good);
  EXPECT_EQ(tune_cache_load(path, caps).size(), 2u);
  fs::remove_all(dir);
}

// tune_cache_parse (the reader behind tune_cache_load, driven by fuzz/fuzz_tune_cache.cpp) reads the file's
// text to the same entries, tells a file of another device (kept) from a damaged one (deleted by the loader).
TEST(TuneCacheFile, ParseOfTheTextIsWhatLoadReads) {
  std::random_device rd;
  const fs::path dir = fs::temp_directory_path() / ("meganeura-tuneparse-" + std::to_string(rd()));
  runtime::DeviceCaps caps = meganeura::test::fake_caps();
  const std::string path = tune_cache_path(dir.string(), caps);
  TuneCache entries;
  entries[7] = {KernelVariant::parse("wg=128"), "fc0", "pointwise", 2.0, 1.0};
  ASSERT_TRUE(tune_cache_store(path, caps, entries));
  const std::vector<char> good = bytes_of(path);
  const std::string text(good.begin(), good.end());
  const TuneCacheParse p = tune_cache_parse(text, caps);
  EXPECT_EQ(p.problem, "");
  ASSERT_EQ(p.entries.size(), 1u);
  EXPECT_EQ(p.entries.at(7).variant.to_string(), tune_cache_load(path, caps).at(7).variant.to_string());
  std::string flipped = text;
  flipped.back() = char(flipped.back() ^ 1);
  const TuneCacheParse bad = tune_cache_parse(flipped, caps);
  EXPECT_TRUE(bad.entries.empty());
  EXPECT_EQ(bad.problem, "checksum mismatch");
  EXPECT_FALSE(bad.foreign);
  caps.driver_version += 1;
  const TuneCacheParse foreign = tune_cache_parse(text, caps);
  EXPECT_TRUE(foreign.entries.empty());
  EXPECT_TRUE(foreign.foreign) << foreign.problem;
  EXPECT_NE(tune_cache_parse("", caps).problem, "");
  fs::remove_all(dir);
}

// fuzz_tune_cache found json's get<uint32_t> converting a driver_version of 1.3e50 (undefined behaviour, read
// as "another device"): a device field that is not a 32-bit unsigned integer is damage, named.
TEST(TuneCacheFile, DeviceFieldsMustBeUnsignedIntegers) {
  const runtime::DeviceCaps caps = meganeura::test::fake_caps();
  for (const std::string bad :
       {"133333333333333333333333333333333333333333333333333", "1.5", "-1", "4294967296"}) {
    const std::string body =
        "{\"schema\": \"meganeura.tune.v1\", \"device\": {\"name\": \"x\", \"vendor_id\": " +
        std::to_string(caps.vendor_id) + ", \"device_id\": " + std::to_string(caps.device_id) +
        ", \"driver_version\": " + bad + "}, \"kernels\": {}}";
    char sum[24];
    std::snprintf(sum, sizeof sum, "%016llx",
                  static_cast<unsigned long long>(shader::detail::fnv1a64(body.data(), body.size())));
    const TuneCacheParse r = tune_cache_parse("meganeura.tune.v2 " + std::string(sum) + "\n" + body, caps);
    EXPECT_FALSE(r.foreign) << bad;
    EXPECT_NE(r.problem.find("driver_version"), std::string::npos) << bad << ": " << r.problem;
  }
}

// cache_encode is byte for byte what cache_store writes; cache_parse reads it back as a hit for its key, a
// plain miss for another key (a hash collision), and damage for any changed byte.
TEST(SpirvCacheFile, EncodeIsWhatStoreWritesAndParseReadsItBack) {
  std::random_device rd;
  const fs::path dir = fs::temp_directory_path() / ("meganeura-spvparse-" + std::to_string(rd()));
  const std::string key = "compiler=test\nsource\nvoid main() {}";
  const std::vector<uint32_t> words = {0x07230203u, 0x00010300u, 7, 9, 0};
  const std::string path = shader::detail::cache_file(dir.string(), key);
  ASSERT_TRUE(shader::detail::cache_store(path, key, words));
  const std::vector<char> entry = shader::detail::cache_encode(key, words);
  EXPECT_EQ(bytes_of(path), entry);
  const shader::detail::CacheRead hit = shader::detail::cache_parse(entry, key);
  ASSERT_TRUE(hit.spirv.has_value());
  EXPECT_EQ(*hit.spirv, words);
  EXPECT_EQ(hit.damage, "");
  const shader::detail::CacheRead other = shader::detail::cache_parse(entry, key + " ");
  EXPECT_FALSE(other.spirv.has_value());
  EXPECT_EQ(other.damage, "");
  for (size_t i = 0; i < entry.size(); ++i) {
    std::vector<char> bad = entry;
    bad[i] = char(bad[i] ^ 0x10);
    const shader::detail::CacheRead r = shader::detail::cache_parse(bad, key);
    EXPECT_FALSE(r.spirv.has_value()) << "byte " << i;
    EXPECT_NE(r.damage, "") << "byte " << i;
  }
  fs::remove_all(dir);
}

}  // namespace
