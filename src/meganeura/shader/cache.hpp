#pragma once
// The on-disk SPIR-V cache. A file is named by a 64-bit hash of the key and also stores the whole key, so
// a hash collision reads as a miss instead of handing back another kernel's code. A 64-bit FNV-1a checksum
// of everything after it covers the whole entry: FNV-1a maps each byte through a bijection of its state, so
// any single changed byte (and almost any other damage) changes the sum. A damaged entry is deleted and
// reported, and the kernel compiles from source: the cache only ever saves time.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace meganeura::shader::detail {

uint64_t fnv1a64(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull);

std::string cache_file(const std::string& dir, const std::string& key);

struct CacheRead {
  std::optional<std::vector<uint32_t>> spirv;  // a hit
  std::string damage;  // why an existing file is not a usable entry ("" on hit or miss)
};
// A missing file, or one made for another key (a hash collision), is a plain miss; anything else that is
// not an intact entry comes back with `damage` set.
CacheRead cache_load(const std::string& path, const std::string& key);
// The same reading of an entry's bytes (cache_load reads the file and calls it): hit, collision or damage.
CacheRead cache_parse(std::span<const char> entry, const std::string& key);
// The bytes cache_store writes for `key` and `spirv` (what cache_parse reads back as a hit).
std::vector<char> cache_encode(const std::string& key, const std::vector<uint32_t>& spirv);
// Returns false when the directory cannot be written; the cache is an optimisation, never a failure.
bool cache_store(const std::string& path, const std::string& key, const std::vector<uint32_t>& spirv);
// Deletes a damaged entry and prints "meganeura: warning: ..." naming it and why (once per path per process
// when it cannot be deleted, so a read-only cache does not repeat itself at every build). Returns the text.
std::string cache_discard(const std::string& path, const std::string& why);

}  // namespace meganeura::shader::detail
