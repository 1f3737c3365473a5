#pragma once
// safetensors files (Hugging Face's tensor container): an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets}, "__metadata__": {string: string}}, then the tensors' bytes, offsets
// counted from the end of the header. Read through a memory map; every header field is checked before any
// tensor byte is handed out. Sharded checkpoints list their tensors in model.safetensors.index.json.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "meganeura/formats/mmap.hpp"
#include "meganeura/ir/graph.hpp"

namespace meganeura {

// The reference implementation's limit: a larger header is refused before it is parsed.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// One tensor as its header lists it.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // as written: "F32", "BF16", "I64", ... (sizes are checked for every standard dtype)
  Shape shape;
  uint64_t begin = 0, end = 0;  // data_offsets, relative to the first byte after the header
};

struct SafetensorsHeader {
  uint64_t data_start = 0;  // 8 + the header length: the file offset data_offsets count from
  std::map<std::string, std::string> metadata;
  std::vector<SafetensorsEntry> tensors;  // in the order of their bytes
};

// Parses and checks a whole file image: header length and its limit, well-formed JSON without duplicate
// keys, metadata strings, known dtypes, shapes, offsets inside the data section, in order, without overlap
// or gap, and sizes equal to shape × dtype size. `origin` (a path) names the file in FormatErrors, together
// with the tensor and the field at fault.
SafetensorsHeader parse_safetensors(std::span<const std::byte> file, const std::string& origin);

// The IR dtype of a stored tensor: F32, F16, BF16, I32 and U32 map directly; any other stored dtype is a
// FormatError naming the file, the tensor and the dtype.
DType safetensors_dtype(const SafetensorsEntry& e, const std::string& origin);
// "F32", "F16", "BF16", "I32", "U32".
const char* safetensors_dtype_name(DType t);

// A tensor's stored form: its bytes point into the memory map of the file that holds them.
struct SafetensorsView {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  std::span<const std::byte> bytes;
};

// One memory-mapped safetensors file.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);  // FormatError when missing or malformed

  const std::string& path() const { return map_.path(); }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const std::vector<SafetensorsEntry>& entries() const { return header_.tensors; }
  const SafetensorsEntry* find(const std::string& name) const;
  // FormatError naming the file when the tensor is absent or its dtype has no IR equivalent.
  SafetensorsView tensor(const std::string& name) const;
  std::span<const std::byte> bytes(const SafetensorsEntry& e) const;

 private:
  MappedFile map_;
  SafetensorsHeader header_;
  std::map<std::string, size_t> index_;
};

// A model's weights: one file, or the shards that model.safetensors.index.json maps tensor names to.
class SafetensorsModel {
 public:
  // `path`: a .safetensors file, an index .json, or a folder holding model.safetensors or
  // model.safetensors.index.json. Every shard is opened and checked; the index must name each tensor's
  // shard exactly (a tensor missing from its shard, or a shard tensor the index does not list, is a
  // FormatError), and shard names must stay inside the index's folder.
  explicit SafetensorsModel(const std::string& path);

  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  SafetensorsView tensor(const std::string& name) const;  // FormatError naming the model when absent
  const SafetensorsEntry& entry(const std::string& name) const;
  const SafetensorsFile& file_of(const std::string& name) const;
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  const std::string& origin() const { return origin_; }  // the index or the single file

 private:
  std::string origin_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t> where_;  // tensor name -> index into files_
};

// A tensor to write; `bytes` must be exactly shape × dtype size.
struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  std::span<const std::byte> bytes;
};

// The file image: tensors laid out largest element size first, then by name (each one aligned to its
// element size), the header padded with spaces to a multiple of 8 bytes as the reference writer does.
// FormatError for a duplicate or reserved name, or bytes that do not match a shape.
std::vector<std::byte> serialize_safetensors(const std::vector<SafetensorsTensor>& tensors,
                                             const std::map<std::string, std::string>& metadata = {});
// Writes serialize_safetensors' image to a temporary file, syncs it and renames it over `path`.
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace meganeura
