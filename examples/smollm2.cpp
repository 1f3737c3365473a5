// LLM inference with Hugging Face weights: SmolLM2 (or any LlamaForCausalLM, or a .gguf file) streamed to the
// terminal. The same front end as `meganeura generate` (cli/generate.cpp), with SmolLM2-135M-Instruct from
// the hub as the default model:
//
//   smollm2 [MODEL] [-p PROMPT] [-n MAX_TOKENS] [--chat] [--revision R] [--temperature X] ... [--json]
//
// Offline, a folder made by scripts/make-hf-smollm2.py (.models/smollm2-hf) serves as MODEL.
#include "generate.hpp"

int main(int argc, char** argv) {
  argv[0] = const_cast<char*>("smollm2");
  return meganeura::cli::generate_main(argc, argv, {"HuggingFaceTB/SmolLM2-135M-Instruct", "Gravity is"});
}
