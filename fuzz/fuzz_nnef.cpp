// NNEF reader and importer: any byte string either loads (parse, fragment expansion and lowering into a
// Graph) or throws a meganeura::Error; nothing else may happen. The first byte picks the target: a graph.nnef
// text (variables without files start at zeros, so lowering is reached) or a binary .dat tensor file.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "meganeura/core/error.hpp"
#include "meganeura/nnef/nnef.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  try {
    if (data[0] & 1) {
      const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data + 1), size - 1);
      (void)meganeura::read_nnef_tensor_bytes(bytes, "fuzz.dat");
    } else {
      meganeura::NnefOptions options;
      options.allow_missing_tensors = true;
      const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
      (void)meganeura::load_nnef_text(
          text, "fuzz.nnef", [](const std::string&) { return std::nullopt; }, options);
    }
  } catch (const meganeura::Error&) {
  }
  return 0;
}
