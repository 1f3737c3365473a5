// Checkpoint reader: any byte string either restores wholly (the store then holds the file's tensors) or
// throws CheckpointError and leaves the store untouched; nothing else may happen (another exception, a
// crash, a partial write). The bytes go through restore_checkpoint_bytes, the reader behind
// restore_checkpoint's path, so no file is written per execution.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "meganeura/core/error.hpp"
#include "meganeura/train/checkpoint.hpp"

using namespace meganeura;

namespace {

MemoryStore model() {
  MemoryStore s;
  s.add_f32("w1", {3, 4}, std::vector<float>(12, 0.5f));
  s.add_f32("b1", {4}, std::vector<float>(4, 0.25f));
  s.add_f32("optim.m/w1", {3, 4}, std::vector<float>(12, 0.0f), TensorRole::OptimizerState);
  s.set_metadata({{"optimizer", "adam"}, {"optimizer_step", "3"}});
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  MemoryStore store = model();
  const auto meta = store.metadata();
  try {
    restore_checkpoint_bytes(file, "fuzz.ckpt", store);
    if (store.writes() != store.tensors().size()) std::abort();  // a success writes every tensor once
  } catch (const CheckpointError&) {
    if (store.writes() != 0 || store.metadata() != meta) std::abort();  // a refusal changes nothing
  }
  try {
    (void)inspect_checkpoint_bytes(file, "fuzz.ckpt");
  } catch (const CheckpointError&) {
  }
  return 0;
}
