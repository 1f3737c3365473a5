// meganeura generate: text from a .gguf file, a Hugging Face folder or a hub repository (cli/generate.cpp,
// shared with examples/smollm2.cpp).
#include "command.hpp"
#include "generate.hpp"

namespace meganeura::cli {
namespace {

int generate_command(int argc, char** argv) { return generate_main(argc, argv); }

const bool registered = register_command(
    {"generate", "generate text from a .gguf file or a Hugging Face model (streamed, tokens/s)",
     generate_command});

}  // namespace
}  // namespace meganeura::cli
