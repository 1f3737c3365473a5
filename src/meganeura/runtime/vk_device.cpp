// The Vulkan Device: logical device with the useful features enabled, transfers through staging, kernels.
#include "meganeura/runtime/vk_device.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "meganeura/runtime/vk_commands.hpp"

namespace meganeura::runtime::vk {
namespace {

constexpr uint64_t kStagingMax = 64ull << 20;
constexpr uint64_t kStagingMin = 1ull << 20;
constexpr uint64_t kFenceTimeoutNs = 600ull * 1000 * 1000 * 1000;

// Turns on the features a generated kernel may use, where the device has them. robustBufferAccess stays
// off: it costs bounds checks on every access and our kernels are bounds-correct by construction.
struct EnabledFeatures {
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, nullptr, {}};
  VkPhysicalDeviceVulkan11Features f11{};
  VkPhysicalDeviceVulkan12Features f12{};
  VkPhysicalDeviceVulkan13Features f13{};
  VkPhysicalDeviceSubgroupSizeControlFeatures size_control{};
  VkPhysicalDeviceShaderAtomicFloatFeaturesEXT atomic_float{};
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coopmat_nv{};
  CoopMatFeaturesKHR coopmat_khr{};
  CoopMat2FeaturesNV coopmat2{};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pipeline_executable{};
  std::vector<const char*> extensions;

