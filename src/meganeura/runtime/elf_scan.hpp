#pragma once
// ELF images inside an opaque blob (a driver's pipeline cache, Device::pipeline_cache_data): where NVIDIA's
// driver keeps the compiled kernels as cubins, nvdisasm reads them (experiments/scripts/isa_mix.py). Only the
// 64-bit little-endian header is read; an image's extent is the furthest of its section and program header
// tables, clipped to the blob. Nothing here trusts the blob: a bad header is skipped, never read past the
// end.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace meganeura::runtime {

struct ElfImage {
  size_t offset = 0, size = 0;
};

inline std::vector<ElfImage> elf_images(std::span<const std::byte> blob) {
  auto u16 = [&](size_t at) {
    uint16_t v;
    std::memcpy(&v, blob.data() + at, 2);
    return uint64_t(v);
  };
  auto u32 = [&](size_t at) {
    uint32_t v;
    std::memcpy(&v, blob.data() + at, 4);
    return v;
  };
  auto u64 = [&](size_t at) {
    uint64_t v;
    std::memcpy(&v, blob.data() + at, 8);
    return v;
  };
  std::vector<ElfImage> out;
  constexpr size_t kHeader = 64;  // ELF64 header
  for (size_t at = 0; at + kHeader <= blob.size();) {
    const auto* p = reinterpret_cast<const unsigned char*>(blob.data() + at);
    // Magic, ELFCLASS64, ELFDATA2LSB, EV_CURRENT.
    if (!(p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F' && p[4] == 2 && p[5] == 1 && p[6] == 1)) {
      ++at;
      continue;
    }
    const uint64_t phoff = u64(at + 0x20), shoff = u64(at + 0x28);
    const uint64_t phentsize = u16(at + 0x36), phnum = u16(at + 0x38), shentsize = u16(at + 0x3a),
                   shnum = u16(at + 0x3c);
    const uint64_t room = blob.size() - at;
    uint64_t end = kHeader;
    bool ok = shnum == 0 || (shentsize == 64 && shoff <= room && shnum * 64 <= room - shoff);
    ok = ok && (phnum == 0 || (phentsize == 56 && phoff <= room && phnum * 56 <= room - phoff));
    if (!ok) {
      ++at;
      continue;
    }
    if (shnum) end = std::max(end, shoff + shnum * 64);
    if (phnum) end = std::max(end, phoff + phnum * 56);
    // Section contents: each section header's offset + size (type NOBITS, 8, occupies nothing).
    for (uint64_t i = 0; i < shnum; ++i) {
      const size_t h = at + size_t(shoff + i * 64);
      const uint32_t type = u32(h + 4);
      const uint64_t off = u64(h + 0x18), size = u64(h + 0x20);
      if (type != 8 && off <= room && size <= room - off) end = std::max(end, off + size);
    }
    out.push_back({at, size_t(end)});
    at += size_t(end);
  }
  return out;
}

}  // namespace meganeura::runtime
