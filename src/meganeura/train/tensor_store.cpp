#include "meganeura/train/tensor_store.hpp"

#include <bit>
#include <cstring>

#include "meganeura/core/error.hpp"

namespace meganeura {

// Checkpoints store little-endian bytes; a big-endian host would need swaps here.
static_assert(std::endian::native == std::endian::little, "checkpoint bytes assume a little-endian host");

const char* role_name(TensorRole r) { return r == TensorRole::Parameter ? "parameter" : "optimizer state"; }

uint64_t TensorInfo::byte_size() const {
  // Block-quantized: whole blocks of the last dimension; any other shape has no size (UINT64_MAX: never
  // matches).
  const uint64_t be = dtype_block_elems(dtype);
  if (be > 1 && (shape.empty() || shape.back() < 0 || uint64_t(shape.back()) % be)) return UINT64_MAX;
  uint64_t n = dtype_block_bytes(dtype);
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t d = shape[i];
    n *= static_cast<uint64_t>(d < 0 ? 0 : i + 1 == shape.size() ? d / int64_t(be) : d);
  }
  return n;
}

std::string describe(const TensorInfo& t) {
  std::string s = std::string(role_name(t.role)) + " '" + t.name + "' " + dtype_name(t.dtype) + "[";
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(t.shape[i]);
  }
  return s + "]";
}

std::vector<std::byte> to_bytes(std::span<const float> values) {
  std::vector<std::byte> out(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::vector<float> to_floats(std::span<const std::byte> bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

void MemoryStore::add(TensorInfo info, std::vector<std::byte> bytes) {
  if (bytes.size() != info.byte_size())
    throw CheckpointError("[MemoryStore::add] " + describe(info) + ": expected " +
                          std::to_string(info.byte_size()) + " bytes, got " + std::to_string(bytes.size()));
  for (const Entry& e : entries_)
    if (e.info.name == info.name)
      throw CheckpointError("[MemoryStore::add] expected a new name, got '" + info.name + "' twice");
  entries_.push_back({std::move(info), std::move(bytes)});
}

void MemoryStore::add_f32(const std::string& name, Shape shape, const std::vector<float>& values,
                          TensorRole role) {
  add(TensorInfo{name, role, DType::F32, std::move(shape)}, to_bytes(values));
}

std::vector<float> MemoryStore::f32(const std::string& name) const {
  for (const Entry& e : entries_)
    if (e.info.name == name) return to_floats(e.bytes);
  throw CheckpointError("[MemoryStore::f32] expected a tensor named '" + name + "', got none");
}

std::vector<TensorInfo> MemoryStore::tensors() const {
  std::vector<TensorInfo> out;
  for (const Entry& e : entries_) out.push_back(e.info);
  return out;
}

std::vector<std::byte> MemoryStore::read(const TensorInfo& t) {
  for (const Entry& e : entries_)
    if (e.info.name == t.name) return e.bytes;
  throw CheckpointError("[MemoryStore::read] expected a tensor named '" + t.name + "', got none");
}

void MemoryStore::write(const TensorInfo& t, std::span<const std::byte> bytes) {
  for (Entry& e : entries_) {
    if (e.info.name != t.name) continue;
    if (bytes.size() != e.bytes.size())
      throw CheckpointError("[MemoryStore::write] " + describe(t) + ": expected " +
                            std::to_string(e.bytes.size()) + " bytes, got " + std::to_string(bytes.size()));
    e.bytes.assign(bytes.begin(), bytes.end());
    ++writes_;
    return;
  }
  throw CheckpointError("[MemoryStore::write] expected a tensor named '" + t.name + "', got none");
}

}  // namespace meganeura
