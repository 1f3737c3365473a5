// safetensors header parser: any byte string either parses, and then the tensors' bytes lie inside the image
// and cover its data section exactly, or throws a meganeura::Error; nothing else may happen.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "meganeura/core/error.hpp"
#include "meganeura/formats/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> image(reinterpret_cast<const std::byte*>(data), size);
  try {
    const meganeura::SafetensorsHeader h = meganeura::parse_safetensors(image, "fuzz");
    uint64_t total = 0;
    for (const meganeura::SafetensorsEntry& e : h.tensors) {
      if (h.data_start + e.end > size || e.begin > e.end) std::abort();  // a view outside the image
      total += e.end - e.begin;
      try {
        (void)meganeura::safetensors_dtype(e, "fuzz");
      } catch (const meganeura::FormatError&) {
      }
    }
    if (h.data_start + total != size) std::abort();  // the tensors must cover the data exactly
  } catch (const meganeura::Error&) {
  }
  return 0;
}
