// Instance creation, the validation layer and its message log.
#include <algorithm>
#include <cstring>
#include <string>

#include "meganeura/runtime/vk_instance.hpp"

namespace meganeura::runtime::vk {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";
constexpr const char* kNoDriver =
    "install a Vulkan driver (Debian: apt-get install mesa-vulkan-drivers, which provides lavapipe)";

thread_local bool t_khr_coopmat_module = false;  // set by KhrCoopMatScope
thread_local bool t_creating_device = false;     // set by CoopMatDeviceScope

VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                          VkDebugUtilsMessageTypeFlagsEXT,
                                          const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  auto* log = static_cast<MessageLog*>(user);
  if ((t_khr_coopmat_module && is_coopmat_khr_layer_limit(data->pMessageIdName, data->pMessage)) ||
      (t_creating_device && is_coopmat_device_layer_limit(data->pMessageIdName, data->pMessage))) {
    std::lock_guard<std::mutex> lock(log->mutex);
    ++log->known_limits;
    return VK_FALSE;
  }
  const char* level = severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning";
  std::string text = std::string("[vulkan ") + level + "] " +
                     (data->pMessageIdName ? data->pMessageIdName : "") + ": " +
                     (data->pMessage ? data->pMessage : "");
  log->add(std::move(text));
  return VK_FALSE;
}

// The layer's spec version, 0 when it is not installed.
uint32_t layer_version(const Fns& f, const char* name) {
  uint32_t n = 0;
  f.vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  f.vkEnumerateInstanceLayerProperties(&n, layers.data());
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return std::max<uint32_t>(l.specVersion, 1);
  return 0;
}

bool has_instance_extension(const Fns& f, const char* name) {
  uint32_t n = 0;
  f.vkEnumerateInstanceExtensionProperties(nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  f.vkEnumerateInstanceExtensionProperties(nullptr, &n, exts.data());
  for (const auto& e : exts)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

}  // namespace

Instance::Instance(bool want_validation) : fns(load_global()), validation(want_validation) {
  uint32_t loader_version = VK_API_VERSION_1_0;
  if (fns.vkEnumerateInstanceVersion) fns.vkEnumerateInstanceVersion(&loader_version);
  api_version = loader_version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : loader_version;
  if (api_version < VK_API_VERSION_1_1) {
    throw DeviceError("[runtime] expected a Vulkan loader of version 1.1 or newer, got " +
                      std::to_string(VK_API_VERSION_MAJOR(loader_version)) + "." +
                      std::to_string(VK_API_VERSION_MINOR(loader_version)) + ": " + kNoDriver);
  }

  std::vector<const char*> layers, extensions;
  if (validation) {
    const uint32_t version = layer_version(fns, kValidationLayer);
    if (!version) {
      throw DeviceError(std::string("[runtime] expected the ") + kValidationLayer +
                        " layer (MEGANEURA_VALIDATION=1), got none: apt-get install vulkan-validationlayers");
    }
    layers.push_back(kValidationLayer);
    layer_predates_coopmat_khr = version < VK_MAKE_API_VERSION(0, 1, 3, 255);
  }
  // Debug utils also carries object names and command labels for external tools, so take it when offered.
  debug_utils = has_instance_extension(fns, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  if (debug_utils) extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);

  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "meganeura";
  app.pEngineName = "meganeura";
  app.apiVersion = api_version;

  VkDebugUtilsMessengerCreateInfoEXT messenger_info{};
  messenger_info.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
  messenger_info.messageSeverity =
      VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger_info.pfnUserCallback = on_message;
  messenger_info.pUserData = &log;

  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  info.enabledLayerCount = static_cast<uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  // Chained so that messages from vkCreateInstance itself are caught too.
  if (validation && debug_utils) info.pNext = &messenger_info;

  VkResult r = fns.vkCreateInstance(&info, nullptr, &handle);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER) {
    throw DeviceError(
        std::string("[runtime] expected a Vulkan driver, got none (VK_ERROR_INCOMPATIBLE_DRIVER): ") +
        kNoDriver);
  }
  check(r, "runtime", "vkCreateInstance");
  load_instance(fns, handle);

  if (validation && debug_utils && fns.vkCreateDebugUtilsMessengerEXT) {
    r = fns.vkCreateDebugUtilsMessengerEXT(handle, &messenger_info, nullptr, &messenger_);
    if (r != VK_SUCCESS) {
      fns.vkDestroyInstance(handle, nullptr);
      check(r, "runtime", "vkCreateDebugUtilsMessengerEXT");
    }
  }
}

bool declares_coopmat_khr(const std::vector<uint32_t>& spirv) {
  constexpr uint32_t kOpCapability = 17, kCooperativeMatrixKHR = 6022;
  for (size_t i = 5; i < spirv.size();) {  // after the 5-word header, instructions of (count << 16 | opcode)
    const uint32_t count = spirv[i] >> 16, opcode = spirv[i] & 0xffff;
    if (count == 0) break;
    if (opcode == kOpCapability && i + 1 < spirv.size() && spirv[i + 1] == kCooperativeMatrixKHR) return true;
    if (opcode != kOpCapability && opcode != 10 /* OpExtension */ && opcode != 11 /* OpExtInstImport */)
      break;
    i += count;
  }
  return false;
}

bool is_coopmat_khr_layer_limit(const char* id, const char* message) {
  const std::string i = id ? id : "", m = message ? message : "";
  return i == "VUID-VkShaderModuleCreateInfo-pCode-01090" ||
         i == "VUID-VkShaderModuleCreateInfo-pCode-04146" ||
         m.find("Invalid capability operand: 6022") != std::string::npos;
}

KhrCoopMatScope::KhrCoopMatScope(bool layer_predates_extension, const std::vector<uint32_t>& spirv)
    : prev_(t_khr_coopmat_module) {
  if (layer_predates_extension && declares_coopmat_khr(spirv)) t_khr_coopmat_module = true;
}
KhrCoopMatScope::~KhrCoopMatScope() { t_khr_coopmat_module = prev_; }

bool is_coopmat_device_layer_limit(const char* id, const char* message) {
  const std::string i = id ? id : "", m = message ? message : "";
  if (i == "VUID-VkDeviceCreateInfo-pNext-pNext")
    return m.find("unknown VkStructureType (1000506000)") !=
               std::string::npos ||  // CooperativeMatrixFeaturesKHR
           m.find("unknown VkStructureType (1000593000)") !=
               std::string::npos;  // CooperativeMatrix2FeaturesNV
  for (const char* ext : {"VK_KHR_cooperative_matrix ", "VK_NV_cooperative_matrix2 "})
    if (m.find(std::string("Device Extension ") + ext + "is not supported by this layer") !=
        std::string::npos)
      return true;
  return false;
}

CoopMatDeviceScope::CoopMatDeviceScope() : prev_(t_creating_device) { t_creating_device = true; }
CoopMatDeviceScope::~CoopMatDeviceScope() { t_creating_device = prev_; }

Instance::~Instance() {
  if (messenger_ != VK_NULL_HANDLE) fns.vkDestroyDebugUtilsMessengerEXT(handle, messenger_, nullptr);
  if (handle != VK_NULL_HANDLE) fns.vkDestroyInstance(handle, nullptr);
}

}  // namespace meganeura::runtime::vk
