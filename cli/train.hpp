#pragma once
// The Fashion-MNIST training recipe (the README's MLP or the small CNN) as one command-line front end:
// `meganeura train` (cli/cmd_train.cpp) and the mnist example (examples/mnist.cpp) are both this function.

namespace meganeura::cli {

// argv[0] is the program's name as usage and errors show it ("meganeura train", "mnist").
int train_main(int argc, char** argv);

}  // namespace meganeura::cli
