#pragma once
// Private to the Vulkan backend: the loader is opened with dlopen so that a machine without it gets a
// DeviceError naming the package to install instead of a dynamic-linker failure, and every entry point
// is called through a table filled from vkGetInstanceProcAddr / vkGetDeviceProcAddr.
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

namespace meganeura::runtime::vk {

// VK_KHR_cooperative_matrix postdates the installed headers (1.3.239): declared here from the registry.
constexpr const char* kKhrCooperativeMatrixExtension = "VK_KHR_cooperative_matrix";
constexpr VkStructureType kStructCoopMatFeaturesKHR = static_cast<VkStructureType>(1000506000);
constexpr VkStructureType kStructCoopMatPropertiesKHR = static_cast<VkStructureType>(1000506001);
constexpr VkStructureType kStructPhysicalCoopMatPropertiesKHR = static_cast<VkStructureType>(1000506002);
constexpr uint32_t kComponentTypeBFloat16KHR = 1000141000;
constexpr uint32_t kComponentTypeFloatE4M3NV = 1000491002;
constexpr uint32_t kComponentTypeFloatE5M2NV = 1000491003;

struct CoopMatFeaturesKHR {
  VkStructureType sType = kStructCoopMatFeaturesKHR;
  void* pNext = nullptr;
  VkBool32 cooperativeMatrix = VK_FALSE;
  VkBool32 cooperativeMatrixRobustBufferAccess = VK_FALSE;
};

struct CoopMatPropertiesKHR {
  VkStructureType sType = kStructCoopMatPropertiesKHR;
  void* pNext = nullptr;
  uint32_t MSize = 0, NSize = 0, KSize = 0;
  uint32_t AType = 0, BType = 0, CType = 0, ResultType = 0;  // VkComponentTypeKHR
  VkBool32 saturatingAccumulation = VK_FALSE;
  uint32_t scope = 0;  // VkScopeKHR
};

using PFN_GetPhysicalDeviceCooperativeMatrixPropertiesKHR = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*,
                                                                                 CoopMatPropertiesKHR*);

// VK_NV_cooperative_matrix2 (also newer than the headers): workgroup-scope matrices of flexible size, which
// the driver stages through shared memory itself.
constexpr const char* kNvCooperativeMatrix2Extension = "VK_NV_cooperative_matrix2";
constexpr VkStructureType kStructCoopMat2FeaturesNV = static_cast<VkStructureType>(1000593000);
constexpr VkStructureType kStructCoopMatFlexiblePropertiesNV = static_cast<VkStructureType>(1000593001);

struct CoopMat2FeaturesNV {
  VkStructureType sType = kStructCoopMat2FeaturesNV;
  void* pNext = nullptr;
  VkBool32 cooperativeMatrixWorkgroupScope = VK_FALSE;
  VkBool32 cooperativeMatrixFlexibleDimensions = VK_FALSE;
  VkBool32 cooperativeMatrixReductions = VK_FALSE;
  VkBool32 cooperativeMatrixConversions = VK_FALSE;
  VkBool32 cooperativeMatrixPerElementOperations = VK_FALSE;
  VkBool32 cooperativeMatrixTensorAddressing = VK_FALSE;
  VkBool32 cooperativeMatrixBlockLoads = VK_FALSE;
};

struct CoopMatFlexiblePropertiesNV {
  VkStructureType sType = kStructCoopMatFlexiblePropertiesNV;
  void* pNext = nullptr;
  uint32_t MGranularity = 0, NGranularity = 0, KGranularity = 0;
  uint32_t AType = 0, BType = 0, CType = 0, ResultType = 0;  // VkComponentTypeKHR
  VkBool32 saturatingAccumulation = VK_FALSE;
  uint32_t scope = 0;  // VkScopeKHR
  uint32_t workgroupInvocations = 0;
};

using PFN_GetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV =
    VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*, CoopMatFlexiblePropertiesNV*);

#define MN_VK_GLOBAL_FNS(X)                 \
  X(vkCreateInstance)                       \
  X(vkEnumerateInstanceExtensionProperties) \
  X(vkEnumerateInstanceLayerProperties)     \
  X(vkEnumerateInstanceVersion)

