#include "meganeura/runtime/vk_commands.hpp"

#include <algorithm>
#include <cstring>

namespace meganeura::runtime::vk {
namespace {

constexpr uint32_t kSetsPerPool = 256;
constexpr uint32_t kDescriptorsPerPool = 2048;

// Every compute or transfer write before, visible to every compute or transfer access after.
void full_barrier(const Fns& f, VkCommandBuffer cb, VkPipelineStageFlags src, VkAccessFlags src_access,
                  VkPipelineStageFlags dst, VkAccessFlags dst_access) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER, nullptr, src_access, dst_access};
  f.vkCmdPipelineBarrier(cb, src, dst, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

constexpr VkPipelineStageFlags kWork = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
constexpr VkAccessFlags kWrites = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
constexpr VkAccessFlags kAll = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                               VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;

}  // namespace

VulkanCommandList::VulkanCommandList(VulkanDevice& d, uint32_t timestamp_capacity)
    : dev(&d), capacity(timestamp_capacity), written(timestamp_capacity, false) {
  if (capacity > 0 && !d.caps().timestamps) {
    throw DeviceError("[Device::record] expected a device with timestamp queries for timestamp_capacity " +
                      std::to_string(capacity) + ", got " + d.caps().name + " without them");
  }
  const Fns& f = d.fns();
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, nullptr, d.pool(),
                                 VK_COMMAND_BUFFER_LEVEL_PRIMARY, 1};
  check(f.vkAllocateCommandBuffers(d.handle(), &ai, &cb), "Device::record", "vkAllocateCommandBuffers");
  if (capacity > 0) {
    VkQueryPoolCreateInfo qi{};
    qi.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = capacity;
    check(f.vkCreateQueryPool(d.handle(), &qi, nullptr, &queries), "Device::record", "vkCreateQueryPool");
  }
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, nullptr, 0, nullptr};
  check(f.vkBeginCommandBuffer(cb, &bi), "Device::record", "vkBeginCommandBuffer");
  // Queries are reset inside the list so that every replay measures afresh.
  if (queries != VK_NULL_HANDLE) f.vkCmdResetQueryPool(cb, queries, 0, capacity);
  // Writes from earlier submissions and uploads are made visible to this list's first commands.
  full_barrier(f, cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT, kWork, kAll);
}

VulkanCommandList::~VulkanCommandList() {
  if (dev == nullptr) return;
  try {
    dev->wait_until(last, "CommandList::~CommandList");
  } catch (const Error&) {
    // The device is lost; freeing the objects is all that is left to do.
  }
  release();
}

void VulkanCommandList::release() {
  if (dev == nullptr) return;
  const Fns& f = dev->fns();
  VkDevice d = dev->handle();
  for (VkDescriptorPool p : pools_) f.vkDestroyDescriptorPool(d, p, nullptr);
  pools_.clear();
  if (queries != VK_NULL_HANDLE) f.vkDestroyQueryPool(d, queries, nullptr);
  if (cb != VK_NULL_HANDLE) f.vkFreeCommandBuffers(d, dev->pool(), 1, &cb);
  queries = VK_NULL_HANDLE;
  cb = VK_NULL_HANDLE;
  dev->forget(this);
  dev = nullptr;
}

VulkanDevice& VulkanCommandList::device(const char* where) {
  if (dev == nullptr) {
    throw DeviceError(std::string("[") + where +
                      "] expected a command list whose Device is alive, got one that "
                      "outlived its Device");
  }
  if (finished) {
    throw DeviceError(std::string("[") + where +
                      "] expected a list still being recorded, got one after finish()");
  }
  return *dev;
}

VkDescriptorSet VulkanCommandList::allocate_set(const Kernel& k) {
  VulkanDevice& d = *dev;
  const Fns& f = d.fns();
  if (sets_left_ == 0 || descriptors_left_ < k.num_buffers) {
    const uint32_t descriptors = std::max(kDescriptorsPerPool, k.num_buffers);
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptors};
    VkDescriptorPoolCreateInfo pi{
        VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, nullptr, 0, kSetsPerPool, 1, &size};
    VkDescriptorPool pool;
    check(f.vkCreateDescriptorPool(d.handle(), &pi, nullptr, &pool), "CommandList::dispatch",
          "vkCreateDescriptorPool");
    pools_.push_back(pool);
    sets_left_ = kSetsPerPool;
    descriptors_left_ = descriptors;
  }
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, nullptr, pools_.back(), 1,
                                 &k.set_layout};
  VkDescriptorSet set;
  check(f.vkAllocateDescriptorSets(d.handle(), &ai, &set), "CommandList::dispatch",
        "vkAllocateDescriptorSets");
  --sets_left_;
  descriptors_left_ -= k.num_buffers;
  return set;
}

