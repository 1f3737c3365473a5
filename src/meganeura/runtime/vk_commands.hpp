#pragma once
// Private to the Vulkan backend: a recorded command buffer with the descriptor sets and query pool it
// needs, kept alive with it so that it can be submitted again and again.
#include <vector>

#include "meganeura/runtime/vk_device.hpp"

namespace meganeura::runtime::vk {

class VulkanCommandList final : public CommandList {
 public:
  VulkanCommandList(VulkanDevice& dev, uint32_t timestamp_capacity);
  ~VulkanCommandList() override;

  void dispatch(KernelId kernel, std::span<const Buffer> buffers, std::span<const std::byte> push,
                uint32_t gx, uint32_t gy, uint32_t gz) override;
  void barrier() override;
  void copy(const Buffer& src, const Buffer& dst, uint64_t bytes) override;
  void timestamp(uint32_t query) override;
  void begin_label(const std::string& label) override;
  void end_label() override;
  void finish() override;

  // Called by the device when it is destroyed before the list: frees the Vulkan objects and orphans the list.
  void release();

  VulkanDevice* dev = nullptr;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  VkQueryPool queries = VK_NULL_HANDLE;
  uint32_t capacity = 0;
  std::vector<bool> written;
  bool finished = false;
  uint64_t last = 0;  // id of the latest submission, 0: never submitted

 private:
  VulkanDevice& device(const char* where);
  VkDescriptorSet allocate_set(const Kernel& k);

  std::vector<VkDescriptorPool> pools_;
  uint32_t sets_left_ = 0, descriptors_left_ = 0;
  KernelId bound_ = UINT32_MAX;
  int label_depth_ = 0;
};

}  // namespace meganeura::runtime::vk
