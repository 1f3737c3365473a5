#pragma once
// Where the tests find what is not compiled into them, so the same binaries run from any folder on any
// machine (docs/testing.md):
//   tool(name)          an executable built with the tests: the test binary's own folder (build/bin/)
//   source_path(rel)    a file of the source tree (scripts, Python oracles, src/ itself): under
//                       $MEGANEURA_SOURCE_DIR when set, else two folders above the test binary (build/bin/ ->
//                       the checkout), which is where both a build and scripts/device/test-gpu.sh put it
//   work_dir(name)      a folder for files the tests write and may reuse (the oracle's JSON): beside bin/
//   dataset_dir(name)   a data set: Debian's /usr/share/datasets/<name>, else <source>/.data/<name> (staged
//   there
//                       by scripts/device/test-gpu.sh where the Debian package is not installed)
// A path that cannot be found throws, naming what was looked for and the variable: a test never skips for it.
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace meganeura::test {

inline std::filesystem::path exe_dir() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec)
    throw std::runtime_error("[test paths] expected /proc/self/exe to name the test binary: " + ec.message());
  return self.parent_path();
}

inline std::filesystem::path source_root() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("MEGANEURA_SOURCE_DIR"); env && *env) {
    if (!fs::is_directory(fs::path(env) / "tests"))
      throw std::runtime_error(std::string("[test paths] MEGANEURA_SOURCE_DIR=") + env +
                               " has no tests/ folder");
    return env;
  }
  const fs::path guess = exe_dir().parent_path().parent_path();
  if (!fs::is_directory(guess / "tests") || !fs::is_directory(guess / "src"))
    throw std::runtime_error("[test paths] expected the source tree two folders above the test binary (" +
                             guess.string() + "); set MEGANEURA_SOURCE_DIR to the checkout");
  return guess;
}

inline std::filesystem::path source_path(const std::string& rel) {
  const auto p = source_root() / rel;
  if (!std::filesystem::exists(p))
    throw std::runtime_error("[test paths] expected " + p.string() +
                             " in the source tree (MEGANEURA_SOURCE_DIR)");
  return p;
}

inline std::filesystem::path tool(const std::string& name) {
  const auto p = exe_dir() / name;
  if (!std::filesystem::exists(p))
    throw std::runtime_error("[test paths] expected the tool " + p.string() + " beside the test binary");
  return p;
}

inline std::filesystem::path work_dir(const std::string& name) {
  const auto p = exe_dir().parent_path() / name;
  std::filesystem::create_directories(p);
  return p;
}

inline std::filesystem::path dataset_dir(const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path debian = fs::path("/usr/share/datasets") / name;
  if (fs::is_directory(debian)) return debian;
  const fs::path staged = source_root() / ".data" / name;
  if (fs::is_directory(staged)) return staged;
  throw std::runtime_error("[test paths] expected the data set " + name + " at " + debian.string() +
                           " (Debian's dataset-" + name + ") or " + staged.string());
}

}  // namespace meganeura::test