  explicit EnabledFeatures(const PhysicalInfo& p) {
    void** tail = &f2.pNext;
    auto link = [&](auto& s, VkStructureType type) {
      s.sType = type;
      s.pNext = nullptr;
      *tail = &s;
      tail = &s.pNext;
    };
    auto ext = [&](const char* name) {
      if (p.has(name)) extensions.push_back(name);
      return p.has(name);
    };
    f2.features.shaderInt16 = p.f10.shaderInt16;
    f2.features.shaderInt64 = p.f10.shaderInt64;
    f2.features.shaderFloat64 = p.f10.shaderFloat64;
    if (p.api_version >= VK_API_VERSION_1_2) {
      link(f11, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES);
      f11.storageBuffer16BitAccess = p.f11.storageBuffer16BitAccess;
      f11.uniformAndStorageBuffer16BitAccess = p.f11.uniformAndStorageBuffer16BitAccess;
      f11.storagePushConstant16 = p.f11.storagePushConstant16;
      f11.variablePointersStorageBuffer = p.f11.variablePointersStorageBuffer;
      f11.variablePointers = p.f11.variablePointers;
      link(f12, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
      f12.shaderFloat16 = p.f12.shaderFloat16;
      f12.shaderInt8 = p.f12.shaderInt8;
      f12.storageBuffer8BitAccess = p.f12.storageBuffer8BitAccess;
      f12.uniformAndStorageBuffer8BitAccess = p.f12.uniformAndStorageBuffer8BitAccess;
      f12.storagePushConstant8 = p.f12.storagePushConstant8;
      f12.shaderBufferInt64Atomics = p.f12.shaderBufferInt64Atomics;
      f12.shaderSubgroupExtendedTypes = p.f12.shaderSubgroupExtendedTypes;
      f12.scalarBlockLayout = p.f12.scalarBlockLayout;
      f12.uniformBufferStandardLayout = p.f12.uniformBufferStandardLayout;
      f12.bufferDeviceAddress = p.f12.bufferDeviceAddress;
      f12.vulkanMemoryModel = p.f12.vulkanMemoryModel;
      f12.vulkanMemoryModelDeviceScope = p.f12.vulkanMemoryModelDeviceScope;
      f12.hostQueryReset = p.f12.hostQueryReset;
      f12.timelineSemaphore = p.f12.timelineSemaphore;
      f12.subgroupBroadcastDynamicId = p.f12.subgroupBroadcastDynamicId;
    }
    if (p.api_version >= VK_API_VERSION_1_3) {
      link(f13, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES);
      f13.subgroupSizeControl = p.f13.subgroupSizeControl;
      f13.computeFullSubgroups = p.f13.computeFullSubgroups;
      f13.maintenance4 = p.f13.maintenance4;
      f13.shaderIntegerDotProduct = p.f13.shaderIntegerDotProduct;
    } else if (ext(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME)) {
      link(size_control, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES);
      size_control.subgroupSizeControl = p.subgroup_size_control.subgroupSizeControl;
      size_control.computeFullSubgroups = p.subgroup_size_control.computeFullSubgroups;
    }
    if (ext(VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME)) {
      link(atomic_float, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT);
      atomic_float.shaderBufferFloat32Atomics = p.atomic_float.shaderBufferFloat32Atomics;
      atomic_float.shaderBufferFloat32AtomicAdd = p.atomic_float.shaderBufferFloat32AtomicAdd;
      atomic_float.shaderSharedFloat32Atomics = p.atomic_float.shaderSharedFloat32Atomics;
      atomic_float.shaderSharedFloat32AtomicAdd = p.atomic_float.shaderSharedFloat32AtomicAdd;
    }
    if (p.coopmat_nv.cooperativeMatrix && ext(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME)) {
      link(coopmat_nv, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV);
      coopmat_nv.cooperativeMatrix = VK_TRUE;
    }
    if (p.coopmat_khr.cooperativeMatrix && ext(kKhrCooperativeMatrixExtension)) {
      link(coopmat_khr, kStructCoopMatFeaturesKHR);
      coopmat_khr.cooperativeMatrix = VK_TRUE;
      if (p.coopmat2.cooperativeMatrixWorkgroupScope && p.coopmat2.cooperativeMatrixFlexibleDimensions &&
          ext(kNvCooperativeMatrix2Extension)) {
        link(coopmat2, kStructCoopMat2FeaturesNV);
        coopmat2.cooperativeMatrixWorkgroupScope = VK_TRUE;
        coopmat2.cooperativeMatrixFlexibleDimensions = VK_TRUE;
        coopmat2.cooperativeMatrixTensorAddressing = p.coopmat2.cooperativeMatrixTensorAddressing;
      }
    }
    // Costs nothing until a kernel asks for a capture (KernelDesc::capture).
    if (p.caps.pipeline_executable_info && ext(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME)) {
      link(pipeline_executable,
           VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR);
      pipeline_executable.pipelineExecutableInfo = VK_TRUE;
    }
    ext(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    ext("VK_KHR_portability_subset");  // required whenever a device offers it
  }
};

}  // namespace

VulkanDevice::VulkanDevice(std::shared_ptr<Instance> inst, PhysicalInfo info, const DeviceOptions& options)
    : inst_(std::move(inst)), info_(std::move(info)), f_(inst_->fns) {
  EnabledFeatures enabled(info_);
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qi{
      VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, nullptr, 0, info_.compute_family, 1, &priority};
  VkDeviceCreateInfo di{};
  di.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  di.pNext = &enabled.f2;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  di.enabledExtensionCount = static_cast<uint32_t>(enabled.extensions.size());
  di.ppEnabledExtensionNames = enabled.extensions.data();
  {
    const CoopMatDeviceScope known_layer_limits;  // an old layer's word on the cooperative-matrix extensions
    check(f_.vkCreateDevice(info_.handle, &di, nullptr, &device_), "open_device", "vkCreateDevice");
  }
  load_device(f_, device_);
  try {
    f_.vkGetDeviceQueue(device_, info_.compute_family, 0, &queue_);
    VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, nullptr,
                               VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, info_.compute_family};
    check(f_.vkCreateCommandPool(device_, &pi, nullptr, &pool_), "open_device", "vkCreateCommandPool");
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, nullptr, pool_,
                                   VK_COMMAND_BUFFER_LEVEL_PRIMARY, 1};
    check(f_.vkAllocateCommandBuffers(device_, &ai, &transfer_cb_), "open_device",
          "vkAllocateCommandBuffers");
    VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO, nullptr, 0};
    check(f_.vkCreateFence(device_, &fi, nullptr, &transfer_fence_), "open_device", "vkCreateFence");
    VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO, nullptr, 0, 0, nullptr};
    check(f_.vkCreatePipelineCache(device_, &ci, nullptr, &cache_), "open_device", "vkCreatePipelineCache");
    memory_ = std::make_unique<BlockAllocator>(*inst_, f_, device_, info_, options.host_visible,
                                               options.block_bytes);
  } catch (...) {
    if (cache_) f_.vkDestroyPipelineCache(device_, cache_, nullptr);
    if (transfer_fence_) f_.vkDestroyFence(device_, transfer_fence_, nullptr);
    if (pool_) f_.vkDestroyCommandPool(device_, pool_, nullptr);
    f_.vkDestroyDevice(device_, nullptr);
    throw;
  }
  // The heap budget is re-read on every block allocation; caps keep the picture at open time.
  info_.caps.heaps = query_heaps(*inst_, info_);
}

