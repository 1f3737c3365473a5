// GGUF reader: any byte string either parses or throws a meganeura::Error; nothing else may happen. What
// parses is also described, dequantized tensor by tensor, and written back: the writer must accept it and
// the reader must read the rewritten file to the same metadata and tensors.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "meganeura/core/error.hpp"
#include "meganeura/formats/gguf.hpp"

using namespace meganeura;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gguf::File f = [&]() -> gguf::File {
    try {
      return gguf::File::parse({data, size}, "fuzz");
    } catch (const Error&) {
      return gguf::File::parse(std::vector<uint8_t>{'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0,
                                                    0,   0,   0,   0,   0, 0, 0, 0, 0, 0, 0, 0},
                               "empty");
    }
  }();
  (void)f.describe();
  gguf::Contents c;
  c.version = f.version();
  c.metadata = f.metadata();
  for (const auto& t : f.tensors()) {
    (void)f.dequantize(t);
    const auto bytes = f.tensor_data(t);
    c.tensors.push_back({t.name, t.dims, t.type, {bytes.begin(), bytes.end()}});
  }
  // Tensors the reader accepted at any aligned offsets are laid out afresh by the writer; everything else
  // must survive unchanged.
  const gguf::File back = gguf::File::parse(gguf::serialize(c), "rewritten");
  if (back.metadata() != f.metadata() || back.tensors().size() != f.tensors().size()) __builtin_trap();
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const auto& a = f.tensors()[i];
    const auto& b = back.tensors()[i];
    const auto da = f.tensor_data(a), db = back.tensor_data(b);
    if (a.name != b.name || a.dims != b.dims || a.type != b.type ||
        !std::equal(da.begin(), da.end(), db.begin(), db.end()))
      __builtin_trap();
  }
  return 0;
}
