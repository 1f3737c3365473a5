#include "meganeura/runtime/vk_api.hpp"

#include <dlfcn.h>

#include "meganeura/core/error.hpp"

namespace meganeura::runtime::vk {

Fns load_global(const char* library) {
  // dlopen reference-counts, so opening again per instance costs nothing.
  void* lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    throw DeviceError(
        std::string("[runtime] expected the Vulkan loader ") + library + ", got none (" +
        (why ? why : "dlopen failed") +
        "): install a Vulkan driver and loader (Debian: apt-get install libvulkan1 mesa-vulkan-drivers)");
  }
  Fns f;
  f.vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
  if (f.vkGetInstanceProcAddr == nullptr) {
    throw DeviceError(
        "[runtime] expected libvulkan.so.1 to export vkGetInstanceProcAddr, got a library without it: "
        "reinstall libvulkan1 and mesa-vulkan-drivers");
  }
#define MN_VK_LOAD(name) \
  f.name = reinterpret_cast<PFN_##name>(f.vkGetInstanceProcAddr(VK_NULL_HANDLE, #name));
  MN_VK_GLOBAL_FNS(MN_VK_LOAD)
#undef MN_VK_LOAD
  if (f.vkCreateInstance == nullptr) {
    throw DeviceError(
        "[runtime] expected a working Vulkan loader, got one without vkCreateInstance: reinstall "
        "libvulkan1 and mesa-vulkan-drivers");
  }
  return f;
}

void load_instance(Fns& f, VkInstance instance) {
#define MN_VK_LOAD(name) f.name = reinterpret_cast<PFN_##name>(f.vkGetInstanceProcAddr(instance, #name));
  MN_VK_INSTANCE_FNS(MN_VK_LOAD)
  MN_VK_DEVICE_FNS(MN_VK_LOAD)
#undef MN_VK_LOAD
  f.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR =
      reinterpret_cast<PFN_GetPhysicalDeviceCooperativeMatrixPropertiesKHR>(
          f.vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  f.vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV =
      reinterpret_cast<PFN_GetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV>(
          f.vkGetInstanceProcAddr(instance,
                                  "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV"));
}

void load_device(Fns& f, VkDevice device) {
  // Device-level entry points straight from the driver skip the loader's trampoline.
#define MN_VK_LOAD(name) \
  if (auto p = reinterpret_cast<PFN_##name>(f.vkGetDeviceProcAddr(device, #name))) f.name = p;
  MN_VK_DEVICE_FNS(MN_VK_LOAD)
#undef MN_VK_LOAD
}

std::string result_name(VkResult r) {
  switch (r) {
#define MN_CASE(x) \
  case x: return #x;
    MN_CASE(VK_SUCCESS)
    MN_CASE(VK_NOT_READY)
    MN_CASE(VK_TIMEOUT)
    MN_CASE(VK_INCOMPLETE)
    MN_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    MN_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    MN_CASE(VK_ERROR_INITIALIZATION_FAILED)
    MN_CASE(VK_ERROR_DEVICE_LOST)
    MN_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    MN_CASE(VK_ERROR_LAYER_NOT_PRESENT)
    MN_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    MN_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    MN_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    MN_CASE(VK_ERROR_TOO_MANY_OBJECTS)
    MN_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    MN_CASE(VK_ERROR_FRAGMENTED_POOL)
    MN_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    MN_CASE(VK_ERROR_INVALID_SHADER_NV)
    MN_CASE(VK_ERROR_UNKNOWN)
#undef MN_CASE
    default: return "VkResult(" + std::to_string(static_cast<int>(r)) + ")";
  }
}

void check(VkResult r, const char* where, const char* call) {
  if (r != VK_SUCCESS) {
    throw DeviceError(std::string("[") + where + "] expected VK_SUCCESS from " + call + ", got " +
                      result_name(r));
  }
}

}  // namespace meganeura::runtime::vk
