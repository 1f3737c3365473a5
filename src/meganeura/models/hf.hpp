#pragma once
// Hugging Face model folders (and hub repositories) as a LanguageModel:
//   config.json              the architecture: LlamaForCausalLM / model_type "llama" (SmolLM2, TinyLlama,
//                            Llama 2/3 without rope_scaling). Qwen2 needs q/k/v biases, which build_llama has
//                            not got: it is refused by name.
//   model.safetensors        the weights, or model.safetensors.index.json and its shards; Hugging Face names
//                            mapped to ours by the table in llama.hpp (HF checkpoints are not Q/K-permuted,
//                            so no row moves). rotary_emb.inv_freq buffers of old checkpoints are ignored, as
//                            is an lm_head.weight stored beside tied embeddings; any other tensor is an
//                            error.
//   tokenizer.json           optional: the Tokenizer (byte-level BPE, tokenizer/).
//   tokenizer_config.json    optional: bos_token, eos_token, add_bos_token, chat_template.
//   generation_config.json   optional: eos_token_id (an id or a list), bos_token_id.
//
// Weights stay in their stored dtype (F32, F16, BF16): each WeightView points into the memory map, which
// LanguageModel::storage keeps alive. config.weight_dtype is the token embedding's dtype and tensor_dtypes
// lists the parameters stored otherwise. torch_dtype in config.json is informational and converts nothing;
// HfOptions::weight_dtype converts every weight on the host (rounding to nearest even) into buffers that
// `storage` owns — the precision policy of a caller that wants, say, f16 weights from an f32 checkpoint.
//
// Every missing or malformed field or file is a FormatError naming the file and the field (or tensor).
#include <optional>
#include <string>
#include <string_view>

#include "meganeura/hub/hub.hpp"
#include "meganeura/models/language_model.hpp"

namespace meganeura::models {

struct HfOptions {
  std::string revision = "main";     // hub repositories only: branch, tag or commit
  std::optional<hf::HubConfig> hub;  // absent: SessionConfig::from_env().hub (HF_HOME, HF_TOKEN, ...)
  hf::DownloadOptions download;
  std::optional<DType> weight_dtype;  // convert every weight to this dtype (F32, F16, BF16)
  // KV-cache positions (LlamaConfig::max_context). 0: max_position_embeddings, capped at 4096 so that a
  // long-context model does not reserve gigabytes of cache for a short chat.
  int64_t max_context = 0;
};

// `source`: a folder holding config.json (and the rest), or a hub repository id "ORG/NAME", downloaded
// through hf::download_model into the Hugging Face cache (tokenizer_config.json and generation_config.json
// too, when the repository has them) and loaded from the snapshot. A path that exists is always a folder.
LanguageModel load_hf(const std::string& source, const HfOptions& options = {});

// config.json's text as a LlamaConfig (max_context as HfOptions::max_context says; weight dtypes untouched).
// `origin` names the file in errors. Also returns the architecture name ("llama").
LlamaConfig parse_hf_config(std::string_view json_text, const std::string& origin,
                            std::string* architecture = nullptr, int64_t max_context = 0);

// Our parameter name for a Hugging Face tensor name; "" for a tensor that is no parameter of `config`.
std::string hf_to_llama_name(const std::string& hf_name, const LlamaConfig& config);

}  // namespace meganeura::models
