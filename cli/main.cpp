// The `meganeura` command: dispatches to the subcommands registered by cli/cmd_*.cpp (cli/command.hpp).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "command.hpp"

namespace meganeura::cli {

namespace {
std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}
}  // namespace

bool register_command(Command command) {
  std::vector<Command>& r = registry();
  for (const Command& c : r)
    if (c.name == command.name) {
      std::fprintf(stderr, "meganeura: two commands named '%s'\n", command.name.c_str());
      std::abort();
    }
  r.push_back(std::move(command));
  std::sort(r.begin(), r.end(), [](const Command& a, const Command& b) { return a.name < b.name; });
  return true;
}

const std::vector<Command>& commands() { return registry(); }

}  // namespace meganeura::cli

namespace {

using meganeura::cli::Command;
using meganeura::cli::commands;

int usage(FILE* out, int code) {
  std::fprintf(
      out,
      "usage: meganeura <command> [options]\n\nNeural-network training and inference on any Vulkan GPU.\n\n"
      "commands:\n");
  for (const Command& c : commands()) std::fprintf(out, "  %-12s %s\n", c.name.c_str(), c.summary.c_str());
  std::fprintf(out,
               "\n`meganeura <command> --help` describes a command. Every MEGANEURA_* variable of the README "
               "applies.\n"
               "  --version    print the version and exit\n");
  return code;
}

const Command* find(const std::string& name) {
  for (const Command& c : commands())
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(stderr, 2);
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h") return usage(stdout, 0);
  if (cmd == "--version") {
    std::printf("meganeura %s\n", MEGANEURA_VERSION);
    return 0;
  }
  if (cmd == "help") {
    if (argc < 3) return usage(stdout, 0);
    const Command* c = find(argv[2]);
    if (!c) {
      std::fprintf(stderr, "meganeura: expected a command name after help, got '%s'\n\n", argv[2]);
      return usage(stderr, 2);
    }
    std::string program = "meganeura " + c->name, help = "--help";
    char* args[] = {program.data(), help.data(), nullptr};
    return c->main(2, args);
  }
  const Command* c = find(cmd);
  if (!c) {
    std::string valid;
    for (const Command& k : commands()) valid += (valid.empty() ? "" : ", ") + k.name;
    std::fprintf(stderr, "meganeura: expected one of the commands %s, got '%s'\n\n", valid.c_str(),
                 cmd.c_str());
    return usage(stderr, 2);
  }
  // The command sees itself as argv[0] ("meganeura train") and its own options after it.
  std::string program = "meganeura " + c->name;
  std::vector<char*> args{program.data()};
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  try {
    return c->main(static_cast<int>(args.size()) - 1, args.data());
  } catch (const std::exception& e) {  // commands report their own errors (cli::run); this is the backstop
    std::fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
    return 1;
  }
}
