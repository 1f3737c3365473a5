#pragma once
// SHA-256 (FIPS 180-4), incremental. The hub names a large (LFS) file's blob by the SHA-256 of its bytes,
// so a download is checked against it before the blob enters the cache.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace meganeura::hf {

class Sha256 {
 public:
  Sha256();
  void update(std::span<const std::byte> data);
  void update(const void* data, size_t n) { update({static_cast<const std::byte*>(data), n}); }
  std::array<uint8_t, 32> digest();  // finishes; the object must not be updated afterwards
  std::string hex_digest();          // lowercase, 64 characters

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t fill_ = 0;
  uint64_t length_ = 0;  // bytes so far
};

std::string sha256_hex(std::span<const std::byte> data);
// The digest of a whole file, read in pieces; FormatError naming the file when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace meganeura::hf
