// meganeura train: the Fashion-MNIST recipes (cli/train.cpp, shared with examples/mnist.cpp).
#include "command.hpp"
#include "train.hpp"

namespace meganeura::cli {
namespace {

const bool registered = register_command(
    {"train", "train the MLP or CNN recipe on Fashion-MNIST (checkpoints, --resume)", train_main});

}  // namespace
}  // namespace meganeura::cli
