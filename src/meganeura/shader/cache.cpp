#include "meganeura/shader/cache.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

namespace meganeura::shader::detail {
namespace {

constexpr char kMagic[8] = {'M', 'N', 'S', 'P', 'V', '0', '0', '1'};

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

std::string cache_file(const std::string& dir, const std::string& key) {
  char name[32];
  std::snprintf(name, sizeof(name), "%016llx.spv", static_cast<unsigned long long>(fnv1a(key)));
  return (std::filesystem::path(dir) / name).string();
}

std::optional<std::vector<uint32_t>> cache_load(const std::string& path, const std::string& key) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  char magic[8];
  uint64_t key_len = 0, words = 0;
  if (!in.read(magic, 8) || std::string(magic, 8) != std::string(kMagic, 8)) return std::nullopt;
  if (!in.read(reinterpret_cast<char*>(&key_len), 8) || key_len != key.size()) return std::nullopt;
  std::string stored(key_len, '\0');
  if (!in.read(stored.data(), static_cast<std::streamsize>(key_len)) || stored != key) return std::nullopt;
  if (!in.read(reinterpret_cast<char*>(&words), 8) || words == 0 || words > (1u << 26)) return std::nullopt;
  std::vector<uint32_t> spirv(words);
  if (!in.read(reinterpret_cast<char*>(spirv.data()), static_cast<std::streamsize>(words * 4))) return std::nullopt;
  return spirv;
}

bool cache_store(const std::string& path, const std::string& key, const std::vector<uint32_t>& spirv) {
  std::error_code ec;
  const std::filesystem::path target(path);
  std::filesystem::create_directories(target.parent_path(), ec);
  if (ec) return false;
  // Write to a private name and rename, so a concurrent reader never sees half a file.
  std::random_device rd;
  const std::filesystem::path tmp = target.string() + ".tmp" + std::to_string(rd());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    const uint64_t key_len = key.size(), words = spirv.size();
    out.write(kMagic, 8);
    out.write(reinterpret_cast<const char*>(&key_len), 8);
    out.write(key.data(), static_cast<std::streamsize>(key.size()));
    out.write(reinterpret_cast<const char*>(&words), 8);
    out.write(reinterpret_cast<const char*>(spirv.data()), static_cast<std::streamsize>(words * 4));
    if (!out) {
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

}  // namespace meganeura::shader::detail
