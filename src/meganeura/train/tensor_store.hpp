#pragma once
// The seam between checkpoints and whatever holds tensors (a session, a trainer, a map in tests).
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "meganeura/ir/graph.hpp"

namespace meganeura {

enum class TensorRole : uint8_t { Parameter = 0, OptimizerState = 1 };
const char* role_name(TensorRole r);

struct TensorInfo {
  std::string name;
  TensorRole role = TensorRole::Parameter;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t byte_size() const;  // logical: element count * element size, no device padding
  friend bool operator==(const TensorInfo&, const TensorInfo&) = default;
};

std::string describe(const TensorInfo& t);  // "parameter 'w1' f32[784, 128]"

// A holder of named logical tensors. tensors() is both what a save writes and what a restore requires:
// a store that lists no optimizer state (an inference session) loads parameters only.
class TensorStore {
 public:
  virtual ~TensorStore() = default;
  virtual std::vector<TensorInfo> tensors() const = 0;
  virtual std::vector<std::byte> read(const TensorInfo& t) = 0;  // exactly t.byte_size() bytes
  virtual void write(const TensorInfo& t, std::span<const std::byte> bytes) = 0;
  // Small scalar state saved alongside (optimizer kind and step count); applied after the tensors.
  virtual std::map<std::string, std::string> metadata() const { return {}; }
  virtual void set_metadata(const std::map<std::string, std::string>&) {}
};

// A store in host memory.
class MemoryStore : public TensorStore {
 public:
  void add(TensorInfo info, std::vector<std::byte> bytes);  // CheckpointError on a size mismatch
  void add_f32(const std::string& name, Shape shape, const std::vector<float>& values,
               TensorRole role = TensorRole::Parameter);
  std::vector<float> f32(const std::string& name) const;

  std::vector<TensorInfo> tensors() const override;
  std::vector<std::byte> read(const TensorInfo& t) override;
  void write(const TensorInfo& t, std::span<const std::byte> bytes) override;
  std::map<std::string, std::string> metadata() const override { return meta_; }
  void set_metadata(const std::map<std::string, std::string>& m) override { meta_ = m; }

  size_t writes() const { return writes_; }  // lets tests prove that a failed restore changed nothing

 private:
  struct Entry {
    TensorInfo info;
    std::vector<std::byte> bytes;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> meta_;
  size_t writes_ = 0;
};

std::vector<std::byte> to_bytes(std::span<const float> values);
std::vector<float> to_floats(std::span<const std::byte> bytes);

}  // namespace meganeura
