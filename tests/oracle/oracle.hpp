#pragma once
// The torch oracle document (tests/oracle/make_reference.py run by Debian's /usr/bin/python3), shared by the
// oracle tests. A missing torch fails the test (it never skips).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <unistd.h>

namespace meganeura::test {

// Runs the script when its output is missing or older than the script, so that the tests of one build share
// one run. ctest may start several of these test processes at once: each writes its own file and renames it
// into place, so no process ever reads a half-written file.
inline const nlohmann::json& oracle() {
  static const nlohmann::json doc = [] {
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(MEGANEURA_BINARY_DIR) / "oracle";
    fs::create_directories(dir);
    const fs::path script = fs::path(MEGANEURA_SOURCE_DIR) / "tests/oracle/make_reference.py";
    const fs::path out = dir / "torch_reference.json";
    std::error_code ec;
    if (!fs::exists(out) || fs::last_write_time(out, ec) < fs::last_write_time(script)) {
      const std::string tag = std::to_string(::getpid());
      const fs::path tmp = dir / ("torch_reference." + tag + ".json");
      const fs::path err_path = dir / ("stderr." + tag + ".txt");
      const std::string cmd = "/usr/bin/python3 " + script.string() + " " + tmp.string() + " 2>" + err_path.string();
      const int rc = std::system(cmd.c_str());
      std::ifstream err(err_path);
      const std::string text((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
      fs::remove(err_path, ec);
      if (rc != 0)
        throw std::runtime_error("make_reference.py failed (exit " + std::to_string(rc) +
                                 "); is python3-torch installed for /usr/bin/python3?\n" + text);
      fs::rename(tmp, out);
    }
    std::ifstream in(out);
    return nlohmann::json::parse(in);
  }();
  return doc;
}

}  // namespace meganeura::test
