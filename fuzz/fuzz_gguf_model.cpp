// GGUF model loading from untrusted bytes: the architecture metadata (gguf_llama_config), the weights
// (load_gguf: permutation and host dequantization) and the embedded tokenizer (gguf::tokenizer_data, then
// Tokenizer::from_data, encode and decode). Any byte string either loads or throws a meganeura::Error.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "meganeura/core/error.hpp"
#include "meganeura/formats/gguf_tokenizer.hpp"
#include "meganeura/models/gguf_model.hpp"

using namespace meganeura;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<gguf::File> f;
  try {
    f = gguf::File::parse({data, size}, "fuzz");
  } catch (const Error&) {
    return 0;
  }
  // The tokenizer on its own, so that files without a valid model still exercise it.
  try {
    const TokenizerData d = gguf::tokenizer_data(*f);
    (void)gguf::end_of_generation_ids(*f, d);
    const Tokenizer t = Tokenizer::from_data(d);
    const auto ids = t.encode("Hello, world! <|im_end|> 12345 \xc3\xa9\xff");
    (void)t.decode(ids);
  } catch (const Error&) {
  }
  try {
    const models::LanguageModel m = models::load_gguf(*f);
    size_t total = 0;
    for (const auto& w : m.weights) total += w.bytes.size();
    if (m.weights.empty() || total == 0) __builtin_trap();  // a loaded model has weights
  } catch (const Error&) {
  }
  return 0;
}
