// GGUF reader: a bounds-checked cursor over the mapped bytes; every count is checked against the bytes left
// before anything is reserved for it, and the tensor table is validated as a whole before it is published.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "meganeura/core/error.hpp"
#include "meganeura/formats/gguf.hpp"
#include "meganeura/formats/mmap.hpp"
#include "meganeura/quant/quant.hpp"

namespace meganeura::gguf {
namespace {

constexpr uint64_t kInt64Max = static_cast<uint64_t>(INT64_MAX);

class Cursor {
 public:
  Cursor(std::span<const uint8_t> b, const std::string& origin)
      : b_(b), prefix_("[read_gguf] " + origin + ": ") {}

  [[noreturn]] void fail(const std::string& what) const { throw FormatError(prefix_ + what); }
  size_t pos() const { return pos_; }
  uint64_t left() const { return b_.size() - pos_; }

  void need(uint64_t n, const std::string& ctx) const {
    if (n > left())
      fail(ctx + ": expected " + std::to_string(n) + " bytes at offset " + std::to_string(pos_) + ", got " +
           std::to_string(left()) + " (truncated)");
  }
  uint64_t read_le(size_t n, const std::string& ctx) {
    need(n, ctx);
    uint64_t v = 0;
    std::memcpy(&v, b_.data() + pos_, n);
    pos_ += n;
    return v;
  }
  uint32_t u32(const std::string& ctx) { return static_cast<uint32_t>(read_le(4, ctx)); }
  uint64_t u64(const std::string& ctx) { return read_le(8, ctx); }
  std::string string(const std::string& ctx) {
    const uint64_t n = u64(ctx + " (string length)");
    need(n, ctx + " (string of " + std::to_string(n) + " bytes)");
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  std::vector<uint8_t> bytes(uint64_t n, const std::string& ctx) {
    need(n, ctx);
    std::vector<uint8_t> v(b_.begin() + static_cast<std::ptrdiff_t>(pos_),
                           b_.begin() + static_cast<std::ptrdiff_t>(pos_ + n));
    pos_ += n;
    return v;
  }

 private:
  std::span<const uint8_t> b_;
  std::string prefix_;
  size_t pos_ = 0;
};

ValueType value_type(Cursor& c, const std::string& ctx) {
  const uint32_t t = c.u32(ctx + " (value type)");
  if (t > static_cast<uint32_t>(ValueType::F64))
    c.fail(ctx + ": expected a value type 0..12, got " + std::to_string(t));
  return static_cast<ValueType>(t);
}

// The fewest bytes one element of type t can take in the file: bounds an element count by the bytes left.
uint64_t min_encoded_size(ValueType t) {
  if (t == ValueType::String) return 8;  // its length
  if (t == ValueType::Array) return 12;  // element type and count
  return value_type_size(t);
}

Value read_value(Cursor& c, ValueType t, const std::string& ctx, uint32_t depth) {
  Value v;
  v.type = t;
  if (t == ValueType::String) {
    v.str = c.string(ctx);
    return v;
  }
  if (t != ValueType::Array) {
    v.bits = c.read_le(value_type_size(t), ctx);
    return v;
  }
  if (depth >= kMaxArrayDepth)
    c.fail(ctx + ": expected arrays nested at most " + std::to_string(kMaxArrayDepth) + " deep, got deeper");
  v.element = value_type(c, ctx + " (array element type)");
  v.count = c.u64(ctx + " (array length)");
  const uint64_t min = min_encoded_size(v.element);
  if (v.count > c.left() / min)
    c.fail(ctx + ": expected an array that fits in the " + std::to_string(c.left()) + " bytes left, got " +
           std::to_string(v.count) + " " + value_type_name(v.element) + " elements");
  if (v.element == ValueType::String) {
    v.strings.reserve(v.count);
    for (uint64_t i = 0; i < v.count; ++i) v.strings.push_back(c.string(ctx + "[" + std::to_string(i) + "]"));
  } else if (v.element == ValueType::Array) {
    v.arrays.reserve(v.count);
    for (uint64_t i = 0; i < v.count; ++i)
      v.arrays.push_back(read_value(c, ValueType::Array, ctx + "[" + std::to_string(i) + "]", depth + 1));
  } else {
    v.packed = c.bytes(v.count * min, ctx);
  }
  return v;
}

std::string dims_text(const std::vector<uint64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace

File File::open(const std::string& path) {
  auto map = std::make_shared<MappedFile>(path);
  File f;
  f.origin_ = path;
  f.bytes_ = {reinterpret_cast<const uint8_t*>(map->bytes().data()), map->size()};
  f.owner_ = std::move(map);
  f.parse_all();
  return f;
}

File File::parse(std::span<const uint8_t> bytes, std::string origin) {
  auto copy = std::make_shared<std::vector<uint8_t>>(bytes.begin(), bytes.end());
  File f;
  f.origin_ = std::move(origin);
  f.bytes_ = *copy;
  f.owner_ = std::move(copy);
  f.parse_all();
  return f;
}

void File::parse_all() {
  Cursor c(bytes_, origin_);
  c.need(24, "header");
  const auto magic = c.bytes(4, "magic");
  if (std::memcmp(magic.data(), "GGUF", 4) != 0) {
    std::string got;
    for (uint8_t m : magic) {
      static constexpr char kHex[] = "0123456789abcdef";
      if (m >= 32 && m < 127)
        got += static_cast<char>(m);
      else
        got += std::string("\\x") + kHex[m >> 4] + kHex[m & 15];
    }
    c.fail("expected magic 'GGUF', got '" + got + "'");
  }
  version_ = c.u32("version");
  if (version_ != 2 && version_ != 3) {
    const bool swapped = (version_ & 0xffffu) == 0 && version_ != 0;
    c.fail("expected GGUF version 2 or 3, got " + std::to_string(version_) +
           (swapped         ? " (a big-endian file?)"
            : version_ == 1 ? " (version 1 is obsolete)"
                            : ""));
  }
  const uint64_t n_tensors = c.u64("tensor count");
  const uint64_t n_kv = c.u64("metadata count");
  if (n_kv > c.left() / 13)  // key length, value type, one byte of value
    c.fail("expected a metadata count that fits in " + std::to_string(c.left()) + " bytes, got " +
           std::to_string(n_kv));

  metadata_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string at = "metadata entry " + std::to_string(i);
    std::string key = c.string(at + " (key)");
    const std::string ctx = "key '" + key + "'";
    if (key_index_.count(key)) c.fail(ctx + ": expected unique keys, got a duplicate");
    const ValueType t = value_type(c, ctx);
    Value v = read_value(c, t, ctx, 0);
    key_index_.emplace(key, metadata_.size());
    metadata_.emplace_back(std::move(key), std::move(v));
  }

  if (const Value* a = find("general.alignment")) {
    if (a->type != ValueType::U32)
      c.fail(std::string("key 'general.alignment': expected a u32, got ") + value_type_name(a->type));
    if (a->bits == 0 || (a->bits & (a->bits - 1)) != 0)
      c.fail("key 'general.alignment': expected a power of two, got " + std::to_string(a->bits));
    alignment_ = a->bits;
  }

  if (n_tensors > c.left() / 24)  // name length, dimension count, type, offset
    c.fail("expected a tensor count that fits in " + std::to_string(c.left()) + " bytes, got " +
           std::to_string(n_tensors));
  std::vector<TensorInfo> tensors;
  tensors.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    t.name = c.string("tensor info " + std::to_string(i) + " (name)");
    const std::string ctx = "tensor '" + t.name + "'";
    if (tensor_index_.count(t.name)) c.fail(ctx + ": expected unique tensor names, got a duplicate");
    const uint32_t n_dims = c.u32(ctx + " (dimension count)");
    if (n_dims > kMaxDims)
      c.fail(ctx + ": expected at most " + std::to_string(kMaxDims) + " dimensions, got " +
             std::to_string(n_dims));
    uint64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t n = c.u64(ctx + " (dimension " + std::to_string(d) + ")");
      t.dims.push_back(n);
      if (n > kInt64Max || __builtin_mul_overflow(elements, n, &elements) || elements > kInt64Max)
        c.fail(ctx + ": expected an element count below 2^63, got dimensions " + dims_text(t.dims) + "...");
    }
    t.elements = elements;
    const uint32_t type_id = c.u32(ctx + " (type)");
    const quant::TypeInfo* ti = quant::find_type(type_id);
    if (!ti)
      c.fail(ctx + ": expected a supported tensor type (" + quant::supported_type_names() + "), got " +
             quant::any_type_name(type_id) + " (id " + std::to_string(type_id) + ")");
    t.type = ti->type;
    const uint64_t inner = n_dims ? t.dims[0] : 1;
    if (inner % ti->block_elems != 0)
      c.fail(ctx + ": expected dimension 0 to be a multiple of the " + ti->name + " block (" +
             std::to_string(ti->block_elems) + " elements), got dimensions " + dims_text(t.dims));
    if (__builtin_mul_overflow(elements / ti->block_elems, static_cast<uint64_t>(ti->block_bytes), &t.bytes))
      c.fail(ctx + ": expected a byte size below 2^64, got dimensions " + dims_text(t.dims));
    t.offset = c.u64(ctx + " (offset)");
    tensor_index_.emplace(t.name, tensors.size());
    tensors.push_back(std::move(t));
  }

  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  // Only tensor bytes need the data section: a file whose tensors are all empty may end at its header.
  if (data_offset_ > bytes_.size() &&
      std::any_of(tensors.begin(), tensors.end(), [](const TensorInfo& t) { return t.bytes > 0; }))
    c.fail("expected the data section (at offset " + std::to_string(data_offset_) +
           ") inside the file, got " + std::to_string(bytes_.size()) + " bytes (truncated)");
  const uint64_t data_size = bytes_.size() > data_offset_ ? bytes_.size() - data_offset_ : 0;
  for (const TensorInfo& t : tensors) {
    const std::string ctx = "tensor '" + t.name + "'";
    if (t.offset % alignment_ != 0)
      c.fail(ctx + ": expected an offset aligned to " + std::to_string(alignment_) + " bytes, got " +
             std::to_string(t.offset));
    if (t.offset > data_size || t.bytes > data_size - t.offset)
      c.fail(ctx + ": expected its " + std::to_string(t.bytes) + " bytes at offset " +
             std::to_string(t.offset) + " inside the data section of " + std::to_string(data_size) +
             " bytes, got past the end");
  }
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return tensors[a].offset != tensors[b].offset ? tensors[a].offset < tensors[b].offset : a < b;
  });
  const TensorInfo* prev = nullptr;
  for (size_t i : order) {
    const TensorInfo& t = tensors[i];
    if (t.bytes == 0) continue;
    if (prev && prev->offset + prev->bytes > t.offset)
      c.fail("tensor '" + t.name + "': expected no overlap, got bytes [" + std::to_string(t.offset) + ", " +
             std::to_string(t.offset + t.bytes) + ") overlapping tensor '" + prev->name + "' at [" +
             std::to_string(prev->offset) + ", " + std::to_string(prev->offset + prev->bytes) + ")");
    prev = &t;
  }
  tensors_ = std::move(tensors);
}

