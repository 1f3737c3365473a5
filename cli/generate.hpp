#pragma once
// Text generation from the command line: `meganeura generate` and the smollm2 example are both this one
// function (cli/generate.cpp), so there is one generation front end — it loads the model (a .gguf file, a
// Hugging Face folder, or a hub id with --hf), applies --precision and --chat, and hands the rest to
// models::Generator, printing its streamed pieces and its prompt / generation rates.
#include <string>

namespace meganeura::cli {

struct GenerateDefaults {
  std::string model;  // used when neither MODEL nor --hf is given ("" : one of them is required)
  std::string prompt;
};

// argv[0] is the program's name as it should appear in usage and errors ("meganeura generate", "smollm2").
int generate_main(int argc, char** argv, const GenerateDefaults& defaults = {});

}  // namespace meganeura::cli