VulkanDevice::~VulkanDevice() {
  f_.vkDeviceWaitIdle(device_);
  while (!lists_.empty()) (*lists_.begin())->release();
  for (Kernel& k : kernels_) {
    f_.vkDestroyPipeline(device_, k.pipeline, nullptr);
    f_.vkDestroyPipelineLayout(device_, k.layout, nullptr);
    f_.vkDestroyDescriptorSetLayout(device_, k.set_layout, nullptr);
    f_.vkDestroyShaderModule(device_, k.module, nullptr);
  }
  if (staging_) f_.vkDestroyBuffer(device_, staging_, nullptr);
  if (staging_memory_) f_.vkFreeMemory(device_, staging_memory_, nullptr);
  memory_.reset();
  for (const InFlight& e : in_flight_) f_.vkDestroyFence(device_, e.fence, nullptr);
  for (VkFence fence : spare_fences_) f_.vkDestroyFence(device_, fence, nullptr);
  f_.vkDestroyFence(device_, transfer_fence_, nullptr);
  f_.vkDestroyPipelineCache(device_, cache_, nullptr);
  f_.vkDestroyCommandPool(device_, pool_, nullptr);
  f_.vkDestroyDevice(device_, nullptr);
}

std::vector<std::string> VulkanDevice::validation_messages() const {
  std::lock_guard<std::mutex> lock(inst_->log.mutex);
  return inst_->log.messages;
}

size_t VulkanDevice::validation_known_limits() const {
  std::lock_guard<std::mutex> lock(inst_->log.mutex);
  return inst_->log.known_limits;
}

void VulkanDevice::name_object(VkObjectType type, uint64_t handle, const std::string& name) {
  if (!inst_->debug_utils || !f_.vkSetDebugUtilsObjectNameEXT) return;
  VkDebugUtilsObjectNameInfoEXT ni{VK_STRUCTURE_TYPE_DEBUG_UTILS_OBJECT_NAME_INFO_EXT, nullptr, type, handle,
                                   name.c_str()};
  f_.vkSetDebugUtilsObjectNameEXT(device_, &ni);
}

void VulkanDevice::wait_fences(const std::vector<VkFence>& fences, const char* where) {
  if (fences.empty()) return;
  VkResult r = f_.vkWaitForFences(device_, uint32_t(fences.size()), fences.data(), VK_TRUE, kFenceTimeoutNs);
  if (r == VK_TIMEOUT) {
    throw DeviceError(std::string("[") + where +
                      "] expected submitted work to finish within 600 s, got a timeout on " +
                      info_.caps.name + " (a kernel that never ends?)");
  }
  check(r, where, "vkWaitForFences");
}

Buffer VulkanDevice::alloc(uint64_t bytes) { return memory_->alloc(bytes, false); }

Buffer VulkanDevice::alloc_host(uint64_t bytes) { return memory_->alloc(bytes, true); }

std::byte* VulkanDevice::host_pointer(const Buffer& b) {
  memory_->check_range(b, 0, b.size, "Device::host_pointer");
  if (!memory_->is_host(b))
    throw DeviceError(
        "[Device::host_pointer] expected a buffer from Device::alloc_host, got one of device memory");
  return reinterpret_cast<std::byte*>(memory_->mapped(b));
}

void VulkanDevice::free(const Buffer& b) { memory_->free(b); }

