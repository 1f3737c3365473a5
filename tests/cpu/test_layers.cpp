// Layers point down: every #include "meganeura/<folder>/..." in src/meganeura/ goes to a folder listed before
// its own in kStageOrder (or its own folder). The order is the one docs/architecture.md gives ("Stage
// order").
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "paths.hpp"

namespace meganeura::test {
namespace {

namespace fs = std::filesystem;

// Lowest first. A folder may include itself and the folders before it, nothing after it.
const std::vector<std::string> kStageOrder = {
    "core",    "quant",  "tokenizer", "hub",      "distributed", "ir",       "formats",
    "config",  "ops",    "reference", "autodiff", "rewrite",     "schedule", "plan",
    "runtime", "shader", "kernels",   "codegen",  "session",     "eager",    "nn",
    "data",    "train",  "models",    "onnx",     "nnef",
};

// The top folder under src/meganeura of a path relative to it ("" for a file at the top, meganeura.hpp).
std::string folder_of(const fs::path& rel) {
  return std::distance(rel.begin(), rel.end()) > 1 ? rel.begin()->string() : std::string();
}

// Index in kStageOrder; a file at the top (meganeura.hpp, the umbrella header) ranks above every stage.
int rank_of(const std::string& folder) {
  if (folder.empty()) return int(kStageOrder.size());
  auto it = std::find(kStageOrder.begin(), kStageOrder.end(), folder);
  return it == kStageOrder.end() ? -1 : int(it - kStageOrder.begin());
}

struct Edge {
  std::string from_file, to_folder;
};

std::vector<Edge> disallowed_edges(const fs::path& root, std::vector<std::string>& unknown, size_t& files) {
  const std::regex include(R"(^\s*#\s*include\s*"meganeura/([A-Za-z0-9_]+)/)");
  std::vector<Edge> bad;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    const std::string ext = entry.path().extension().string();
    if (ext != ".hpp" && ext != ".cpp" && ext != ".h" && ext != ".inc") continue;
    ++files;
    const fs::path rel = fs::relative(entry.path(), root);
    const std::string from = folder_of(rel);
    const int from_rank = rank_of(from);
    if (from_rank < 0) {
      unknown.push_back(from);
      continue;
    }
    std::ifstream in(entry.path());
    std::string line;
    std::smatch m;
    while (std::getline(in, line)) {
      if (!std::regex_search(line, m, include)) continue;
      const std::string to = m[1];
      const int to_rank = rank_of(to);
      if (to_rank < 0)
        unknown.push_back(to);
      else if (to != from && to_rank > from_rank)
        bad.push_back({rel.generic_string(), to});
    }
  }
  std::sort(unknown.begin(), unknown.end());
  unknown.erase(std::unique(unknown.begin(), unknown.end()), unknown.end());
  return bad;
}

TEST(Layers, EveryIncludePointsDown) {
  const fs::path src = source_root();  // throws, naming MEGANEURA_SOURCE_DIR, when the tree is not found
  std::vector<std::string> unknown;
  size_t files = 0;
  const std::vector<Edge> bad = disallowed_edges(src / "src" / "meganeura", unknown, files);
  EXPECT_GT(files, 50u) << "expected the library's sources under " << src;
  for (const std::string& f : unknown)
    ADD_FAILURE() << "folder '" << f << "' is not in the stage order: add it to kStageOrder here and to "
                  << "docs/architecture.md";
  for (const Edge& e : bad)
    ADD_FAILURE() << e.from_file << " includes " << e.to_folder << "/, a stage above its own";
}

// The check itself: a made-up tree with one upward include and one unknown folder is caught.
TEST(Layers, AnUpwardIncludeIsCaught) {
  const fs::path root = fs::temp_directory_path() / ("meganeura_layers_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "ir");
  fs::create_directories(root / "session");
  fs::create_directories(root / "elsewhere");
  std::ofstream(root / "ir" / "graph.hpp") << "#pragma once\n#include \"meganeura/session/session.hpp\"\n";
  std::ofstream(root / "session" / "session.hpp") << "#include \"meganeura/ir/graph.hpp\"\n";
  std::ofstream(root / "elsewhere" / "x.cpp") << "#include \"meganeura/core/error.hpp\"\n";
  std::vector<std::string> unknown;
  size_t files = 0;
  const std::vector<Edge> bad = disallowed_edges(root, unknown, files);
  fs::remove_all(root);
  EXPECT_EQ(files, 3u);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].from_file, "ir/graph.hpp");
  EXPECT_EQ(bad[0].to_folder, "session");
  EXPECT_EQ(unknown, std::vector<std::string>{"elsewhere"});
}

}  // namespace
}  // namespace meganeura::test
