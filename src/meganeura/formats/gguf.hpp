#pragma once
// GGUF (versions 2 and 3): the single-file model format of ggml / llama.cpp. A header, typed metadata
// key-value pairs, tensor infos, then the tensor data section (each tensor at an aligned offset).
//
// The reader maps the file and checks everything before it allocates for tensors: every length against the
// bytes left, every metadata type, the alignment, each tensor's type, dimensions (divisible by the block,
// product without overflow), size (= elements / block elements × block bytes), offset (aligned, inside the
// data section) and that no two tensors overlap. Any violation is a FormatError naming the file and the key
// or tensor. Tensor bytes stay in the mapping until asked for.
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "meganeura/quant/blocks.hpp"

namespace meganeura::gguf {

enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
const char* value_type_name(ValueType t);  // "u32", "string", ...

inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr uint32_t kMaxDims = 4;         // ggml's GGML_MAX_DIMS
inline constexpr uint32_t kMaxArrayDepth = 16;  // arrays of arrays nested deeper are refused

// One metadata value. Scalars keep their bits; arrays keep scalar elements packed as in the file (so a
// 49152-entry score table is one allocation), strings as strings and nested arrays as Values.
struct Value {
  ValueType type = ValueType::U8;
  uint64_t bits = 0;                  // a scalar's little-endian bits, zero-extended
  std::string str;                    // type String
  ValueType element = ValueType::U8;  // type Array: the element type
  uint64_t count = 0;                 // type Array: the number of elements
  std::vector<uint8_t> packed;        // an array of a scalar type
  std::vector<std::string> strings;   // an array of strings
  std::vector<Value> arrays;          // an array of arrays

  bool is_integer() const;  // u8 .. i64 (not bool)
  bool is_float() const;    // f32, f64
  // The scalar as a number: any integer type, bool as 0/1, f32/f64 widened. Only for scalar types.
  int64_t as_int() const;  // u64 above INT64_MAX wraps: use as_uint for those
  uint64_t as_uint() const;
  double as_double() const;
  // Element i of an array of scalars, as a number (same conversions).
  int64_t int_at(uint64_t i) const;
  double double_at(uint64_t i) const;
  // A scalar of an array element type.
  Value element_value(uint64_t i) const;

  // Builders for the writer.
  static Value scalar(ValueType t, uint64_t bits);
  static Value of_u8(uint8_t v) { return scalar(ValueType::U8, v); }
  static Value of_i8(int8_t v) { return scalar(ValueType::I8, static_cast<uint8_t>(v)); }
  static Value of_u16(uint16_t v) { return scalar(ValueType::U16, v); }
  static Value of_i16(int16_t v) { return scalar(ValueType::I16, static_cast<uint16_t>(v)); }
  static Value of_u32(uint32_t v) { return scalar(ValueType::U32, v); }
  static Value of_i32(int32_t v) { return scalar(ValueType::I32, static_cast<uint32_t>(v)); }
  static Value of_u64(uint64_t v) { return scalar(ValueType::U64, v); }
  static Value of_i64(int64_t v) { return scalar(ValueType::I64, static_cast<uint64_t>(v)); }
  static Value of_f32(float v);
  static Value of_f64(double v);
  static Value of_bool(bool v) { return scalar(ValueType::Bool, v ? 1 : 0); }
  static Value of_string(std::string s);
  // An array of a scalar type from its packed little-endian bytes (count = bytes / element size).
  static Value packed_array(ValueType element, std::vector<uint8_t> bytes);
  template <class T>
  static Value array_of(ValueType element, const std::vector<T>& v) {
    std::vector<uint8_t> b(v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
    return packed_array(element, std::move(b));
  }
  static Value string_array(std::vector<std::string> v);
  static Value array_array(std::vector<Value> v);

  bool operator==(const Value&) const = default;
};

size_t value_type_size(ValueType t);  // bytes of a scalar type; 0 for String and Array

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // as stored: dims[0] is the contiguous (innermost) dimension
  quant::Type type = quant::Type::F32;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t elements = 0;
  uint64_t bytes = 0;
  // Row-major shape, outermost first (meganeura's convention: the reverse of dims).
  std::vector<int64_t> shape() const;
};

class File {
 public:
  // Maps `path` and validates it. Throws FormatError when the file cannot be opened or breaks the format.
  static File open(const std::string& path);
  // Validates an in-memory image (copied); `origin` names it in errors.
  static File parse(std::span<const uint8_t> bytes, std::string origin);

  const std::string& origin() const { return origin_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // absolute start of the data section
  uint64_t file_size() const { return bytes_.size(); }

  // Metadata in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;  // nullptr if absent
  // Typed getters: a FormatError names the key when it is missing or of an incompatible type.
  const Value& at(std::string_view key) const;
  uint64_t get_uint(std::string_view key) const;  // any integer type with a non-negative value
  int64_t get_int(std::string_view key) const;    // any integer type that fits int64
  double get_float(std::string_view key) const;   // f32 or f64
  bool get_bool(std::string_view key) const;
  const std::string& get_string(std::string_view key) const;
  const std::vector<std::string>& get_strings(std::string_view key) const;  // an array of strings
  std::string architecture() const { return get_string("general.architecture"); }

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  const TensorInfo& tensor(std::string_view name) const;  // FormatError naming the tensor when absent
  // The tensor's bytes inside the mapping (valid while this File or a copy of it lives).
  std::span<const uint8_t> tensor_data(const TensorInfo& t) const;
  std::vector<float> dequantize(const TensorInfo& t) const;

  // A human-readable summary: version, architecture, every key with its type and (abbreviated) value, every
  // tensor with its type, shape and size. For `meganeura inspect`.
  std::string describe() const;

 private:
  File() = default;
  void parse_all();

  std::string origin_;
  std::shared_ptr<const void> owner_;  // the mapping or the copied bytes
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::unordered_map<std::string, size_t> key_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

// What the writer puts in a file. The alignment is `general.alignment` (a u32 power of two) when the
// metadata has it, else 32. Tensor data is written in order, each at the next aligned offset.
struct Contents {
  uint32_t version = 3;
  std::vector<std::pair<std::string, Value>> metadata;
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;  // innermost first, as in the file
    quant::Type type = quant::Type::F32;
    std::vector<uint8_t> data;  // exactly the type's bytes for these dims
  };
  std::vector<Tensor> tensors;
};

// The file image; throws FormatError (naming the key or tensor) for contents no reader would accept.
std::vector<uint8_t> serialize(const Contents& c);
void write_gguf(const std::string& path, const Contents& c);

// `f`'s contents with every matrix (two or more dimensions, rows a whole number of `to`'s blocks) converted
// to `to` through f32: dequantized exactly, then quantized with quant::quantize. Vectors (norms, biases) and
// matrices whose rows are not whole blocks keep their type. general.file_type, which would name the old
// type, is dropped (llama.cpp infers it from the tensors). For benchmarks and oracles: a Q4_1 file made Q8_0
// this way has Q4_1's accuracy in Q8_0's layout.
Contents requantize(const File& f, quant::Type to);

}  // namespace meganeura::gguf
