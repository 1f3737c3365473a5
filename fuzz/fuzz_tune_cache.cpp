// Tuning cache reader: any file gives its entries, or none with a warning (and a damaged file deleted);
// never a crash or an exception. Inputs whose first byte is odd get a valid header line and checksum over
// the rest, so the fuzzer reaches the JSON and schema checks behind the checksum.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "meganeura/session/tune_cache.hpp"
#include "meganeura/shader/cache.hpp"

using namespace meganeura;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static runtime::DeviceCaps caps = [] {
    runtime::DeviceCaps c;
    c.name = "fuzz";
    c.vendor_id = 0x10005;
    c.device_id = 0;
    c.driver_version = 1;
    return c;
  }();
  static const std::string dir = "/tmp/meganeura-fuzz-tune-" + std::to_string(::getpid());
  static const std::string path = tune_cache_path(dir, caps);
  static const bool made = std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  (void)made;
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
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(file.data(), std::streamsize(file.size()));
  }
  std::string warning;
  const TuneCache entries = tune_cache_load(path, caps, &warning);
  if (!entries.empty() && !warning.empty()) __builtin_trap();
  return 0;
}
