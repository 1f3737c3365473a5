#pragma once
// Checkpoints to and from safetensors, the format Hugging Face tools read. A safetensors file has no roles,
// so optimizer state (exported only on request) is listed by name in
// __metadata__["meganeura.optimizer_state"] (a JSON array); the store's own metadata (optimizer,
// optimizer_step) travels in __metadata__ as strings, next to "format": "pt", which transformers requires of
// a safetensors checkpoint.
#include <string>

#include "meganeura/train/checkpoint.hpp"
#include "meganeura/train/tensor_store.hpp"

namespace meganeura {

inline constexpr const char* kSafetensorsRolesKey = "meganeura.optimizer_state";

struct SafetensorsExportOptions {
  bool optimizer_state = false;  // parameters only by default: what inference and other tools want
};

// Writes the store's tensors (every dtype the IR has) atomically.
void save_safetensors(const std::string& path, TensorStore& store,
                      const SafetensorsExportOptions& options = {});
// Every tensor of a safetensors file in a host-memory store, roles and metadata as save_safetensors wrote
// them (a file from elsewhere: all parameters). FormatError for a malformed file or a dtype the IR lacks.
MemoryStore read_safetensors_store(const std::string& path);

// A checkpoint (checked fully, as a restore would) written as safetensors.
void checkpoint_to_safetensors(const std::string& checkpoint, const std::string& out,
                               const SafetensorsExportOptions& options = {});
// A safetensors file written as a checkpoint, roles and metadata restored.
void safetensors_to_checkpoint(const std::string& in, const std::string& checkpoint);

}  // namespace meganeura
