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

// Validation messages, kept so that tests can fail on any of them. `known_limits` are the messages of a
// validation layer older than VK_KHR_cooperative_matrix about modules that use it (see KhrCoopMatScope):
// counted apart, never mixed with the fatal ones.
struct MessageLog {
  mutable std::mutex mutex;
  std::vector<std::string> messages;
  size_t known_limits = 0;
  void add(std::string m) {
    std::lock_guard<std::mutex> lock(mutex);
    messages.push_back(std::move(m));
  }
};

// While alive on a thread, messages of that thread about a SPIR-V module that declares CooperativeMatrixKHR
// are the layer's limit when the layer predates the extension (Debian bookworm's 1.3.239 flags every such
// module: VUID-VkShaderModuleCreateInfo-pCode-01090 and -04146, and spirv-val's "Invalid capability operand:
// 6022"). Exactly those three are set apart; any other message stays fatal.
class KhrCoopMatScope {
 public:
  KhrCoopMatScope(bool layer_predates_extension, const std::vector<uint32_t>& spirv);
  ~KhrCoopMatScope();
  KhrCoopMatScope(const KhrCoopMatScope&) = delete;
  KhrCoopMatScope& operator=(const KhrCoopMatScope&) = delete;

 private:
  bool prev_;
};
bool declares_coopmat_khr(const std::vector<uint32_t>& spirv);
// The three messages of an old layer about a cooperative-matrix KHR module (by message id or text).
bool is_coopmat_khr_layer_limit(const char* message_id, const char* message);

// While alive on a thread (around vkCreateDevice): a layer that does not know VK_KHR_cooperative_matrix or
// VK_NV_cooperative_matrix2 says so when the device enables them, in two messages each, and those four are
// set apart too: "Device Extension <it> is not supported by this layer" and
// VUID-VkDeviceCreateInfo-pNext-pNext for its features structure (VkStructureType 1000506000 or 1000593000)
// as "unknown". The message itself is the proof that the layer predates the extension.
class CoopMatDeviceScope {
 public:
  CoopMatDeviceScope();
  ~CoopMatDeviceScope();
  CoopMatDeviceScope(const CoopMatDeviceScope&) = delete;
  CoopMatDeviceScope& operator=(const CoopMatDeviceScope&) = delete;

 private:
  bool prev_;
};
bool is_coopmat_device_layer_limit(const char* message_id, const char* message);

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
  // The enabled validation layer's spec version is older than VK_KHR_cooperative_matrix (1.3.255).
  bool layer_predates_coopmat_khr = false;
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
