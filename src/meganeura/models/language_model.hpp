#pragma once
// A causal language model as a loader hands it over: the architecture (LlamaConfig), every weight in its
// stored dtype (f32, f16, bf16, or a GGUF block type once the session stores those) without a copy of what a
// memory-mapped file already holds, the tokenizer, and what a generator needs to start, stop and format a
// chat. load_gguf (a .gguf file) and load_hf (config.json + *.safetensors + tokenizer.json) both return one;
// the generator (models/generate.hpp) builds prefill and decode sessions from `config` and uploads `weights`
// by name.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "meganeura/models/llama.hpp"
#include "meganeura/tokenizer/tokenizer.hpp"

namespace meganeura::models {

struct WeightView {
  std::string name;                  // ours (GGUF / llama.cpp names, see llama.hpp)
  DType dtype = DType::F32;          // as the device stores it; config.tensor_dtypes agrees
  Shape shape;                       // logical elements; linear weights [out, in]
  std::span<const std::byte> bytes;  // exactly what Session::set_parameter_bytes takes for this parameter
};

struct LanguageModel {
  std::string source;        // the file or repository it came from, for messages
  std::string architecture;  // "llama", "qwen2", ...
  LlamaConfig config;
  std::vector<WeightView> weights;      // one per llama_parameters(config) entry
  std::shared_ptr<const void> storage;  // keeps whatever `weights` point into alive (mapped files, buffers)
  std::optional<Tokenizer> tokenizer;
  int32_t bos_id = -1;           // -1: none
  bool add_bos = false;          // prepend bos_id when encoding a prompt
  std::vector<int32_t> eos_ids;  // generation stops at any of these
  std::string chat_template;     // Jinja source as shipped (tokenizer_config.json / tokenizer.chat_template)
};

}  // namespace meganeura::models