#define MN_VK_INSTANCE_FNS(X)                 \
  X(vkDestroyInstance)                        \
  X(vkEnumeratePhysicalDevices)               \
  X(vkGetPhysicalDeviceProperties)            \
  X(vkGetPhysicalDeviceProperties2)           \
  X(vkGetPhysicalDeviceFeatures2)             \
  X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkGetPhysicalDeviceMemoryProperties2)     \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkEnumerateDeviceExtensionProperties)     \
  X(vkCreateDevice)                           \
  X(vkGetDeviceProcAddr)                      \
  X(vkCreateDebugUtilsMessengerEXT)           \
  X(vkDestroyDebugUtilsMessengerEXT)          \
  X(vkSetDebugUtilsObjectNameEXT)             \
  X(vkCmdBeginDebugUtilsLabelEXT)             \
  X(vkCmdEndDebugUtilsLabelEXT)               \
  X(vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)

#define MN_VK_DEVICE_FNS(X)               \
  X(vkDestroyDevice)                      \
  X(vkGetDeviceQueue)                     \
  X(vkQueueSubmit)                        \
  X(vkQueueWaitIdle)                      \
  X(vkDeviceWaitIdle)                     \
  X(vkAllocateMemory)                     \
  X(vkFreeMemory)                         \
  X(vkMapMemory)                          \
  X(vkUnmapMemory)                        \
  X(vkCreateBuffer)                       \
  X(vkDestroyBuffer)                      \
  X(vkGetBufferMemoryRequirements)        \
  X(vkBindBufferMemory)                   \
  X(vkCreateShaderModule)                 \
  X(vkDestroyShaderModule)                \
  X(vkCreateDescriptorSetLayout)          \
  X(vkDestroyDescriptorSetLayout)         \
  X(vkCreatePipelineLayout)               \
  X(vkDestroyPipelineLayout)              \
  X(vkCreateComputePipelines)             \
  X(vkCreatePipelineCache)                \
  X(vkDestroyPipelineCache)               \
  X(vkGetPipelineCacheData)               \
  X(vkDestroyPipeline)                    \
  X(vkCreateDescriptorPool)               \
  X(vkDestroyDescriptorPool)              \
  X(vkAllocateDescriptorSets)             \
  X(vkUpdateDescriptorSets)               \
  X(vkCreateCommandPool)                  \
  X(vkDestroyCommandPool)                 \
  X(vkAllocateCommandBuffers)             \
  X(vkFreeCommandBuffers)                 \
  X(vkBeginCommandBuffer)                 \
  X(vkEndCommandBuffer)                   \
  X(vkResetCommandBuffer)                 \
  X(vkCmdBindPipeline)                    \
  X(vkCmdBindDescriptorSets)              \
  X(vkCmdPushConstants)                   \
  X(vkCmdDispatch)                        \
  X(vkCmdPipelineBarrier)                 \
  X(vkCmdCopyBuffer)                      \
  X(vkCmdFillBuffer)                      \
  X(vkCmdWriteTimestamp)                  \
  X(vkCmdResetQueryPool)                  \
  X(vkCreateQueryPool)                    \
  X(vkDestroyQueryPool)                   \
  X(vkGetQueryPoolResults)                \
  X(vkCreateFence)                        \
  X(vkDestroyFence)                       \
  X(vkWaitForFences)                      \
  X(vkResetFences)                        \
  X(vkGetFenceStatus)                     \
  X(vkGetPipelineExecutablePropertiesKHR) \
  X(vkGetPipelineExecutableStatisticsKHR) \
  X(vkGetPipelineExecutableInternalRepresentationsKHR)

struct Fns {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  PFN_GetPhysicalDeviceCooperativeMatrixPropertiesKHR vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR =
      nullptr;
  PFN_GetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV
      vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV = nullptr;
#define MN_VK_MEMBER(name) PFN_##name name = nullptr;
  MN_VK_GLOBAL_FNS(MN_VK_MEMBER)
  MN_VK_INSTANCE_FNS(MN_VK_MEMBER)
  MN_VK_DEVICE_FNS(MN_VK_MEMBER)
#undef MN_VK_MEMBER
};

// Opens the loader (never closed: the driver stays mapped for the process) and fills the global entry
// points. Throws DeviceError naming the packages to install when there is no loader.
Fns load_global(const char* library = "libvulkan.so.1");
void load_instance(Fns& f, VkInstance instance);
void load_device(Fns& f, VkDevice device);

std::string result_name(VkResult r);
// Throws DeviceError "[where] expected VK_SUCCESS from <call>, got <result>" unless r is VK_SUCCESS.
void check(VkResult r, const char* where, const char* call);

}  // namespace meganeura::runtime::vk
