// ONNX reader and importer: any byte string either loads (parse + lowering into a Graph) or throws a
// meganeura::Error; nothing else may happen. The first byte picks the target: a ModelProto or a TensorProto.
#include <cstddef>
#include <cstdint>
#include <span>

#include "meganeura/core/error.hpp"
#include "meganeura/onnx/onnx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  try {
    if (data[0] & 1) {
      (void)meganeura::read_onnx_tensor_bytes(bytes, "fuzz");
    } else {
      meganeura::OnnxOptions options;
      options.dims["N"] = 2;  // a symbolic dimension the seeds use
      (void)meganeura::load_onnx_bytes(bytes, "fuzz", options);
    }
  } catch (const meganeura::Error&) {
  }
  return 0;
}
