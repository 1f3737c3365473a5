// Checkpoint reader: any file either restores wholly (the store then holds the file's tensors) or throws
// CheckpointError and leaves the store untouched; nothing else may happen (another exception, a crash, a
// partial write). The input is written to a private file, as restore_checkpoint reads paths.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
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

const std::string& path() {
  static const std::string p = "/tmp/meganeura-fuzz-checkpoint-" + std::to_string(::getpid()) + ".ckpt";
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    std::ofstream f(path(), std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  MemoryStore store = model();
  const auto meta = store.metadata();
  try {
    restore_checkpoint(path(), store);
    if (store.writes() != store.tensors().size()) std::abort();  // a success writes every tensor once
  } catch (const CheckpointError&) {
    if (store.writes() != 0 || store.metadata() != meta) std::abort();  // a refusal changes nothing
  }
  try {
    (void)inspect_checkpoint(path());
  } catch (const CheckpointError&) {
  }
  return 0;
}