const Value* File::find(std::string_view key) const {
  const auto it = key_index_.find(std::string(key));
  return it == key_index_.end() ? nullptr : &metadata_[it->second].second;
}

const Value& File::at(std::string_view key) const {
  if (const Value* v = find(key)) return *v;
  throw FormatError("[gguf::File::at] " + origin_ + ": expected key '" + std::string(key) +
                    "', got no such key");
}

namespace {
[[noreturn]] void wrong_type(const std::string& origin, std::string_view key, const char* want,
                             const Value& v) {
  std::string got = value_type_name(v.type);
  if (v.type == ValueType::Array) got += std::string(" of ") + value_type_name(v.element);
  throw FormatError("[gguf::File] " + origin + ": key '" + std::string(key) + "': expected " + want +
                    ", got " + got);
}
}  // namespace

uint64_t File::get_uint(std::string_view key) const {
  const Value& v = at(key);
  if (!v.is_integer() || (v.type != ValueType::U64 && v.as_int() < 0))
    wrong_type(origin_, key, "a non-negative integer", v);
  return v.as_uint();
}
int64_t File::get_int(std::string_view key) const {
  const Value& v = at(key);
  if (!v.is_integer() || (v.type == ValueType::U64 && v.bits > kInt64Max))
    wrong_type(origin_, key, "an integer that fits int64", v);
  return v.as_int();
}
double File::get_float(std::string_view key) const {
  const Value& v = at(key);
  if (!v.is_float()) wrong_type(origin_, key, "f32 or f64", v);
  return v.as_double();
}
bool File::get_bool(std::string_view key) const {
  const Value& v = at(key);
  if (v.type != ValueType::Bool) wrong_type(origin_, key, "bool", v);
  return v.bits != 0;
}
const std::string& File::get_string(std::string_view key) const {
  const Value& v = at(key);
  if (v.type != ValueType::String) wrong_type(origin_, key, "string", v);
  return v.str;
}
const std::vector<std::string>& File::get_strings(std::string_view key) const {
  const Value& v = at(key);
  if (v.type != ValueType::Array || v.element != ValueType::String)
    wrong_type(origin_, key, "an array of string", v);
  return v.strings;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& File::tensor(std::string_view name) const {
  if (const TensorInfo* t = find_tensor(name)) return *t;
  throw FormatError("[gguf::File::tensor] " + origin_ + ": expected tensor '" + std::string(name) +
                    "', got no such tensor");
}

std::span<const uint8_t> File::tensor_data(const TensorInfo& t) const {
  if (data_offset_ > bytes_.size() || t.offset > bytes_.size() - data_offset_ ||
      t.bytes > bytes_.size() - data_offset_ - t.offset)
    throw FormatError("[gguf::File::tensor_data] " + origin_ + ": expected a tensor of this file, got '" +
                      t.name + "' reaching past its end");
  return bytes_.subspan(data_offset_ + t.offset, t.bytes);
}

std::vector<float> File::dequantize(const TensorInfo& t) const {
  std::vector<float> out(t.elements);
  quant::dequantize(t.type, tensor_data(t), out);
  return out;
}

}  // namespace meganeura::gguf
