#pragma once
// The one command-line parser of the `meganeura` command and the example programs.
//
//   Flags f("meganeura train", "Train the MLP or CNN recipe on Fashion-MNIST.");
//   f.option("--epochs", o.epochs, "epochs to train");           // --epochs 3 or --epochs=3
//   f.choice("--model", o.model, {"mlp", "cnn"}, "the recipe");
//   f.flag("--json", o.json, "one JSON object per line on stdout");
//   f.positional("OUT", o.out, "where to write", /*required=*/false);
//   return cli::run(f, argc, argv, [&] { ... return 0; });
//
// --help / -h prints the usage on stdout (exit 0); an unknown option, a missing or malformed value, or a
// missing positional prints the error and the usage on stderr (exit 2) naming the valid options; a
// meganeura::Error or other exception from the body prints "program: message" (exit 1). Defaults shown in the
// usage are the values the variables hold when registered.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "meganeura/config/config.hpp"
#include "meganeura/core/error.hpp"

namespace meganeura::cli {

class UsageError : public ConfigError {
  using ConfigError::ConfigError;
};

class Flags {
 public:
  Flags(std::string program, std::string summary);
  Flags(const Flags&) = delete;  // the setters point into it
  Flags& operator=(const Flags&) = delete;

  void option(const std::string& name, std::string& out, const std::string& help,
              const std::string& metavar = "TEXT");
  void option(const std::string& name, int& out, const std::string& help, const std::string& metavar = "N");
  void option(const std::string& name, int64_t& out, const std::string& help,
              const std::string& metavar = "N");
  void option(const std::string& name, uint64_t& out, const std::string& help,
              const std::string& metavar = "N");
  void option(const std::string& name, double& out, const std::string& help,
              const std::string& metavar = "X");
  void choice(const std::string& name, std::string& out, std::vector<std::string> choices,
              const std::string& help);
  void flag(const std::string& name, bool& out, const std::string& help);
  // --precision f32|mixed16|f16|bf16 (SessionConfig::precision). Sets `out` to the environment's default
  // first (MEGANEURA_PRECISION); a malformed environment fails run() with exit 1 after parsing (--help still
  // works).
  void precision(Precision& out);
  // A value that a setter turns into something else; the setter throws UsageError (or ConfigError) for bad
  // text.
  void custom(const std::string& name, std::function<void(const std::string&)> set, const std::string& help,
              const std::string& metavar, const std::string& default_text = "");
  void positional(const std::string& name, std::string& out, const std::string& help, bool required = true);
  // A short spelling ("-p") of an option added before ("--prompt"); usage shows "-p, --prompt".
  void alias(const std::string& short_name, const std::string& name);
  void epilog(const std::string& text) { epilog_ = text; }  // printed after the options (examples, variables)

  // Parses argv[1..argc). False when --help was asked (usage already on stdout); UsageError otherwise.
  bool parse(int argc, char** argv);
  std::string usage() const;
  const std::string& program() const { return program_; }
  std::vector<std::string> option_names() const;
  const std::string& environment_error() const { return environment_error_; }

 private:
  struct Option {
    std::string name, help, metavar, default_text;
    bool is_flag = false;
    std::function<void(const std::string&)> set;
  };
  struct Positional {
    std::string name, help;
    bool required = true;
    std::string* out = nullptr;
  };
  void add(Option o);
  [[noreturn]] void fail(const std::string& what) const;
  std::string short_name_of(const std::string& name) const;  // "" without an alias

  std::string program_, summary_, epilog_;
  std::string environment_error_;  // from SessionConfig::from_env in precision()
  std::vector<Option> options_;
  std::vector<std::pair<std::string, std::string>> aliases_;  // alias(): short spelling, option name
  std::vector<Positional> positionals_;
};

// Parses, then runs `body`, mapping the outcomes to exit codes as described above.
int run(Flags& flags, int argc, char** argv, const std::function<int()>& body);

// One JSON object per line on stdout for --json (a line is flushed at once, so a reader sees it as it
// happens).
void json_line(const std::string& object_text);

}  // namespace meganeura::cli
