// Device enumeration and selection: MEGANEURA_DEVICE_ID (passed in as DeviceOptions::device_id) first,
// else the first discrete, integrated, virtual, then CPU device.
#include <cstdio>

#include "meganeura/runtime/vk_device.hpp"

namespace meganeura::runtime {
namespace {

constexpr const char* kInstallDriver =
    "install a Vulkan driver (Debian: apt-get install mesa-vulkan-drivers, which provides lavapipe)";

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%04x", v);
  return buf;
}

int type_rank(const std::string& type) {
  if (type == "discrete") return 0;
  if (type == "integrated") return 1;
  if (type == "virtual") return 2;
  if (type == "cpu") return 3;
  return 4;
}

std::vector<vk::PhysicalInfo> devices_or_throw(vk::Instance& inst, const char* where) {
  std::vector<vk::PhysicalInfo> devices = vk::query_physical_devices(inst);
  if (devices.empty()) {
    throw DeviceError(std::string("[") + where +
                      "] expected at least one Vulkan 1.1 device with a compute queue, "
                      "got none: " +
                      kInstallDriver);
  }
  return devices;
}

}  // namespace

std::vector<DeviceCaps> enumerate_devices(bool validation) {
  vk::Instance inst(validation);
  std::vector<DeviceCaps> out;
  for (auto& p : devices_or_throw(inst, "enumerate_devices")) out.push_back(std::move(p.caps));
  return out;
}

size_t choose_device(const std::vector<DeviceCaps>& devices, std::optional<uint32_t> device_id,
                     std::optional<uint32_t> slot) {
  if (devices.empty()) {
    throw DeviceError(std::string("[open_device] expected at least one Vulkan device, got none: ") +
                      kInstallDriver);
  }
  // The candidates: every device with the ID asked for, else every device of the best type. One process per
  // GPU (distributed training) takes the slot-th of them, so identical GPUs (same ID) are told apart by
  // order.
  std::vector<size_t> candidates;
  if (device_id) {
    for (size_t i = 0; i < devices.size(); ++i) {
      if (devices[i].device_id == *device_id) candidates.push_back(i);
    }
    if (candidates.empty()) {
      std::string present;
      for (const auto& d : devices) {
        present += "\n  " + hex(d.device_id) + "  " + d.name + " (" + d.device_type + ", vendor " +
                   hex(d.vendor_id) + ")";
      }
      throw DeviceError("[open_device] expected a device with ID " + hex(*device_id) +
                        " (MEGANEURA_DEVICE_ID), got only these devices:" + present);
    }
  } else {
    int best = INT32_MAX;
    for (const auto& d : devices) best = std::min(best, type_rank(d.device_type));
    for (size_t i = 0; i < devices.size(); ++i)
      if (type_rank(devices[i].device_type) == best) candidates.push_back(i);
  }
  return candidates[slot ? *slot % candidates.size() : 0];
}

std::unique_ptr<Device> open_device(const DeviceOptions& options) {
  auto inst = std::make_shared<vk::Instance>(options.validation);
  std::vector<vk::PhysicalInfo> devices = devices_or_throw(*inst, "open_device");
  std::vector<DeviceCaps> caps;
  for (const auto& d : devices) caps.push_back(d.caps);
  const size_t chosen = choose_device(caps, options.device_id, options.slot);
  return std::make_unique<vk::VulkanDevice>(inst, std::move(devices[chosen]), options);
}

}  // namespace meganeura::runtime