template <typename F>
void VulkanDevice::one_shot(F&& record, const char* where) {
  check(f_.vkResetCommandBuffer(transfer_cb_, 0), where, "vkResetCommandBuffer");
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, nullptr,
                              VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, nullptr};
  check(f_.vkBeginCommandBuffer(transfer_cb_, &bi), where, "vkBeginCommandBuffer");
  VkMemoryBarrier before{VK_STRUCTURE_TYPE_MEMORY_BARRIER, nullptr, VK_ACCESS_MEMORY_WRITE_BIT,
                         VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
  f_.vkCmdPipelineBarrier(transfer_cb_, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0,
                          1, &before, 0, nullptr, 0, nullptr);
  record(transfer_cb_);
  VkMemoryBarrier after{VK_STRUCTURE_TYPE_MEMORY_BARRIER, nullptr, VK_ACCESS_TRANSFER_WRITE_BIT,
                        VK_ACCESS_HOST_READ_BIT};
  f_.vkCmdPipelineBarrier(transfer_cb_, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                          &after, 0, nullptr, 0, nullptr);
  check(f_.vkEndCommandBuffer(transfer_cb_), where, "vkEndCommandBuffer");
  check(f_.vkResetFences(device_, 1, &transfer_fence_), where, "vkResetFences");
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &transfer_cb_;
  check(f_.vkQueueSubmit(queue_, 1, &si, transfer_fence_), where, "vkQueueSubmit");
  wait_fences({transfer_fence_}, where);
}

void VulkanDevice::ensure_staging(uint64_t bytes) {
  bytes = std::clamp(bytes, kStagingMin, kStagingMax);
  if (staging_bytes_ >= bytes) return;
  if (staging_) f_.vkDestroyBuffer(device_, staging_, nullptr);
  if (staging_memory_) f_.vkFreeMemory(device_, staging_memory_, nullptr);
  staging_ = VK_NULL_HANDLE;
  staging_memory_ = VK_NULL_HANDLE;
  staging_bytes_ = 0;
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = bytes;
  bi.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  check(f_.vkCreateBuffer(device_, &bi, nullptr, &staging_), "Device::upload", "vkCreateBuffer");
  VkMemoryRequirements req;
  f_.vkGetBufferMemoryRequirements(device_, staging_, &req);
  VkPhysicalDeviceMemoryProperties mem;
  inst_->fns.vkGetPhysicalDeviceMemoryProperties(info_.handle, &mem);
  const VkMemoryPropertyFlags need =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  uint32_t type = UINT32_MAX;
  // Cached memory makes downloads fast; uncached still works.
  for (int pass = 0; pass < 2 && type == UINT32_MAX; ++pass) {
    for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
      const VkMemoryPropertyFlags fl = mem.memoryTypes[i].propertyFlags;
      if (!(req.memoryTypeBits & (1u << i)) || (fl & need) != need) continue;
      if (pass == 0 && !(fl & VK_MEMORY_PROPERTY_HOST_CACHED_BIT)) continue;
      type = i;
      break;
    }
  }
  if (type == UINT32_MAX) {
    throw DeviceError(
        "[Device::upload] expected a host-visible coherent memory type for staging, got none on " +
        info_.caps.name);
  }
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, nullptr, req.size, type};
  VkResult r = f_.vkAllocateMemory(device_, &ai, nullptr, &staging_memory_);
  if (r != VK_SUCCESS) {
    throw DeviceError("[Device::upload] expected " + std::to_string(req.size) +
                      " bytes of host memory for staging, got " + result_name(r));
  }
  check(f_.vkBindBufferMemory(device_, staging_, staging_memory_, 0), "Device::upload", "vkBindBufferMemory");
  check(f_.vkMapMemory(device_, staging_memory_, 0, VK_WHOLE_SIZE, 0, &staging_map_), "Device::upload",
        "vkMapMemory");
  staging_bytes_ = bytes;
}

