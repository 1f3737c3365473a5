// meganeura command-line tool.
#include <cstdio>
#include <cstring>
#include <string>

#include "meganeura/meganeura.hpp"
#include "meganeura/runtime/device.hpp"

namespace {

int usage(FILE* out, int code) {
  std::fprintf(out,
               "usage: meganeura info [--json]\n"
               "  info     every Vulkan device and its capabilities (--json: one JSON array)\n");
  return code;
}

int info(bool json) {
  const meganeura::SessionConfig config = meganeura::SessionConfig::from_env();
  const std::vector<meganeura::runtime::DeviceCaps> devices = meganeura::runtime::enumerate_devices(config.validation);
  if (json) {
    std::string out = "[";
    for (size_t i = 0; i < devices.size(); ++i) {
      if (i > 0) out += ',';
      out += devices[i].to_json();
    }
    std::printf("%s]\n", out.c_str());
    return 0;
  }
  const size_t chosen = meganeura::runtime::choose_device(devices, config.device_id);
  for (size_t i = 0; i < devices.size(); ++i) {
    std::printf("device %zu%s: %s\n", i, i == chosen ? " (selected)" : "", devices[i].to_table().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(stderr, 2);
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") return usage(stdout, 0);
  try {
    if (cmd == "info") {
      bool json = false;
      for (int i = 2; i < argc; ++i) {
        if (std::strcmp(argv[i], "--json") == 0) {
          json = true;
        } else {
          std::fprintf(stderr, "meganeura info: unknown option '%s'\n", argv[i]);
          return usage(stderr, 2);
        }
      }
      return info(json);
    }
  } catch (const meganeura::Error& e) {
    std::fprintf(stderr, "meganeura: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "meganeura: unknown command '%s'\n", cmd.c_str());
  return usage(stderr, 2);
}
