// Tuning cache reader: any file's text gives its entries, or none with a reason (foreign: intact but made
// for another device; otherwise damage, which the loader deletes); never a crash or an exception. Inputs
// whose first byte is odd get a valid header line and checksum over the rest, so the fuzzer reaches the
// JSON and schema checks behind the checksum. The text goes through tune_cache_parse, the reader behind
// tune_cache_load's path, so no file is written per execution.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "meganeura/session/tune_cache.hpp"
#include "meganeura/shader/cache.hpp"

using namespace meganeura;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const runtime::DeviceCaps caps = [] {
    runtime::DeviceCaps c;
    c.name = "fuzz";
    c.vendor_id = 0x10005;
    c.device_id = 0;
    c.driver_version = 1;
    return c;
  }();
  std::string file;
  if (size > 0 && (data[0] & 1)) {
    char sum[24];
    std::snprintf(sum, sizeof sum, "%016llx",
                  static_cast<unsigned long long>(shader::detail::fnv1a64(data + 1, size - 1)));
    file = "meganeura.tune.v2 " + std::string(sum) + "\n" +
           std::string(reinterpret_cast<const char*>(data + 1), size - 1);
  } else {
    file.assign(reinterpret_cast<const char*>(data), size);
  }
  const TuneCacheParse r = tune_cache_parse(file, caps);
  if (!r.entries.empty() && !r.problem.empty()) __builtin_trap();
  if (r.foreign && r.problem.empty()) __builtin_trap();
  return 0;
}
