#pragma once
// The torch oracle document (tests/oracle/make_reference.py run by a Python with torch), shared by the
// oracle tests. A missing torch fails the test (it never skips).
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "paths.hpp"

namespace meganeura::test {

// Runs the script when its output is missing or older than the script, so that the tests of one build share
// one run. ctest may start several of these test processes at once: each writes its own file and renames it
// into place, so no process ever reads a half-written file.
inline const nlohmann::json& oracle() {
  static const nlohmann::json doc = [] {
    namespace fs = std::filesystem;
    const fs::path dir = work_dir("oracle");
    fs::create_directories(dir);
    const fs::path script = source_path("tests/oracle/make_reference.py");
    const fs::path out = dir / "torch_reference.json";
    std::error_code ec;
    if (!fs::exists(out) || fs::last_write_time(out, ec) < fs::last_write_time(script)) {
      const std::string tag = std::to_string(::getpid());
      const fs::path tmp = dir / ("torch_reference." + tag + ".json");
      const fs::path err_path = dir / ("stderr." + tag + ".txt");
      // The first Python with torch: Debian's /usr/bin/python3 here (python3-torch), `python3` elsewhere.
      const std::string cmd =
          "for p in /usr/bin/python3 python3; do if $p -c 'import torch' 2>/dev/null; then exec $p '" +
          script.string() + "' '" + tmp.string() + "' 2>'" + err_path.string() + "'; fi; done; exit 3";
      const int rc = std::system(cmd.c_str());
      std::ifstream err(err_path);
      const std::string text((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
      fs::remove(err_path, ec);
      if (rc != 0)
        throw std::runtime_error("make_reference.py failed (exit " + std::to_string(rc) +
                                 "); is torch installed (Debian: python3-torch)?\n" + text);
      fs::rename(tmp, out);
    }
    std::ifstream in(out);
    return nlohmann::json::parse(in);
  }();
  return doc;
}

}  // namespace meganeura::test
