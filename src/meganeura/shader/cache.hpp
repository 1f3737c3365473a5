#pragma once
// The on-disk SPIR-V cache. A file is named by a 64-bit hash of the key and also stores the whole key, so
// a hash collision reads as a miss instead of handing back another kernel's code.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace meganeura::shader::detail {

std::string cache_file(const std::string& dir, const std::string& key);
std::optional<std::vector<uint32_t>> cache_load(const std::string& path, const std::string& key);
// Returns false when the directory cannot be written; the cache is an optimisation, never a failure.
bool cache_store(const std::string& path, const std::string& key, const std::vector<uint32_t>& spirv);

}  // namespace meganeura::shader::detail