void VulkanDevice::upload(const Buffer& dst, const void* data, uint64_t bytes, uint64_t offset) {
  memory_->check_range(dst, offset, bytes, "Device::upload");
  if (bytes == 0) return;
  wait();
  if (memory_->host_visible()) {
    std::memcpy(memory_->mapped(dst) + offset, data, bytes);
    return;
  }
  ensure_staging(bytes);
  const char* src = static_cast<const char*>(data);
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(staging_bytes_, bytes - done);
    std::memcpy(staging_map_, src + done, n);
    VkBufferCopy region{0, dst.offset + offset + done, n};
    VkBuffer target = memory_->vk_buffer(dst);
    one_shot([&](VkCommandBuffer cb) { f_.vkCmdCopyBuffer(cb, staging_, target, 1, &region); },
             "Device::upload");
    done += n;
  }
}

void VulkanDevice::download(const Buffer& src, void* data, uint64_t bytes, uint64_t offset) {
  memory_->check_range(src, offset, bytes, "Device::download");
  if (bytes == 0) return;
  wait();
  if (memory_->host_visible()) {
    std::memcpy(data, memory_->mapped(src) + offset, bytes);
    return;
  }
  ensure_staging(bytes);
  char* out = static_cast<char*>(data);
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(staging_bytes_, bytes - done);
    VkBufferCopy region{src.offset + offset + done, 0, n};
    VkBuffer source = memory_->vk_buffer(src);
    one_shot([&](VkCommandBuffer cb) { f_.vkCmdCopyBuffer(cb, source, staging_, 1, &region); },
             "Device::download");
    std::memcpy(out + done, staging_map_, n);
    done += n;
  }
}

void VulkanDevice::fill_zero(const Buffer& b) {
  memory_->check_range(b, 0, b.size, "Device::fill_zero");
  if (b.size == 0) return;
  wait();
  // vkCmdFillBuffer works in whole words at word offsets; a slice's odd edges go through upload so that
  // neighbouring bytes of an arena are never touched.
  const uint64_t head = std::min<uint64_t>(b.size, (4 - b.offset % 4) % 4);
  const uint64_t words = (b.size - head) / 4 * 4;
  const uint64_t tail = b.size - head - words;
  const std::vector<char> zeros(4, 0);
  if (head > 0) upload(b, zeros.data(), head, 0);
  if (words > 0) {
    VkBuffer target = memory_->vk_buffer(b);
    const uint64_t offset = b.offset + head;
    one_shot([&](VkCommandBuffer cb) { f_.vkCmdFillBuffer(cb, target, offset, words, 0); },
             "Device::fill_zero");
  }
  if (tail > 0) upload(b, zeros.data(), tail, head + words);
}

const Kernel& VulkanDevice::kernel(KernelId id, const char* where) const {
  if (id >= kernels_.size()) {
    throw DeviceError(std::string("[") + where + "] expected a kernel id from create_kernel (below " +
                      std::to_string(kernels_.size()) + "), got " + std::to_string(id));
  }
  return kernels_[id];
}

