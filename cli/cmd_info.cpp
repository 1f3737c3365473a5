// meganeura info: every Vulkan device and its capabilities.
#include <string>
#include <vector>

#include "command.hpp"
#include "flags.hpp"
#include "meganeura/runtime/device.hpp"

namespace meganeura::cli {
namespace {

int info_main(int argc, char** argv) {
  bool json = false;
  Flags f(argv[0],
          "Every Vulkan device and its capabilities; the one sessions would use is marked (selected).");
  f.flag("--json", json, "one JSON array of the devices on stdout");
  f.epilog(
      "MEGANEURA_DEVICE_ID picks the device; MEGANEURA_VALIDATION=1 turns on the Khronos validation layer.");
  return run(f, argc, argv, [&] {
    const SessionConfig config = SessionConfig::from_env();
    const std::vector<runtime::DeviceCaps> devices = runtime::enumerate_devices(config.validation);
    if (json) {
      std::string out = "[";
      for (size_t i = 0; i < devices.size(); ++i) out += (i > 0 ? "," : "") + devices[i].to_json();
      json_line(out + "]");
      return 0;
    }
    const size_t chosen = runtime::choose_device(devices, config.device_id);
    for (size_t i = 0; i < devices.size(); ++i)
      std::printf("device %zu%s: %s\n", i, i == chosen ? " (selected)" : "", devices[i].to_table().c_str());
    return 0;
  });
}

const bool registered = register_command({"info", "Vulkan devices and their capabilities", info_main});

}  // namespace
}  // namespace meganeura::cli
