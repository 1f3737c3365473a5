#pragma once
// A local stand-in for the Hugging Face hub (tests/hub/hub_server.py on 127.0.0.1) with two repos, a cache
// folder per test, and helpers; shared by tests/cpu/test_hub.cpp and tests/oracle/test_hub_python.cpp.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "meganeura/core/error.hpp"
#include "meganeura/hub/hub.hpp"
#include "paths.hpp"

extern char** environ;

namespace meganeura::test {

namespace fs = std::filesystem;
using hf::HubConfig;
using meganeura::ConfigError;
using meganeura::HubError;

inline const std::string kCommitA(40, 'a');
inline const std::string kCommitB = "0123456789abcdef0123456789abcdef01234567";

inline std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

inline void put(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

inline std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// A folder of repos for the server, a cache, and the server process itself.
class HubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("hub_" + std::to_string(::getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    root_ = dir_ / "root";
    weights_ = random_bytes(256 * 1024 + 123, 1);
    const fs::path a = root_ / "org" / "tiny" / kCommitA;
    put(a / "config.json", R"({"hidden_size": 8})");
    put(a / "tokenizer.json", R"({"model": {"type": "BPE"}})");
    put(a / "model.safetensors", weights_);
    put(a / "sub" / "notes.txt", "nested file");
    put(root_ / "org" / "tiny" / "refs" / "main", kCommitA);
    // A sharded repo: index + two shards, no tokenizer.
    const fs::path b = root_ / "org" / "sharded" / kCommitB;
    put(b / "config.json", R"({"hidden_size": 16})");
    put(b / "model-00001-of-00002.safetensors", random_bytes(5000, 2));
    put(b / "model-00002-of-00002.safetensors", random_bytes(7000, 3));
    put(b / "model.safetensors.index.json",
        R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors", "c": "model-00001-of-00002.safetensors"}})");
    put(root_ / "org" / "sharded" / "refs" / "main", kCommitB);
    config_.home = (dir_ / "hf_home").string();
    options_.progress = hf::ProgressStyle::Off;
    options_.timeout_s = 5;
  }
  void TearDown() override {
    stop();
    fs::remove_all(dir_);
  }

  void start(const std::string& mode = "normal", const std::string& token = "") {
    stop();
    const fs::path port_file = dir_ / "port";
    fs::remove(port_file);
    std::vector<std::string> args = {"python3",     source_path("tests/hub/hub_server.py").string(),
                                     "--root",      root_.string(),
                                     "--port-file", port_file.string(),
                                     "--log",       (dir_ / "log").string(),
                                     "--manifest",  (dir_ / "manifest.json").string(),
                                     "--mode",      mode,
                                     "--lifetime",  "300"};
    if (!token.empty()) args.insert(args.end(), {"--token", token});
    std::vector<char*> argv;
    for (std::string& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    ASSERT_EQ(posix_spawnp(&pid_, "python3", nullptr, nullptr, argv.data(), environ), 0)
        << "python3 not found";
    for (int i = 0; i < 300 && !fs::exists(port_file); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(fs::exists(port_file)) << "hub_server.py did not start";
    config_.endpoint = "http://127.0.0.1:" + slurp(port_file);
    manifest_ = nlohmann::json::parse(slurp(dir_ / "manifest.json"));
    clear_log();
  }
  void stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  std::vector<std::string> requests() const {
    std::vector<std::string> out;
    std::ifstream f(dir_ / "log");
    for (std::string line; std::getline(f, line);) out.push_back(line);
    return out;
  }
  void clear_log() { std::ofstream(dir_ / "log", std::ios::trunc); }
  std::string etag(const std::string& repo, const std::string& commit, const std::string& file) const {
    return manifest_.at(repo).at(commit).at(file).get<std::string>();
  }
  fs::path repo_dir(const std::string& repo) const { return hf::repo_folder(config_, repo); }

  fs::path dir_, root_;
  std::string weights_;
  HubConfig config_;
  hf::DownloadOptions options_;
  nlohmann::json manifest_;
  pid_t pid_ = -1;
};

template <class F>
inline HubError hub_error(F&& f) {
  try {
    f();
  } catch (const HubError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a HubError";
  return HubError(HubError::Kind::Http, "none");
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace meganeura::test