void VulkanCommandList::dispatch(KernelId id, std::span<const Buffer> buffers,
                                 std::span<const std::byte> push, uint32_t gx, uint32_t gy, uint32_t gz) {
  VulkanDevice& d = device("CommandList::dispatch");
  const Kernel& k = d.kernel(id, "CommandList::dispatch");
  const Fns& f = d.fns();
  if (buffers.size() != k.num_buffers) {
    throw DeviceError("[CommandList::dispatch] expected " + std::to_string(k.num_buffers) +
                      " buffers for kernel '" + k.label + "', got " + std::to_string(buffers.size()));
  }
  if (push.size() > k.push_bytes) {
    throw DeviceError("[CommandList::dispatch] expected at most " + std::to_string(k.push_bytes) +
                      " push-constant bytes for kernel '" + k.label + "', got " +
                      std::to_string(push.size()));
  }
  const uint32_t groups[3] = {gx, gy, gz};
  for (int i = 0; i < 3; ++i) {
    if (groups[i] > d.caps().max_workgroup_count[i]) {
      throw DeviceError("[CommandList::dispatch] expected at most " +
                        std::to_string(d.caps().max_workgroup_count[i]) + " workgroups in dimension " +
                        std::to_string(i) + " for kernel '" + k.label + "', got " +
                        std::to_string(groups[i]));
    }
  }
  // Everything is checked before anything is recorded, so a rejected dispatch leaves the list as it was.
  std::vector<VkDescriptorBufferInfo> infos(k.num_buffers);
  const uint64_t align = std::max<uint64_t>(1, d.caps().min_storage_buffer_offset_alignment);
  for (uint32_t i = 0; i < k.num_buffers; ++i) {
    const Buffer& b = buffers[i];
    d.memory().check_range(b, 0, b.size, "CommandList::dispatch");
    if (b.offset % align != 0) {
      throw DeviceError("[CommandList::dispatch] expected buffer " + std::to_string(i) + " of kernel '" +
                        k.label + "' at an offset that is a multiple of " + std::to_string(align) + ", got " +
                        std::to_string(b.offset));
    }
    // A zero-byte buffer still needs a non-empty range; it borrows bytes of its reservation.
    uint64_t range = b.size;
    if (range == 0) range = std::min<uint64_t>(4, d.memory().block_size(b) - b.offset);
    if (range == 0) {
      throw DeviceError("[CommandList::dispatch] expected a bindable buffer " + std::to_string(i) +
                        " for kernel '" + k.label + "', got an empty slice at the end of its block");
    }
    infos[i] = {d.memory().vk_buffer(b), b.offset, range};
  }
  if (id != bound_) {
    f.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, k.pipeline);
    bound_ = id;
  }
  if (k.num_buffers > 0) {
    VkDescriptorSet set = allocate_set(k);
    std::vector<VkWriteDescriptorSet> writes(k.num_buffers);
    for (uint32_t i = 0; i < k.num_buffers; ++i) {
      writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, nullptr, set,       i,      0, 1,
                   VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,      nullptr, &infos[i], nullptr};
    }
    f.vkUpdateDescriptorSets(d.handle(), k.num_buffers, writes.data(), 0, nullptr);
    f.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, k.layout, 0, 1, &set, 0, nullptr);
  }
  if (k.push_bytes > 0) {
    // Short push data is zero-padded so the shader never reads undefined bytes.
    std::vector<std::byte> data(k.push_bytes, std::byte{0});
    if (!push.empty()) std::memcpy(data.data(), push.data(), push.size());
    f.vkCmdPushConstants(cb, k.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, k.push_bytes, data.data());
  }
  f.vkCmdDispatch(cb, gx, gy, gz);
}

void VulkanCommandList::barrier() {
  VulkanDevice& d = device("CommandList::barrier");
  full_barrier(d.fns(), cb, kWork, kWrites, kWork, kAll);
}

void VulkanCommandList::copy(const Buffer& src, const Buffer& dst, uint64_t bytes) {
  VulkanDevice& d = device("CommandList::copy");
  d.memory().check_range(src, 0, bytes, "CommandList::copy");
  d.memory().check_range(dst, 0, bytes, "CommandList::copy");
  if (bytes == 0) return;
  if (src.block == dst.block && src.offset < dst.offset + bytes && dst.offset < src.offset + bytes) {
    throw DeviceError("[CommandList::copy] expected source and destination that do not overlap, got " +
                      std::to_string(bytes) + " bytes from offset " + std::to_string(src.offset) + " to " +
                      std::to_string(dst.offset) + " of one block");
  }
  VkBufferCopy region{src.offset, dst.offset, bytes};
  d.fns().vkCmdCopyBuffer(cb, d.memory().vk_buffer(src), d.memory().vk_buffer(dst), 1, &region);
}

void VulkanCommandList::timestamp(uint32_t query) {
  VulkanDevice& d = device("CommandList::timestamp");
  if (query >= capacity) {
    throw DeviceError("[CommandList::timestamp] expected a query below the timestamp_capacity " +
                      std::to_string(capacity) + " given to Device::record, got " + std::to_string(query));
  }
  if (written[query]) {
    throw DeviceError("[CommandList::timestamp] expected each query written once per list, got query " +
                      std::to_string(query) + " twice");
  }
  d.fns().vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, query);
  written[query] = true;
}

void VulkanCommandList::begin_label(const std::string& label) {
  VulkanDevice& d = device("CommandList::begin_label");
  ++label_depth_;
  if (!d.debug_utils() || !d.fns().vkCmdBeginDebugUtilsLabelEXT) return;
  VkDebugUtilsLabelEXT l{VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT, nullptr, label.c_str(), {0, 0, 0, 0}};
  d.fns().vkCmdBeginDebugUtilsLabelEXT(cb, &l);
}

void VulkanCommandList::end_label() {
  VulkanDevice& d = device("CommandList::end_label");
  if (label_depth_ == 0) throw DeviceError("[CommandList::end_label] expected an open label, got none");
  --label_depth_;
  if (!d.debug_utils() || !d.fns().vkCmdEndDebugUtilsLabelEXT) return;
  d.fns().vkCmdEndDebugUtilsLabelEXT(cb);
}

void VulkanCommandList::finish() {
  VulkanDevice& d = device("CommandList::finish");
  while (label_depth_ > 0) end_label();
  // Results are made visible to the host (mapped buffers) and to whatever is submitted next.
  full_barrier(d.fns(), cb, kWork, kWrites, VK_PIPELINE_STAGE_HOST_BIT | kWork,
               VK_ACCESS_HOST_READ_BIT | kAll);
  check(d.fns().vkEndCommandBuffer(cb), "CommandList::finish", "vkEndCommandBuffer");
  finished = true;
}

}  // namespace meganeura::runtime::vk