KernelId VulkanDevice::create_kernel(const KernelDesc& desc) {
  const DeviceCaps& c = info_.caps;
  auto fail = [&](const std::string& expected, const std::string& got) {
    return DeviceError("[Device::create_kernel] expected " + expected + " for kernel '" + desc.label +
                       "', got " + got);
  };
  if (desc.spirv.empty() || desc.spirv[0] != 0x07230203u) {
    throw fail("a SPIR-V module (magic 0x07230203)", desc.spirv.empty() ? "no words" : "another first word");
  }
  if (desc.push_constant_bytes % 4 != 0 || desc.push_constant_bytes > c.max_push_constants_size) {
    throw fail("push-constant bytes a multiple of 4 and at most " + std::to_string(c.max_push_constants_size),
               std::to_string(desc.push_constant_bytes));
  }
  if (desc.num_buffers > info_.max_storage_buffers_per_stage) {
    throw fail("at most " + std::to_string(info_.max_storage_buffers_per_stage) + " storage buffers",
               std::to_string(desc.num_buffers));
  }
  const uint32_t sg = desc.required_subgroup_size;
  if (sg != 0) {
    const bool ok = c.subgroup_size_control &&
                    (info_.required_subgroup_size_stages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                    sg >= c.min_subgroup_size && sg <= c.max_subgroup_size && (sg & (sg - 1)) == 0;
    if (!ok) {
      throw fail("a required subgroup size the device supports (" + std::to_string(c.min_subgroup_size) +
                     ".." + std::to_string(c.max_subgroup_size) + ", subgroup size control " +
                     (c.subgroup_size_control ? "on" : "off") + ")",
                 std::to_string(sg));
    }
  }

  Kernel k;
  k.label = desc.label;
  k.num_buffers = desc.num_buffers;
  k.push_bytes = desc.push_constant_bytes;
  k.capture = c.pipeline_executable_info ? desc.capture : PipelineCapture::None;
  auto cleanup = [&] {
    if (k.pipeline) f_.vkDestroyPipeline(device_, k.pipeline, nullptr);
    if (k.layout) f_.vkDestroyPipelineLayout(device_, k.layout, nullptr);
    if (k.set_layout) f_.vkDestroyDescriptorSetLayout(device_, k.set_layout, nullptr);
    if (k.module) f_.vkDestroyShaderModule(device_, k.module, nullptr);
  };
  auto vk_check = [&](VkResult r, const char* call) {
    if (r != VK_SUCCESS) {
      cleanup();
      throw fail(std::string("VK_SUCCESS from ") + call, result_name(r));
    }
  };

  // An old validation layer's messages about KHR cooperative-matrix modules are counted apart
  // (vk_instance.hpp).
  const KhrCoopMatScope known_layer_limits(inst_->layer_predates_coopmat_khr, desc.spirv);
  VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, nullptr, 0, desc.spirv.size() * 4,
                              desc.spirv.data()};
  vk_check(f_.vkCreateShaderModule(device_, &mi, nullptr, &k.module), "vkCreateShaderModule");

  std::vector<VkDescriptorSetLayoutBinding> bindings(desc.num_buffers);
  for (uint32_t i = 0; i < desc.num_buffers; ++i) {
    bindings[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  }
  VkDescriptorSetLayoutCreateInfo li{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, nullptr, 0,
                                     desc.num_buffers, bindings.data()};
  vk_check(f_.vkCreateDescriptorSetLayout(device_, &li, nullptr, &k.set_layout),
           "vkCreateDescriptorSetLayout");

  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, desc.push_constant_bytes};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                 nullptr,
                                 0,
                                 1,
                                 &k.set_layout,
                                 desc.push_constant_bytes ? 1u : 0u,
                                 &range};
  vk_check(f_.vkCreatePipelineLayout(device_, &pli, nullptr, &k.layout), "vkCreatePipelineLayout");

  std::vector<VkSpecializationMapEntry> entries(desc.spec_constants.size());
  for (uint32_t i = 0; i < entries.size(); ++i) entries[i] = {i, i * 4, 4};
  VkSpecializationInfo spec{static_cast<uint32_t>(entries.size()), entries.data(),
                            desc.spec_constants.size() * 4, desc.spec_constants.data()};
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfo required{};
  required.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO;
  required.requiredSubgroupSize = sg;
  VkComputePipelineCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  if (k.capture != PipelineCapture::None) ci.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  if (k.capture == PipelineCapture::Representations)
    ci.flags |= VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR;
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.pNext = sg ? &required : nullptr;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = k.module;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = entries.empty() ? nullptr : &spec;
  ci.layout = k.layout;
  vk_check(f_.vkCreateComputePipelines(device_, cache_, 1, &ci, nullptr, &k.pipeline),
           "vkCreateComputePipelines");

  name_object(VK_OBJECT_TYPE_PIPELINE, reinterpret_cast<uint64_t>(k.pipeline), desc.label);
  name_object(VK_OBJECT_TYPE_SHADER_MODULE, reinterpret_cast<uint64_t>(k.module), desc.label);
  kernels_.push_back(std::move(k));
  return static_cast<KernelId>(kernels_.size() - 1);
}

std::unique_ptr<CommandList> VulkanDevice::record(uint32_t timestamp_capacity) {
  auto list = std::make_unique<VulkanCommandList>(*this, timestamp_capacity);
  lists_.insert(list.get());
  return list;
}

