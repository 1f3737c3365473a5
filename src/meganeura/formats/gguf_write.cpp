// GGUF writer: the inverse of the reader, refusing what the reader would refuse (so a file it writes always
// reads back), with tensors laid out in order at aligned offsets and zero padding between them.
#include <cstring>
#include <fstream>
#include <set>

#include "meganeura/core/error.hpp"
#include "meganeura/formats/gguf.hpp"
#include "meganeura/quant/quant.hpp"

namespace meganeura::gguf {
namespace {

[[noreturn]] void fail(const std::string& what) { throw FormatError("[write_gguf] " + what); }

class Out {
 public:
  std::vector<uint8_t> b;
  void le(uint64_t v, size_t n) {
    const size_t at = b.size();
    b.resize(at + n);
    std::memcpy(b.data() + at, &v, n);
  }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void str(const std::string& s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
  void pad(uint64_t alignment) { b.resize((b.size() + alignment - 1) / alignment * alignment, 0); }
};

// Writes v's payload (not its type), checking that its fields agree.
void put_value(Out& o, const Value& v, const std::string& ctx, uint32_t depth) {
  if (static_cast<uint32_t>(v.type) > static_cast<uint32_t>(ValueType::F64))
    fail(ctx + ": expected a value type 0..12, got " + std::to_string(static_cast<uint32_t>(v.type)));
  if (v.type == ValueType::String) return o.str(v.str);
  if (v.type != ValueType::Array) return o.le(v.bits, value_type_size(v.type));
  if (depth >= kMaxArrayDepth)
    fail(ctx + ": expected arrays nested at most " + std::to_string(kMaxArrayDepth) + " deep");
  if (static_cast<uint32_t>(v.element) > static_cast<uint32_t>(ValueType::F64))
    fail(ctx + ": expected an array element type 0..12, got " +
         std::to_string(static_cast<uint32_t>(v.element)));
  o.u32(static_cast<uint32_t>(v.element));
  o.u64(v.count);
  if (v.element == ValueType::String) {
    if (v.strings.size() != v.count)
      fail(ctx + ": expected " + std::to_string(v.count) + " strings, got " +
           std::to_string(v.strings.size()));
    for (const std::string& s : v.strings) o.str(s);
  } else if (v.element == ValueType::Array) {
    if (v.arrays.size() != v.count)
      fail(ctx + ": expected " + std::to_string(v.count) + " arrays, got " + std::to_string(v.arrays.size()));
    for (size_t i = 0; i < v.arrays.size(); ++i) {
      if (v.arrays[i].type != ValueType::Array)
        fail(ctx + "[" + std::to_string(i) + "]: expected an array, got " +
             value_type_name(v.arrays[i].type));
      put_value(o, v.arrays[i], ctx + "[" + std::to_string(i) + "]", depth + 1);
    }
  } else {
    if (v.packed.size() != v.count * value_type_size(v.element))
      fail(ctx + ": expected " + std::to_string(v.count * value_type_size(v.element)) +
           " packed bytes, got " + std::to_string(v.packed.size()));
    o.b.insert(o.b.end(), v.packed.begin(), v.packed.end());
  }
}

}  // namespace

std::vector<uint8_t> serialize(const Contents& c) {
  if (c.version != 2 && c.version != 3) fail("expected version 2 or 3, got " + std::to_string(c.version));
  uint64_t alignment = kDefaultAlignment;
  std::set<std::string> keys;
  for (const auto& [key, v] : c.metadata) {
    if (!keys.insert(key).second) fail("key '" + key + "': expected unique keys, got a duplicate");
    if (key == "general.alignment") {
      if (v.type != ValueType::U32 || v.bits == 0 || (v.bits & (v.bits - 1)) != 0)
        fail("key 'general.alignment': expected a u32 power of two");
      alignment = v.bits;
    }
  }
  Out o;
  o.u32(0x46554747u);  // "GGUF" in little-endian byte order
  o.u32(c.version);
  o.u64(c.tensors.size());
  o.u64(c.metadata.size());
  for (const auto& [key, v] : c.metadata) {
    o.str(key);
    o.u32(static_cast<uint32_t>(v.type));
    put_value(o, v, "key '" + key + "'", 0);
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const Contents::Tensor& t : c.tensors) {
    const std::string ctx = "tensor '" + t.name + "'";
    if (!names.insert(t.name).second) fail(ctx + ": expected unique tensor names, got a duplicate");
    if (t.dims.size() > kMaxDims)
      fail(ctx + ": expected at most 4 dimensions, got " + std::to_string(t.dims.size()));
    const quant::TypeInfo* ti = quant::find_type(static_cast<uint32_t>(t.type));
    if (!ti)
      fail(ctx + ": expected a supported type, got id " + std::to_string(static_cast<uint32_t>(t.type)));
    uint64_t elements = 1;
    for (uint64_t d : t.dims)
      if (d > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(elements, d, &elements))
        fail(ctx + ": expected an element count below 2^63");
    if ((t.dims.empty() ? 1 : t.dims[0]) % ti->block_elems != 0)
      fail(ctx + ": expected dimension 0 to be a multiple of " + std::to_string(ti->block_elems) + " for " +
           ti->name);
    const uint64_t bytes = elements / ti->block_elems * ti->block_bytes;
    if (t.data.size() != bytes)
      fail(ctx + ": expected " + std::to_string(bytes) + " bytes of " + ti->name + " data, got " +
           std::to_string(t.data.size()));
    o.str(t.name);
    o.u32(static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) o.u64(d);
    o.u32(static_cast<uint32_t>(t.type));
    o.u64(offset);
    offset += (bytes + alignment - 1) / alignment * alignment;
  }
  // No tensor bytes, no data section: padding to a large `general.alignment` (the reader accepts any power of
  // two) would turn a few hundred bytes of header into hundreds of MB (found by fuzz_gguf).
  if (offset == 0) return std::move(o.b);
  o.pad(alignment);
  for (const Contents::Tensor& t : c.tensors) {
    o.b.insert(o.b.end(), t.data.begin(), t.data.end());
    o.pad(alignment);
  }
  return std::move(o.b);
}

void write_gguf(const std::string& path, const Contents& c) {
  const std::vector<uint8_t> bytes = serialize(c);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f)
    throw DataError("[write_gguf] expected to write " + std::to_string(bytes.size()) + " bytes to '" + path +
                    "', got a write error");
}

}  // namespace meganeura::gguf
