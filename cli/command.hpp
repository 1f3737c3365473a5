#pragma once
// The subcommands of `meganeura`. Each lives in one file cli/cmd_<name>.cpp (picked up by CMake's glob) and
// registers itself at start-up:
//
//   namespace {
//   int generate_main(int argc, char** argv) {   // argv[0] is "meganeura generate"
//     cli::Flags f("meganeura generate", "one-line summary");
//     ... f.option(...) ...
//     return cli::run(f, argc, argv, [&] { ...; return 0; });
//   }
//   const bool registered = cli::register_command({"generate", "one-line summary", generate_main});
//   }  // namespace
//
// Nothing else changes: `meganeura --help` lists the commands registered, sorted by name (docs/cli.md).
#include <string>
#include <vector>

namespace meganeura::cli {

struct Command {
  std::string name;     // the word after `meganeura`
  std::string summary;  // one line for `meganeura --help`
  int (*main)(int argc, char** argv);
};

bool register_command(Command command);  // a second command of one name aborts at start-up
const std::vector<Command>& commands();  // sorted by name

}  // namespace meganeura::cli
