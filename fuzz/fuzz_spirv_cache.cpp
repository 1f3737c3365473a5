// SPIR-V disk cache reader: any file at an entry's path is a hit (exactly a module that cache_store wrote,
// for this key), a miss, or damage with a reason; never a crash. Inputs whose first byte is odd get a valid
// header and checksum over the rest, so the fuzzer also reaches the length checks behind the checksum.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "meganeura/shader/cache.hpp"

namespace detail = meganeura::shader::detail;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/meganeura-fuzz-spv-" + std::to_string(::getpid()) + ".spv";
  const std::string key = "compiler=fuzz\nsource\nvoid main() {}";
  std::string file;
  if (size > 0 && (data[0] & 1)) {
    const uint64_t sum = detail::fnv1a64(data + 1, size - 1);
    file.assign("MNSPV002", 8);
    file.append(reinterpret_cast<const char*>(&sum), 8);
    file.append(reinterpret_cast<const char*>(data + 1), size - 1);
  } else {
    file.assign(reinterpret_cast<const char*>(data), size);
  }
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(file.data(), std::streamsize(file.size()));
  }
  const detail::CacheRead r = detail::cache_load(path, key);
  if (r.spirv && !r.damage.empty()) std::abort();
  if (r.spirv) {
    // a hit round-trips: storing it again gives a file that reads back the same words
    const std::vector<uint32_t> words = *r.spirv;
    if (!detail::cache_store(path, key, words)) return 0;
    const detail::CacheRead again = detail::cache_load(path, key);
    if (!again.spirv || *again.spirv != words) std::abort();
  }
  return 0;
}
