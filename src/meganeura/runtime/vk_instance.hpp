#pragma once
// Private to the Vulkan backend: the instance (with the validation layer and its message log) and what we
// learn about each physical device before opening it.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "meganeura/runtime/device.hpp"
#include "meganeura/runtime/vk_api.hpp"

namespace meganeura::runtime::vk {

// Validation messages, kept so that tests can fail on any of them.
struct MessageLog {
  mutable std::mutex mutex;
  std::vector<std::string> messages;
  void add(std::string m) {
    std::lock_guard<std::mutex> lock(mutex);
    messages.push_back(std::move(m));
  }
};

class Instance {
 public:
  explicit Instance(bool validation);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  Fns fns;
  VkInstance handle = VK_NULL_HANDLE;
  uint32_t api_version = VK_API_VERSION_1_1;
  bool debug_utils = false;
  bool validation = false;
  MessageLog log;

 private:
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
};

// Everything needed to choose a physical device and create a logical one on it.
struct PhysicalInfo {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  DeviceCaps caps;
  uint32_t api_version = 0;  // min(device, instance)
  std::vector<std::string> extensions;
  uint32_t compute_family = UINT32_MAX;
  uint32_t timestamp_valid_bits = 0;
  uint32_t max_storage_buffers_per_stage = 0;
  uint32_t required_subgroup_size_stages = 0;
  uint64_t non_coherent_atom = 0;

  // supported features, as queried; device creation enables the useful subset
  VkPhysicalDeviceFeatures f10{};
  VkPhysicalDeviceVulkan11Features f11{};
  VkPhysicalDeviceVulkan12Features f12{};
  VkPhysicalDeviceVulkan13Features f13{};
  VkPhysicalDeviceSubgroupSizeControlFeatures subgroup_size_control{};  // when 1.3 is missing
  VkPhysicalDeviceShaderAtomicFloatFeaturesEXT atomic_float{};
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coopmat_nv{};
  CoopMatFeaturesKHR coopmat_khr{};
  CoopMat2FeaturesNV coopmat2{};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pipeline_executable{};

  bool has(const char* ext) const;
};

std::vector<PhysicalInfo> query_physical_devices(Instance& inst);
std::vector<MemoryHeap> query_heaps(Instance& inst, const PhysicalInfo& info);

}  // namespace meganeura::runtime::vk
