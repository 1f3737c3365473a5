// IDX reader: any byte string either decodes or throws a meganeura::Error; nothing else may happen.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "meganeura/core/error.hpp"
#include "meganeura/data/idx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto a = meganeura::parse_idx(std::vector<uint8_t>(data, data + size), "fuzz");
    (void)a.to_float();
  } catch (const meganeura::Error&) {
  }
  return 0;
}
