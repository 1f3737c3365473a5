#pragma once
// Private to the Vulkan backend: the Device and CommandList implementations.
#include <deque>
#include <memory>
#include <set>
#include <vector>

#include "meganeura/runtime/device.hpp"
#include "meganeura/runtime/vk_instance.hpp"
#include "meganeura/runtime/vk_memory.hpp"

namespace meganeura::runtime::vk {

struct Kernel {
  std::string label;
  VkShaderModule module = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  uint32_t num_buffers = 0;
  uint32_t push_bytes = 0;
  PipelineCapture capture = PipelineCapture::None;
};

class VulkanCommandList;

class VulkanDevice final : public Device {
 public:
  VulkanDevice(std::shared_ptr<Instance> inst, PhysicalInfo info, const DeviceOptions& options);
  ~VulkanDevice() override;

  const DeviceCaps& caps() const override { return info_.caps; }
  Buffer alloc(uint64_t bytes) override;
  Buffer alloc_host(uint64_t bytes) override;
  std::byte* host_pointer(const Buffer& b) override;
  void free(const Buffer& b) override;
  void upload(const Buffer& dst, const void* data, uint64_t bytes, uint64_t offset) override;
  void download(const Buffer& src, void* data, uint64_t bytes, uint64_t offset) override;
  void fill_zero(const Buffer& b) override;
  uint64_t allocated_bytes() const override { return memory_->allocated_bytes(); }
  KernelId create_kernel(const KernelDesc& desc) override;
  std::vector<PipelineExecutable> pipeline_executables(KernelId id) override;  // vk_pipeline_info.cpp
  std::vector<std::byte> pipeline_cache_data() override;                       // vk_pipeline_info.cpp
  std::unique_ptr<CommandList> record(uint32_t timestamp_capacity) override;
  uint64_t submit(CommandList& list) override;
  void wait() override;
  void wait(uint64_t id) override;
  bool finished(uint64_t id) override;
  std::vector<double> timestamps(CommandList& list) override;
  std::vector<std::string> validation_messages() const override;
  size_t validation_known_limits() const override;
  std::vector<MemoryHeap> memory_heaps() const override { return query_heaps(*inst_, info_); }

  // for VulkanCommandList
  const Fns& fns() const { return f_; }
  VkDevice handle() const { return device_; }
  const PhysicalInfo& info() const { return info_; }
  const Kernel& kernel(KernelId id, const char* where) const;
  BlockAllocator& memory() { return *memory_; }
  VkCommandPool pool() const { return pool_; }
  bool debug_utils() const { return inst_->debug_utils; }
  void forget(VulkanCommandList* list) { lists_.erase(list); }
  void wait_fences(const std::vector<VkFence>& fences, const char* where);
  void wait_until(uint64_t id, const char* where);

 private:
  VulkanCommandList& as_vulkan(CommandList& list, const char* where);
  void name_object(VkObjectType type, uint64_t handle, const std::string& name);
  // Runs `record` into a one-off command buffer, submits it and waits: the path for transfers.
  template <typename F>
  void one_shot(F&& record, const char* where);
  void ensure_staging(uint64_t bytes);

  std::shared_ptr<Instance> inst_;
  PhysicalInfo info_;
  Fns f_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkPipelineCache cache_ = VK_NULL_HANDLE;  // every pipeline goes through it (pipeline_cache_data)
  VkCommandBuffer transfer_cb_ = VK_NULL_HANDLE;
  VkFence transfer_fence_ = VK_NULL_HANDLE;
  std::unique_ptr<BlockAllocator> memory_;
  // staging: one host-visible, coherent buffer reused for every transfer, in chunks
  VkBuffer staging_ = VK_NULL_HANDLE;
  VkDeviceMemory staging_memory_ = VK_NULL_HANDLE;
  void* staging_map_ = nullptr;
  uint64_t staging_bytes_ = 0;
  std::vector<Kernel> kernels_;
  // Submissions in flight, oldest first, each with the fence it signals; finished fences are reset and
  // reused.
  struct InFlight {
    uint64_t id;
    VkFence fence;
  };
  std::deque<InFlight> in_flight_;
  std::vector<VkFence> spare_fences_;
  uint64_t submitted_ = 0, completed_ = 0;
  std::set<VulkanCommandList*> lists_;
};

}  // namespace meganeura::runtime::vk
