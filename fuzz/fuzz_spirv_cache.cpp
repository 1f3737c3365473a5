// SPIR-V disk cache reader: any entry's bytes are a hit (exactly a module that cache_store wrote, for this
// key), a miss, or damage with a reason; never a crash. Inputs whose first byte is odd get a valid header
// and checksum over the rest, so the fuzzer also reaches the length checks behind the checksum. The bytes
// go through cache_parse, the reader behind cache_load's path, so no file is written per execution.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "meganeura/shader/cache.hpp"

namespace detail = meganeura::shader::detail;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string key = "compiler=fuzz\nsource\nvoid main() {}";
  std::vector<char> file;
  if (size > 0 && (data[0] & 1)) {
    const uint64_t sum = detail::fnv1a64(data + 1, size - 1);
    static const char magic[] = "MNSPV002";
    file.assign(magic, magic + 8);
    file.insert(file.end(), reinterpret_cast<const char*>(&sum), reinterpret_cast<const char*>(&sum) + 8);
    file.insert(file.end(), reinterpret_cast<const char*>(data + 1),
                reinterpret_cast<const char*>(data + size));
  } else {
    file.assign(reinterpret_cast<const char*>(data), reinterpret_cast<const char*>(data + size));
  }
  const detail::CacheRead r = detail::cache_parse(file, key);
  if (r.spirv && !r.damage.empty()) std::abort();
  if (r.spirv) {
    // a hit round-trips: what cache_store would write for it is the same entry and reads back the same
    const std::vector<char> again = detail::cache_encode(key, *r.spirv);
    if (again != file) std::abort();
    const detail::CacheRead back = detail::cache_parse(again, key);
    if (!back.spirv || *back.spirv != *r.spirv) std::abort();
  }
  return 0;
}
