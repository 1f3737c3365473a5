// Per-dispatch GPU timing profile of one training step, written as JSON (schema: docs/debugging.md): the same
// front end as `meganeura profile` (cli/profile.cpp), which turns GPU timing on itself.
//
//   MEGANEURA_GPU_TIMING=1 build/bin/profile_session out.json [--model mlp|cnn|transformer] [--batch N]
//                                                            [--iterations N] [--warmup N]
//
// The models (examples/models.hpp) train with Adam on seeded random data; the names nn gives the layers
// appear as dispatch labels (forward) and grad/<name> (backward).
#include "profile.hpp"

int main(int argc, char** argv) {
  argv[0] = const_cast<char*>("profile_session");
  return meganeura::cli::profile_main(argc, argv, {.require_timing_env = true});
}
