// Trains the README's two-layer MLP (784-128-10, batch 32) — or a small CNN with --model cnn — on
// Fashion-MNIST and reports test accuracy: the same recipe and flags as `meganeura train` (cli/train.cpp).
// `--json` writes one JSON object per line; the last (`"event": "done"`) holds test_accuracy and steps_per_s.
// `mpirun -np N mnist --distributed ...` trains data-parallel: --batch is each rank's, the global batch N
// times it (docs/distributed.md); rank 0 prints and saves.
#include "train.hpp"

int main(int argc, char** argv) {
  argv[0] = const_cast<char*>("mnist");
  return meganeura::cli::train_main(argc, argv);
}