VulkanCommandList& VulkanDevice::as_vulkan(CommandList& list, const char* where) {
  auto* vl = dynamic_cast<VulkanCommandList*>(&list);
  if (vl == nullptr || vl->dev != this) {
    throw DeviceError(std::string("[") + where +
                      "] expected a command list recorded by this device, got another");
  }
  return *vl;
}

uint64_t VulkanDevice::submit(CommandList& list) {
  VulkanCommandList& vl = as_vulkan(list, "Device::submit");
  if (!vl.finished)
    throw DeviceError("[Device::submit] expected a finished command list, got one still recording");
  wait_until(vl.last, "Device::submit");  // a command buffer without simultaneous use is pending at most once
  VkFence fence = VK_NULL_HANDLE;
  if (spare_fences_.empty()) {
    VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO, nullptr, 0};
    check(f_.vkCreateFence(device_, &fi, nullptr, &fence), "Device::submit", "vkCreateFence");
  } else {
    fence = spare_fences_.back();
    spare_fences_.pop_back();
  }
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &vl.cb;
  const VkResult r = f_.vkQueueSubmit(queue_, 1, &si, fence);
  if (r != VK_SUCCESS) spare_fences_.push_back(fence);
  check(r, "Device::submit", "vkQueueSubmit");
  in_flight_.push_back({++submitted_, fence});
  vl.last = submitted_;
  return submitted_;
}

// A fence's signal covers every command submitted earlier to the queue too, but each one is waited for
// anyway: that is what lets it be reset and reused.
void VulkanDevice::wait_until(uint64_t id, const char* where) {
  if (id > submitted_) {
    throw DeviceError(std::string("[") + where + "] expected a submission id from Device::submit (at most " +
                      std::to_string(submitted_) + "), got " + std::to_string(id));
  }
  if (id <= completed_) return;
  std::vector<VkFence> fences;
  for (const InFlight& e : in_flight_)
    if (e.id <= id) fences.push_back(e.fence);
  wait_fences(fences, where);
  check(f_.vkResetFences(device_, uint32_t(fences.size()), fences.data()), where, "vkResetFences");
  while (!in_flight_.empty() && in_flight_.front().id <= id) {
    spare_fences_.push_back(in_flight_.front().fence);
    in_flight_.pop_front();
  }
  completed_ = id;
}

void VulkanDevice::wait() { wait_until(submitted_, "Device::wait"); }

void VulkanDevice::wait(uint64_t id) { wait_until(id, "Device::wait"); }

bool VulkanDevice::finished(uint64_t id) {
  if (id > submitted_) wait_until(id, "Device::finished");  // throws the id error
  if (id <= completed_) return true;
  // The queue completes in submission order, so submission id's own fence covers every earlier one.
  for (const InFlight& e : in_flight_) {
    if (e.id != id) continue;
    const VkResult r = f_.vkGetFenceStatus(device_, e.fence);
    if (r == VK_NOT_READY) return false;
    check(r, "Device::finished", "vkGetFenceStatus");
    wait_until(id, "Device::finished");  // returns at once; recycles the fences
    return true;
  }
  return false;
}

std::vector<double> VulkanDevice::timestamps(CommandList& list) {
  VulkanCommandList& vl = as_vulkan(list, "Device::timestamps");
  if (vl.last == 0)
    throw DeviceError("[Device::timestamps] expected a list submitted at least once, got none");
  wait_until(vl.last, "Device::timestamps");
  const uint64_t mask = info_.timestamp_valid_bits >= 64 ? ~0ull : ((1ull << info_.timestamp_valid_bits) - 1);
  std::vector<double> out(vl.capacity, std::numeric_limits<double>::quiet_NaN());
  for (uint32_t q = 0; q < vl.capacity; ++q) {
    if (!vl.written[q]) continue;  // never written: asking would wait forever
    uint64_t ticks = 0;
    check(f_.vkGetQueryPoolResults(device_, vl.queries, q, 1, sizeof(ticks), &ticks, sizeof(ticks),
                                   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
          "Device::timestamps", "vkGetQueryPoolResults");
    out[q] = static_cast<double>(ticks & mask) * info_.caps.timestamp_period_ns;
  }
  return out;
}

}  // namespace meganeura::runtime::vk
