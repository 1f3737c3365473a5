#pragma once
// A read-only memory map of a whole file, unmapped when the object goes away. Tensor files are read
// through it so that a multi-gigabyte checkpoint costs page-cache pages, not a heap copy.
#include <cstddef>
#include <span>
#include <string>

namespace meganeura {

class MappedFile {
 public:
  MappedFile() = default;
  // FormatError naming the file when it is missing, not a regular file, or cannot be mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(data_), size_}; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release();
  void* data_ = nullptr;  // nullptr for an empty file (mmap refuses length 0)
  size_t size_ = 0;
  std::string path_;
};

}  // namespace meganeura
