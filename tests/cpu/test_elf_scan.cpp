// runtime::elf_images: ELF64 images found in an opaque blob (a driver's pipeline cache), with their extent,
// and headers that point outside the blob skipped without reading past its end.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "meganeura/runtime/elf_scan.hpp"

namespace {

using meganeura::runtime::elf_images;

void put16(std::vector<std::byte>& b, size_t at, uint16_t v) { std::memcpy(b.data() + at, &v, 2); }
void put32(std::vector<std::byte>& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
void put64(std::vector<std::byte>& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

// An ELF64 image of `total` bytes: header, one PROGBITS section at 64 of `payload` bytes, then the section
// table of two entries (null + that section) at 64 + payload.
std::vector<std::byte> elf(size_t payload) {
  std::vector<std::byte> b(64 + payload + 2 * 64, std::byte{0x5a});
  const unsigned char ident[8] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
  std::memcpy(b.data(), ident, 8);
  std::memset(b.data() + 8, 0, 56);
  put64(b, 0x28, 64 + payload);  // e_shoff
  put16(b, 0x3a, 64);            // e_shentsize
  put16(b, 0x3c, 2);             // e_shnum
  std::memset(b.data() + 64 + payload, 0, 128);
  const size_t sh = 64 + payload + 64;
  put32(b, sh + 4, 1);           // SHT_PROGBITS
  put64(b, sh + 0x18, 64);       // sh_offset
  put64(b, sh + 0x20, payload);  // sh_size
  return b;
}

TEST(ElfScan, FindsImagesWithTheirExtentAndSkipsBrokenHeaders) {
  std::vector<std::byte> blob(100, std::byte{0x11});
  const std::vector<std::byte> a = elf(40), c = elf(8);
  blob.insert(blob.end(), a.begin(), a.end());
  // A header whose section table lies past the blob's end: skipped.
  std::vector<std::byte> broken = elf(16);
  put64(broken, 0x28, 1u << 30);
  blob.insert(blob.end(), broken.begin(), broken.end());
  blob.insert(blob.end(), 7, std::byte{0x22});
  const size_t c_at = blob.size();
  blob.insert(blob.end(), c.begin(), c.end());
  const auto images = elf_images(blob);
  ASSERT_EQ(images.size(), 2u);
  EXPECT_EQ(images[0].offset, 100u);
  EXPECT_EQ(images[0].size, a.size());
  EXPECT_EQ(images[1].offset, c_at);
  EXPECT_EQ(images[1].size, c.size());
  // Truncated: the last image without its section table.
  blob.resize(c_at + 64 + 8);
  EXPECT_EQ(elf_images(blob).size(), 1u);
  EXPECT_TRUE(elf_images({}).empty());
}

}  // namespace
