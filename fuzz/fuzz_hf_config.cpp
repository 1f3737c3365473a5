// Hugging Face config.json (models::parse_hf_config): any byte string either gives a LlamaConfig whose
// parameter table can be listed and whose tensor names map, or throws a meganeura::Error; nothing else.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "meganeura/core/error.hpp"
#include "meganeura/models/hf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const meganeura::models::LlamaConfig c = meganeura::models::parse_hf_config(text, "fuzz/config.json");
    // Sizes are bounded by the parser, so listing the parameters of even a huge config stays cheap.
    if (c.layers <= 64) {
      for (const auto& [name, shape] : meganeura::models::llama_parameters(c)) (void)shape;
      (void)meganeura::models::hf_to_llama_name("model.layers.3.mlp.up_proj.weight", c);
    }
  } catch (const meganeura::Error&) {
  }
  return 0;
}
