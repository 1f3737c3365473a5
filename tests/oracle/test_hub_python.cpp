// The Hugging Face cache is shared with Python users: huggingface_hub (PyPI) finds what hf::download stored,
// hf::download finds what huggingface_hub stored, and both lay out the same download identically (the same
// blob names, snapshot links and refs), all against the local stand-in hub (tests/hub/hub_server.py).
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "hub/hub_fixture.hpp"

namespace {

namespace fs = std::filesystem;
using namespace meganeura;
using namespace meganeura::test;

// Runs tests/hub/hf_python.py with python3 from PATH; its stdout lines.
std::vector<std::string> hf_python(const std::string& args, const fs::path& scratch) {
  const fs::path out = scratch / "py.out", err = scratch / "py.err";
  const std::string cmd = "python3 " + source_path("tests/hub/hf_python.py").string() + " " + args + " >" +
                          out.string() + " 2>" + err.string();
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd << "\n"
                   << slurp(err) << "\n(huggingface_hub is pinned in scripts/requirements-oracle.txt)";
  std::vector<std::string> lines;
  std::istringstream in(slurp(out));
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// Every entry under a repo's cache folder, with its link target: what both libraries must agree on.
std::map<std::string, std::string> layout(const fs::path& repo) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(repo)) {
    const std::string rel = fs::relative(e.path(), repo).string();
    out[rel] = e.is_symlink()     ? fs::read_symlink(e.path()).string()
               : e.is_directory() ? "dir"
                                  : slurp(e.path());
  }
  return out;
}

using HubPython = HubTest;

TEST_F(HubPython, HuggingfaceHubFindsOurDownloads) {
  start();
  const std::vector<std::string> files = {"config.json", "model.safetensors", "sub/notes.txt"};
  std::vector<std::string> ours;
  for (const std::string& f : files) ours.push_back(hf::download(config_, "org/tiny", f, "main", options_));
  stop();
  const auto lines =
      hf_python("lookup " + config_.home + " org/tiny main config.json model.safetensors sub/notes.txt " +
                    "tokenizer.json",
                dir_);
  ASSERT_EQ(lines.size(), 5u);
  for (size_t i = 0; i < files.size(); ++i) EXPECT_EQ(lines[i], ours[i]) << files[i];
  EXPECT_EQ(lines[3], "MISSING");  // never downloaded
  EXPECT_EQ(lines[4], "3 0");      // three files in the scan, no warnings about the cache's shape
}

TEST_F(HubPython, WeFindHuggingfaceHubDownloadsAndLayThemOutAlike) {
  start();
  const std::string python_home = (dir_ / "python_home").string();
  const auto py = hf_python("download " + python_home + " " + config_.endpoint +
                                " org/tiny main config.json model.safetensors sub/notes.txt",
                            dir_);
  ASSERT_EQ(py.size(), 3u);
  // Ours, into a separate cache: the same entries with the same link targets and contents.
  for (const char* f : {"config.json", "model.safetensors", "sub/notes.txt"})
    hf::download(config_, "org/tiny", f, "main", options_);
  HubConfig python_cache = config_;
  python_cache.home = python_home;
  EXPECT_EQ(layout(repo_dir("org/tiny")), layout(hf::repo_folder(python_cache, "org/tiny")));
  // Python's cache serves us offline, and online as a cache hit without a transfer.
  stop();
  python_cache.offline = true;
  EXPECT_EQ(hf::download(python_cache, "org/tiny", "model.safetensors", "main", options_), py[1]);
  EXPECT_EQ(hf::download(python_cache, "org/tiny", "sub/notes.txt", kCommitA, options_), py[2]);
  start();
  python_cache.offline = false;
  python_cache.endpoint = config_.endpoint;
  EXPECT_EQ(hf::download(python_cache, "org/tiny", "config.json", "main", options_), py[0]);
  for (const std::string& l : requests()) EXPECT_EQ(l.rfind("HEAD ", 0), 0u) << l;
}

}  // namespace
