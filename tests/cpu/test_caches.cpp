// The tuning cache file on its own (no device): every damaged byte is detected, the file deleted and named.
// The SPIR-V cache's twin of this test needs the compiler and lives in tests/gpu/test_shader.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "fake_caps.hpp"
#include "meganeura/session/tune_cache.hpp"

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

}  // namespace
