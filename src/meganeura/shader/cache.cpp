#include "meganeura/shader/cache.hpp"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <set>

namespace meganeura::shader::detail {
namespace {

// Version 2 added the checksum; a version-1 file reads as damaged once and is replaced.
constexpr char kMagic[8] = {'M', 'N', 'S', 'P', 'V', '0', '0', '2'};
constexpr size_t kMaxWords = size_t(1) << 26;

template <class T>
bool take(std::span<const char> b, size_t& pos, T& out) {
  if (b.size() - pos < sizeof(T)) return false;
  std::memcpy(&out, b.data() + pos, sizeof(T));
  pos += sizeof(T);
  return true;
}

}  // namespace

uint64_t fnv1a64(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string cache_file(const std::string& dir, const std::string& key) {
  char name[32];
  std::snprintf(name, sizeof(name), "%016llx.spv",
                static_cast<unsigned long long>(fnv1a64(key.data(), key.size())));
  return (std::filesystem::path(dir) / name).string();
}

CacheRead cache_load(const std::string& path, const std::string& key) {
  CacheRead r;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return r;
  if (!std::filesystem::is_regular_file(path, ec)) {
    r.damage = "not a regular file";
    return r;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return r;  // unreadable: a miss (the store will fail the same way and say nothing)
  const std::vector<char> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return cache_parse(b, key);
}

CacheRead cache_parse(std::span<const char> b, const std::string& key) {
  CacheRead r;
  size_t pos = 0;
  uint64_t sum = 0, key_len = 0, words = 0;
  if (b.size() < 8 || std::memcmp(b.data(), kMagic, 8) != 0) {
    r.damage = "expected the magic 'MNSPV002', got another header";
    return r;
  }
  pos = 8;
  if (!take(b, pos, sum)) {
    r.damage = "truncated header";
    return r;
  }
  if (fnv1a64(b.data() + pos, b.size() - pos) != sum) {
    r.damage = "checksum mismatch";
    return r;
  }
  // The checksum held: what follows was written by cache_store, but check every length anyway.
  if (!take(b, pos, key_len) || key_len > b.size() - pos) {
    r.damage = "bad key length";
    return r;
  }
  if (key_len != key.size() || std::memcmp(b.data() + pos, key.data(), key.size()) != 0)
    return r;  // collision
  pos += key_len;
  if (!take(b, pos, words) || words == 0 || words > kMaxWords || words * 4 != b.size() - pos) {
    r.damage = "bad module length";
    return r;
  }
  std::vector<uint32_t> spirv(words);
  std::memcpy(spirv.data(), b.data() + pos, words * 4);
  r.spirv = std::move(spirv);
  return r;
}

std::vector<char> cache_encode(const std::string& key, const std::vector<uint32_t>& spirv) {
  const uint64_t key_len = key.size(), words = spirv.size();
  // Sized once and filled by memcpy: GCC 12 misreads vector range inserts here (-Warray-bounds, bug 105329).
  std::vector<char> out(16 + 8 + key.size() + 8 + words * 4);
  size_t at = 0;
  auto put = [&](const void* p, size_t n) {
    if (n > 0) std::memcpy(out.data() + at, p, n);
    at += n;
  };
  put(kMagic, 8);
  at += 8;  // the checksum, filled in last
  put(&key_len, 8);
  put(key.data(), key.size());
  put(&words, 8);
  put(spirv.data(), words * 4);
  const uint64_t sum = fnv1a64(out.data() + 16, out.size() - 16);
  std::memcpy(out.data() + 8, &sum, 8);
  return out;
}

bool cache_store(const std::string& path, const std::string& key, const std::vector<uint32_t>& spirv) {
  std::error_code ec;
  const std::filesystem::path target(path);
  std::filesystem::create_directories(target.parent_path(), ec);
  if (ec) return false;
  const std::vector<char> entry = cache_encode(key, spirv);
  // Write to a private name and rename, so a concurrent reader never sees half a file.
  std::random_device rd;
  const std::filesystem::path tmp = target.string() + ".tmp" + std::to_string(rd());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out.write(entry.data(), static_cast<std::streamsize>(entry.size()));
    if (!out) {
      out.close();
      std::filesystem::remove(tmp, ec);
      return false;
    }
  }
  std::filesystem::rename(tmp, target, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return false;
  }
  return true;
}

std::string cache_discard(const std::string& path, const std::string& why) {
  static std::mutex mutex;
  static std::set<std::string> undeletable;  // reported already: say it once, not at every build
  std::error_code ec;
  std::filesystem::remove(path, ec);
  const std::string msg = "the SPIR-V cache entry '" + path + "' is damaged (" + why + "); " +
                          (ec ? "could not delete it (" + ec.message() + ")" : std::string("deleted it")) +
                          ", compiling the kernel from source";
  const std::lock_guard<std::mutex> lock(mutex);
  if (!ec || undeletable.insert(path).second) std::fprintf(stderr, "meganeura: warning: %s\n", msg.c_str());
  return msg;
}

}  // namespace meganeura::shader::detail
