#pragma once
// Private to the Vulkan backend: device memory in large blocks, each covered by one VkBuffer, with
// buffers handed out as aligned ranges of a block (never one VkDeviceMemory per tensor).
#include <map>
#include <vector>

#include "meganeura/runtime/device.hpp"
#include "meganeura/runtime/vk_instance.hpp"

namespace meganeura::runtime::vk {

class BlockAllocator {
 public:
  // host_visible: blocks are mapped (debug mode); otherwise device-local memory reached through staging.
  // Host buffers (alloc(bytes, true)) live in blocks of their own: host-visible, coherent, mapped.
  BlockAllocator(Instance& inst, const Fns& fns, VkDevice device, const PhysicalInfo& info, bool host_visible,
                 uint64_t block_bytes);
  ~BlockAllocator();
  BlockAllocator(const BlockAllocator&) = delete;
  BlockAllocator& operator=(const BlockAllocator&) = delete;

  Buffer alloc(uint64_t bytes, bool host);
  void free(const Buffer& b);
  uint64_t allocated_bytes() const { return allocated_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t block_bytes() const { return block_bytes_; }

  // Throws DeviceError "[where] ..." when b is not a live buffer or [offset, offset+bytes) leaves it.
  void check_range(const Buffer& b, uint64_t offset, uint64_t bytes, const char* where) const;
  VkBuffer vk_buffer(const Buffer& b) const { return blocks_[b.block].buffer; }
  uint64_t block_size(const Buffer& b) const { return blocks_[b.block].size; }
  char* mapped(const Buffer& b) const { return static_cast<char*>(blocks_[b.block].mapped) + b.offset; }
  bool host_visible() const { return host_visible_; }
  bool is_host(const Buffer& b) const { return blocks_[b.block].host; }

 private:
  struct Block {
    VkDeviceMemory memory = VK_NULL_HANDLE;
    VkBuffer buffer = VK_NULL_HANDLE;
    uint64_t size = 0;
    void* mapped = nullptr;
    bool host = false;                  // an alloc_host block
    std::map<uint64_t, uint64_t> free;  // offset -> size, coalesced
    std::map<uint64_t, uint64_t> used;  // offset -> reserved size
  };

  uint32_t new_block(uint64_t bytes, uint64_t request, bool host);
  DeviceError out_of_memory(const MemoryHeap& heap, uint32_t heap_index, uint64_t request,
                            const std::string& got) const;
  bool take(Block& block, uint64_t bytes, uint64_t& offset);

  Instance& inst_;
  const Fns& f_;
  VkDevice device_;
  const PhysicalInfo& info_;
  bool host_visible_;
  uint64_t block_bytes_;
  uint64_t alignment_;
  uint32_t memory_type_[2] = {UINT32_MAX, UINT32_MAX};  // device buffers, host buffers
  uint32_t heap_[2] = {0, 0};
  uint64_t allocated_ = 0;
  std::vector<Block> blocks_;
};

}  // namespace meganeura::runtime::vk
