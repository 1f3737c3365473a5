// gguf::requantize: a file's tensors re-encoded in another storage type, everything else kept.
#include "meganeura/formats/gguf.hpp"
#include "meganeura/quant/quant.hpp"

namespace meganeura::gguf {

Contents requantize(const File& f, quant::Type to) {
  Contents c;
  c.version = f.version();
  for (const auto& [key, value] : f.metadata())
    if (key != "general.file_type") c.metadata.emplace_back(key, value);
  const uint64_t block = quant::info(to).block_elems;
  for (const TensorInfo& t : f.tensors()) {
    Contents::Tensor out{t.name, t.dims, t.type, {}};
    const std::span<const uint8_t> bytes = f.tensor_data(t);
    if (t.dims.size() >= 2 && t.dims[0] % block == 0 && t.type != to) {
      out.type = to;
      out.data = quant::quantize(to, quant::dequantize(t.type, bytes));
    } else {
      out.data.assign(bytes.begin(), bytes.end());
    }
    c.tensors.push_back(std::move(out));
  }
  return c;
}

}  // namespace meganeura::gguf
