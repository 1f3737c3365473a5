#include "meganeura/runtime/vk_memory.hpp"

#include <algorithm>

namespace meganeura::runtime::vk {
namespace {

constexpr uint64_t kDefaultBlock = 256ull << 20;
constexpr uint64_t kHostBlock = 4ull << 20;  // staging areas are small

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

std::string bytes_text(uint64_t b) {
  return std::to_string(b) + " bytes (" + std::to_string(b >> 20) + " MiB)";
}

}  // namespace

BlockAllocator::BlockAllocator(Instance& inst, const Fns& fns, VkDevice device, const PhysicalInfo& info,
                               bool host_visible, uint64_t block_bytes)
    : inst_(inst), f_(fns), device_(device), info_(info), host_visible_(host_visible) {
  alignment_ = buffer_alignment(info.caps);
  const uint64_t range = bindable_bytes(info.caps);
  block_bytes_ = block_bytes ? round_up(block_bytes, alignment_) : kDefaultBlock;
  block_bytes_ = std::min(block_bytes_, range);

  VkPhysicalDeviceMemoryProperties mem;
  inst.fns.vkGetPhysicalDeviceMemoryProperties(info.handle, &mem);
  const VkMemoryPropertyFlags host_flags =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  for (int host = 0; host < 2; ++host) {
    const bool mapped = host || host_visible;
    const VkMemoryPropertyFlags required =
        mapped ? host_flags : VkMemoryPropertyFlags(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    // Host-visible device buffers (debug mode) prefer memory that is also device-local (ReBAR, integrated,
    // lavapipe); host buffers prefer cached memory, which the host reads back fast.
    int best_score = -1;
    for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
      const VkMemoryPropertyFlags flags = mem.memoryTypes[i].propertyFlags;
      if ((flags & required) != required) continue;
      int score = 0;
      if (mapped && !host && (flags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) score += 2;
      if (mapped && (flags & VK_MEMORY_PROPERTY_HOST_CACHED_BIT)) score += host ? 4 : 1;
      if (score > best_score) {
        best_score = score;
        memory_type_[host] = i;
        heap_[host] = mem.memoryTypes[i].heapIndex;
      }
    }
    if (memory_type_[host] == UINT32_MAX) {
      throw DeviceError(std::string("[open_device] expected a ") +
                        (mapped ? "host-visible coherent" : "device-local") + " memory type on " +
                        info.caps.name + ", got none");
    }
  }
}

BlockAllocator::~BlockAllocator() {
  for (Block& b : blocks_) {
    if (b.buffer != VK_NULL_HANDLE) f_.vkDestroyBuffer(device_, b.buffer, nullptr);
    if (b.memory != VK_NULL_HANDLE) f_.vkFreeMemory(device_, b.memory, nullptr);
  }
}

DeviceError BlockAllocator::out_of_memory(const MemoryHeap& heap, uint32_t heap_index, uint64_t request,
                                          const std::string& got) const {
  return DeviceError("[Device::alloc] expected " + bytes_text(request) + " to fit memory heap " +
                     std::to_string(heap_index) + " (size " + bytes_text(heap.size) + ", budget " +
                     bytes_text(heap.budget) + ", in use " + bytes_text(heap.usage) + "), got " + got);
}

uint32_t BlockAllocator::new_block(uint64_t bytes, uint64_t request, bool host) {
  const uint32_t type = memory_type_[host];
  const MemoryHeap heap = query_heaps(inst_, info_)[heap_[host]];
  const uint64_t available = heap.budget > heap.usage ? heap.budget - heap.usage : 0;
  auto oom = [&](const std::string& got) { return out_of_memory(heap, heap_[host], request, got); };
  // A full-size block that would overrun the budget shrinks to what this request needs.
  if (bytes > available && bytes > request) bytes = round_up(request, alignment_);
  if (bytes > available) throw oom("only " + bytes_text(available) + " left in the budget");

  Block b;
  b.size = bytes;
  b.host = host;
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = bytes;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
             VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(f_.vkCreateBuffer(device_, &bi, nullptr, &b.buffer), "Device::alloc", "vkCreateBuffer");
  VkMemoryRequirements req;
  f_.vkGetBufferMemoryRequirements(device_, b.buffer, &req);
  if (!(req.memoryTypeBits & (1u << type))) {
    f_.vkDestroyBuffer(device_, b.buffer, nullptr);
    throw DeviceError("[Device::alloc] expected storage buffers to accept memory type " +
                      std::to_string(type) + ", got type bits " + std::to_string(req.memoryTypeBits));
  }
  VkMemoryAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type;
  VkResult r = f_.vkAllocateMemory(device_, &ai, nullptr, &b.memory);
  if (r != VK_SUCCESS) {
    f_.vkDestroyBuffer(device_, b.buffer, nullptr);
    throw oom(result_name(r) + " allocating a block of " + bytes_text(req.size));
  }
  r = f_.vkBindBufferMemory(device_, b.buffer, b.memory, 0);
  if (r == VK_SUCCESS && (host || host_visible_))
    r = f_.vkMapMemory(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped);
  if (r != VK_SUCCESS) {
    f_.vkDestroyBuffer(device_, b.buffer, nullptr);
    f_.vkFreeMemory(device_, b.memory, nullptr);
    check(r, "Device::alloc", "vkBindBufferMemory/vkMapMemory");
  }
  b.free[0] = bytes;
  allocated_ += req.size;
  blocks_.push_back(std::move(b));
  return static_cast<uint32_t>(blocks_.size() - 1);
}

bool BlockAllocator::take(Block& block, uint64_t bytes, uint64_t& offset) {
  for (auto it = block.free.begin(); it != block.free.end(); ++it) {
    if (it->second < bytes) continue;
    offset = it->first;
    const uint64_t rest = it->second - bytes;
    block.free.erase(it);
    if (rest > 0) block.free[offset + bytes] = rest;
    block.used[offset] = bytes;
    return true;
  }
  return false;
}

Buffer BlockAllocator::alloc(uint64_t bytes, bool host) {
  // Zero-byte buffers still get a distinct, bindable range.
  const uint64_t reserved = round_up(std::max<uint64_t>(bytes, 1), alignment_);
  const uint64_t range = info_.caps.max_storage_buffer_range;
  if (reserved > range) {
    // A request beyond the whole heap is out of memory first: say so with the budget.
    const MemoryHeap heap = query_heaps(inst_, info_)[heap_[host]];
    if (reserved > heap.budget)
      throw out_of_memory(heap, heap_[host], bytes, "a request larger than the whole budget");
    throw DeviceError("[Device::alloc] expected at most maxStorageBufferRange = " + bytes_text(range) +
                      " per buffer on " + info_.caps.name + ", got a request for " + bytes_text(bytes));
  }
  uint64_t offset = 0;
  for (uint32_t i = 0; i < blocks_.size(); ++i) {
    if (blocks_[i].host == host && take(blocks_[i], reserved, offset)) return Buffer{i, offset, bytes};
  }
  const uint32_t idx =
      new_block(std::max(host ? std::min(kHostBlock, block_bytes_) : block_bytes_, reserved), bytes, host);
  if (!take(blocks_[idx], reserved, offset)) {
    throw DeviceError("[Device::alloc] expected a fresh block to hold " + bytes_text(bytes) +
                      ", got one of " + bytes_text(blocks_[idx].size));
  }
  return Buffer{idx, offset, bytes};
}

void BlockAllocator::free(const Buffer& b) {
  if (!b.valid() || b.block >= blocks_.size()) {
    throw DeviceError("[Device::free] expected a buffer from Device::alloc, got block " +
                      std::to_string(b.block));
  }
  Block& block = blocks_[b.block];
  auto it = block.used.find(b.offset);
  if (it == block.used.end()) {
    throw DeviceError("[Device::free] expected a live buffer, got block " + std::to_string(b.block) +
                      " offset " + std::to_string(b.offset) + " which is not allocated (freed twice?)");
  }
  uint64_t offset = it->first, size = it->second;
  block.used.erase(it);
  auto next = block.free.lower_bound(offset);
  if (next != block.free.end() && next->first == offset + size) {
    size += next->second;
    next = block.free.erase(next);
  }
  if (next != block.free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      size += prev->second;
      block.free.erase(prev);
    }
  }
  block.free[offset] = size;
}

void BlockAllocator::check_range(const Buffer& b, uint64_t offset, uint64_t bytes, const char* where) const {
  // The buffer (or a slice of one) must lie inside one live allocation.
  bool live = b.valid() && b.block < blocks_.size();
  if (live) {
    const auto& used = blocks_[b.block].used;
    auto it = used.upper_bound(b.offset);
    live = it != used.begin();
    if (live) {
      --it;
      live = b.offset - it->first <= it->second && b.size <= it->second - (b.offset - it->first);
    }
  }
  if (!live) {
    throw DeviceError(std::string("[") + where +
                      "] expected a live buffer from Device::alloc (or a slice of one), "
                      "got block " +
                      std::to_string(b.block) + " offset " + std::to_string(b.offset) + " size " +
                      std::to_string(b.size));
  }
  if (offset > b.size || bytes > b.size - offset) {
    throw DeviceError(std::string("[") + where + "] expected a range inside the buffer's " +
                      std::to_string(b.size) + " bytes, got offset " + std::to_string(offset) + " + " +
                      std::to_string(bytes) + " bytes");
  }
}

}  // namespace meganeura::runtime::vk
