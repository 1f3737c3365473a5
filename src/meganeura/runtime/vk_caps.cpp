// Fills DeviceCaps (and the raw feature structs used at device creation) from a physical device.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "meganeura/runtime/vk_instance.hpp"

namespace meganeura::runtime::vk {
namespace {

std::string component_name(uint32_t t) {
  switch (t) {
    case 0: return "f16";
    case 1: return "f32";
    case 2: return "f64";
    case 3: return "s8";
    case 4: return "s16";
    case 5: return "s32";
    case 6: return "s64";
    case 7: return "u8";
    case 8: return "u16";
    case 9: return "u32";
    case 10: return "u64";
    case kComponentTypeBFloat16KHR: return "bf16";
    case kComponentTypeFloatE4M3NV: return "e4m3";
    case kComponentTypeFloatE5M2NV: return "e5m2";
    default: return "type" + std::to_string(t);
  }
}

std::string scope_name(uint32_t s) {
  switch (s) {
    case 1: return "device";
    case 2: return "workgroup";
    case 3: return "subgroup";
    case 5: return "queue_family";
    default: return "scope" + std::to_string(s);
  }
}

std::string type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}

std::string version_string(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
         std::to_string(VK_API_VERSION_PATCH(v));
}

void query_features(Instance& inst, PhysicalInfo& p) {
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, nullptr, {}};
  void** tail = &f2.pNext;
  auto link = [&](auto& s, VkStructureType type) {
    s.sType = type;
    s.pNext = nullptr;
    *tail = &s;
    tail = &s.pNext;
  };
  if (p.api_version >= VK_API_VERSION_1_2) {
    link(p.f11, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES);
    link(p.f12, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
  }
  if (p.api_version >= VK_API_VERSION_1_3) {
    link(p.f13, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES);
  } else if (p.has(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME)) {
    link(p.subgroup_size_control, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES);
  }
  if (p.has(VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME)) {
    link(p.atomic_float, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT);
  }
  if (p.has(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME)) {
    link(p.coopmat_nv, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV);
  }
  if (p.has(kKhrCooperativeMatrixExtension)) link(p.coopmat_khr, kStructCoopMatFeaturesKHR);
  if (p.has(kNvCooperativeMatrix2Extension)) link(p.coopmat2, kStructCoopMat2FeaturesNV);
  if (p.has(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME))
    link(p.pipeline_executable,
         VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR);
  inst.fns.vkGetPhysicalDeviceFeatures2(p.handle, &f2);
  p.f10 = f2.features;
  // The chain pointed into this PhysicalInfo, which is about to be copied: keep no stale pointers.
  p.f11.pNext = p.f12.pNext = p.f13.pNext = nullptr;
  p.subgroup_size_control.pNext = p.atomic_float.pNext = p.coopmat_nv.pNext = p.coopmat_khr.pNext =
      p.coopmat2.pNext = nullptr;
  p.pipeline_executable.pNext = nullptr;
  if (p.api_version >= VK_API_VERSION_1_3) {
    p.subgroup_size_control.subgroupSizeControl = p.f13.subgroupSizeControl;
    p.subgroup_size_control.computeFullSubgroups = p.f13.computeFullSubgroups;
  }
}

void query_properties(Instance& inst, PhysicalInfo& p) {
  DeviceCaps& c = p.caps;
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, nullptr, {}};
  VkPhysicalDeviceSubgroupProperties subgroup{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, nullptr, 0, 0, 0, VK_FALSE};
  VkPhysicalDeviceDriverProperties driver{};
  driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
  VkPhysicalDeviceSubgroupSizeControlProperties size_control{};
  size_control.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES;
  p2.pNext = &subgroup;
  void** tail = &subgroup.pNext;
  if (p.api_version >= VK_API_VERSION_1_2 || p.has(VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME)) {
    *tail = &driver;
    tail = &driver.pNext;
  }
  if (p.api_version >= VK_API_VERSION_1_3 || p.has(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME)) {
    *tail = &size_control;
    tail = &size_control.pNext;
  }
  VkPhysicalDeviceFloatControlsProperties float_controls{};
  float_controls.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES;
  if (p.api_version >= VK_API_VERSION_1_2 || p.has(VK_KHR_SHADER_FLOAT_CONTROLS_EXTENSION_NAME)) {
    *tail = &float_controls;
    tail = &float_controls.pNext;
  }
  // Compute units, where a vendor extension says (properties of an offered extension need not be enabled).
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm{};
  sm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV;
  if (p.has(VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) {
    *tail = &sm;
    tail = &sm.pNext;
  }
  VkPhysicalDeviceShaderCorePropertiesAMD amd{};
  amd.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD;
  if (p.has(VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME)) {
    *tail = &amd;
    tail = &amd.pNext;
  }
  inst.fns.vkGetPhysicalDeviceProperties2(p.handle, &p2);
  c.f16_rte_conversion = float_controls.shaderRoundingModeRTEFloat16 == VK_TRUE &&
                         float_controls.shaderDenormPreserveFloat16 == VK_TRUE;
  c.compute_units = sm.shaderSMCount ? sm.shaderSMCount
                                     : amd.shaderEngineCount * amd.shaderArraysPerEngineCount *
                                           amd.computeUnitsPerShaderArray;
  const VkPhysicalDeviceProperties& props = p2.properties;
  const VkPhysicalDeviceLimits& lim = props.limits;

  c.name = props.deviceName;
  c.vendor_id = props.vendorID;
  c.device_id = props.deviceID;
  c.device_type = type_name(props.deviceType);
  c.driver_version = props.driverVersion;
  c.driver_name = driver.driverName;
  c.driver_info = driver.driverInfo;
  c.api_version = version_string(props.apiVersion);
  c.max_shared_memory = lim.maxComputeSharedMemorySize;
  for (int i = 0; i < 3; ++i) {
    c.max_workgroup_size[i] = lim.maxComputeWorkGroupSize[i];
    c.max_workgroup_count[i] = lim.maxComputeWorkGroupCount[i];
  }
  c.max_workgroup_invocations = lim.maxComputeWorkGroupInvocations;
  c.max_storage_buffer_range = lim.maxStorageBufferRange;
  c.min_storage_buffer_offset_alignment = static_cast<uint32_t>(lim.minStorageBufferOffsetAlignment);
  c.max_push_constants_size = lim.maxPushConstantsSize;
  c.timestamp_period_ns = lim.timestampPeriod;
  p.max_storage_buffers_per_stage = lim.maxPerStageDescriptorStorageBuffers;
  p.non_coherent_atom = lim.nonCoherentAtomSize;

  c.subgroup_size = subgroup.subgroupSize;
  const bool compute_subgroups = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
  c.subgroup_basic = compute_subgroups && (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT);
  c.subgroup_arithmetic =
      compute_subgroups && (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  c.subgroup_shuffle = compute_subgroups && (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
  c.subgroup_ballot = compute_subgroups && (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_BALLOT_BIT);
  c.subgroup_size_control = p.subgroup_size_control.subgroupSizeControl == VK_TRUE;
  c.min_subgroup_size = size_control.minSubgroupSize ? size_control.minSubgroupSize : c.subgroup_size;
  c.max_subgroup_size = size_control.maxSubgroupSize ? size_control.maxSubgroupSize : c.subgroup_size;
  p.required_subgroup_size_stages = size_control.requiredSubgroupSizeStages;
}

// Vulkan's two-call enumeration: the count, then that many elements, each starting as `init` (its sType).
template <class T, class Query>
std::vector<T> two_call(const T& init, Query query) {
  uint32_t n = 0;
  query(&n, static_cast<T*>(nullptr));
  std::vector<T> out(n, init);
  query(&n, out.data());
  out.resize(n);
  return out;
}

void query_coopmat(Instance& inst, PhysicalInfo& p) {
  DeviceCaps& c = p.caps;
  c.coopmat_nv = p.coopmat_nv.cooperativeMatrix == VK_TRUE;
  if (c.coopmat_nv && inst.fns.vkGetPhysicalDeviceCooperativeMatrixPropertiesNV) {
    VkCooperativeMatrixPropertiesNV init{};
    init.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
    for (const auto& s : two_call(init, [&](uint32_t* n, auto* out) {
           inst.fns.vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(p.handle, n, out);
         })) {
      c.coopmat_nv_shapes.push_back({s.MSize, s.NSize, s.KSize, component_name(s.AType),
                                     component_name(s.BType), component_name(s.CType),
                                     component_name(s.DType), scope_name(s.scope)});
    }
  }
  c.coopmat_khr = p.coopmat_khr.cooperativeMatrix == VK_TRUE;
  if (c.coopmat_khr && inst.fns.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR) {
    for (const auto& s : two_call(CoopMatPropertiesKHR{}, [&](uint32_t* n, auto* out) {
           inst.fns.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(p.handle, n, out);
         })) {
      c.coopmat_khr_shapes.push_back({s.MSize, s.NSize, s.KSize, component_name(s.AType),
                                      component_name(s.BType), component_name(s.CType),
                                      component_name(s.ResultType), scope_name(s.scope)});
    }
  }
  c.coopmat2_workgroup = c.coopmat_khr && p.coopmat2.cooperativeMatrixWorkgroupScope == VK_TRUE &&
                         p.coopmat2.cooperativeMatrixFlexibleDimensions == VK_TRUE;
  c.coopmat2_tensor_addressing =
      c.coopmat2_workgroup && p.coopmat2.cooperativeMatrixTensorAddressing == VK_TRUE;
  if (c.coopmat2_workgroup && inst.fns.vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV) {
    for (const auto& s : two_call(CoopMatFlexiblePropertiesNV{}, [&](uint32_t* n, auto* out) {
           inst.fns.vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV(p.handle, n, out);
         })) {
      CoopMatShape shape{s.MGranularity,
                         s.NGranularity,
                         s.KGranularity,
                         component_name(s.AType),
                         component_name(s.BType),
                         component_name(s.CType),
                         component_name(s.ResultType),
                         scope_name(s.scope)};
      shape.workgroup_invocations = s.workgroupInvocations;
      c.coopmat2_flexible_shapes.push_back(shape);
    }
  }
}

void query_queue(Instance& inst, PhysicalInfo& p) {
  uint32_t n = 0;
  inst.fns.vkGetPhysicalDeviceQueueFamilyProperties(p.handle, &n, nullptr);
  std::vector<VkQueueFamilyProperties> families(n);
  inst.fns.vkGetPhysicalDeviceQueueFamilyProperties(p.handle, &n, families.data());
  // Prefer a compute queue with timestamps; a compute-only family is no faster for one queue, so the first
  // wins.
  for (uint32_t i = 0; i < n; ++i) {
    if (!(families[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (p.compute_family == UINT32_MAX ||
        (p.timestamp_valid_bits == 0 && families[i].timestampValidBits > 0)) {
      p.compute_family = i;
      p.timestamp_valid_bits = families[i].timestampValidBits;
    }
  }
  p.caps.timestamps = p.timestamp_valid_bits > 0 && p.caps.timestamp_period_ns > 0.0;
}

}  // namespace

bool PhysicalInfo::has(const char* ext) const {
  return std::find(extensions.begin(), extensions.end(), ext) != extensions.end();
}

std::vector<MemoryHeap> query_heaps(Instance& inst, const PhysicalInfo& p) {
  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{};
  budget.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT;
  VkPhysicalDeviceMemoryProperties2 m2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2, nullptr, {}};
  const bool has_budget = p.has(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  if (has_budget) m2.pNext = &budget;
  inst.fns.vkGetPhysicalDeviceMemoryProperties2(p.handle, &m2);
  std::vector<MemoryHeap> heaps;
  for (uint32_t i = 0; i < m2.memoryProperties.memoryHeapCount; ++i) {
    MemoryHeap h;
    h.size = m2.memoryProperties.memoryHeaps[i].size;
    h.device_local = (m2.memoryProperties.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0;
    h.budget = has_budget && budget.heapBudget[i] ? budget.heapBudget[i] : h.size;
    h.usage = has_budget ? budget.heapUsage[i] : 0;
    heaps.push_back(h);
  }
  return heaps;
}

std::vector<PhysicalInfo> query_physical_devices(Instance& inst) {
  uint32_t n = 0;
  VkResult r = inst.fns.vkEnumeratePhysicalDevices(inst.handle, &n, nullptr);
  check(r, "runtime", "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> handles(n);
  r = inst.fns.vkEnumeratePhysicalDevices(inst.handle, &n, handles.data());
  if (r != VK_INCOMPLETE) check(r, "runtime", "vkEnumeratePhysicalDevices");
  std::vector<PhysicalInfo> out;
  for (uint32_t i = 0; i < n; ++i) {
    PhysicalInfo p;
    p.handle = handles[i];
    VkPhysicalDeviceProperties props;
    inst.fns.vkGetPhysicalDeviceProperties(p.handle, &props);
    p.api_version = std::min(props.apiVersion, inst.api_version);
    if (p.api_version < VK_API_VERSION_1_1) continue;  // the backend needs subgroups and features2
    uint32_t ne = 0;
    inst.fns.vkEnumerateDeviceExtensionProperties(p.handle, nullptr, &ne, nullptr);
    std::vector<VkExtensionProperties> exts(ne);
    inst.fns.vkEnumerateDeviceExtensionProperties(p.handle, nullptr, &ne, exts.data());
    for (const auto& e : exts) p.extensions.emplace_back(e.extensionName);
    query_features(inst, p);
    query_properties(inst, p);
    query_coopmat(inst, p);
    query_queue(inst, p);
    DeviceCaps& c = p.caps;
    c.fp16_arithmetic = p.f12.shaderFloat16 == VK_TRUE;
    c.int8_arithmetic = p.f12.shaderInt8 == VK_TRUE;
    c.storage_16bit = p.f11.storageBuffer16BitAccess == VK_TRUE;
    c.buffer_device_address = p.f12.bufferDeviceAddress == VK_TRUE;
    c.vulkan_memory_model = p.f12.vulkanMemoryModel == VK_TRUE;
    c.shader_float_atomic_add = p.atomic_float.shaderBufferFloat32AtomicAdd == VK_TRUE;
    c.pipeline_executable_info = p.pipeline_executable.pipelineExecutableInfo == VK_TRUE;
    c.heaps = query_heaps(inst, p);
    if (p.compute_family == UINT32_MAX) continue;  // nothing we can use
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace meganeura::runtime::vk
