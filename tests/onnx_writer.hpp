#pragma once
// A minimal protobuf writer for ONNX ModelProto bytes, so tests can build models without Python
// (tests/cpu/test_onnx.cpp, tests/gpu/test_onnx_gpu.cpp).
#include <cctype>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace meganeura::test::onnx_writer {

// protobuf wire format, enough for ModelProto
inline std::string varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) s += char((v & 0x7f) | 0x80), v >>= 7;
  return s + char(v);
}
inline std::string field_varint(int f, uint64_t v) { return varint(uint64_t(f) << 3) + varint(v); }
inline std::string field_bytes(int f, const std::string& b) {
  return varint(uint64_t(f) << 3 | 2) + varint(b.size()) + b;
}
inline std::string field_float(int f, float v) {
  std::string s = varint(uint64_t(f) << 3 | 5);
  char b[4];
  std::memcpy(b, &v, 4);
  return s + std::string(b, 4);
}

inline std::string tensor_f32(const std::string& name, std::vector<int64_t> dims, std::vector<float> v) {
  std::string t;
  for (int64_t d : dims) t += field_varint(1, uint64_t(d));
  t += field_varint(2, 1);
  t += field_bytes(8, name);
  t += field_bytes(9, std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
  return t;
}
// A tensor of any elem type from its raw_data bytes, or from int32_data entries (narrow types, float16, ...).
inline std::string tensor_raw(const std::string& name, std::vector<int64_t> dims, int elem,
                              const std::string& raw) {
  std::string t;
  for (int64_t d : dims) t += field_varint(1, uint64_t(d));
  return t + field_varint(2, uint64_t(elem)) + field_bytes(8, name) + field_bytes(9, raw);
}
inline std::string tensor_int32(const std::string& name, std::vector<int64_t> dims, int elem,
                                std::vector<int32_t> v) {
  std::string t;
  for (int64_t d : dims) t += field_varint(1, uint64_t(d));
  t += field_varint(2, uint64_t(elem)) + field_bytes(8, name);
  for (int32_t x : v) t += field_varint(5, uint64_t(int64_t(x)));  // negative int32: ten-byte varint
  return t;
}
inline std::string tensor_i64(const std::string& name, std::vector<int64_t> v) {
  std::string t = field_varint(1, v.size()) + field_varint(2, 7) + field_bytes(8, name);
  for (int64_t x : v) t += field_varint(7, uint64_t(x));
  return t;
}
// dims: a number, or a symbolic name
inline std::string value_info(const std::string& name, int elem, std::vector<std::string> dims) {
  std::string shape;
  for (const auto& d : dims) {
    const bool num = !d.empty() && std::isdigit(static_cast<unsigned char>(d[0]));
    shape += field_bytes(1, num ? field_varint(1, std::stoull(d)) : field_bytes(2, d));
  }
  const std::string tensor = field_varint(1, uint64_t(elem)) + field_bytes(2, shape);
  return field_bytes(1, name) + field_bytes(2, field_bytes(1, tensor));
}
inline std::string attr_int(const std::string& name, int64_t v) {
  return field_bytes(1, name) + field_varint(3, uint64_t(v)) + field_varint(20, 2);
}
inline std::string attr_string(const std::string& name, const std::string& v) {
  return field_bytes(1, name) + field_bytes(4, v) + field_varint(20, 3);
}
inline std::string attr_float(const std::string& name, float v) {
  return field_bytes(1, name) + field_float(2, v) + field_varint(20, 1);
}
// A TENSOR attribute (a Constant node's "value"): `tensor` is a serialized TensorProto (tensor_f32, ...).
inline std::string attr_tensor(const std::string& name, const std::string& tensor) {
  return field_bytes(1, name) + field_bytes(5, tensor) + field_varint(20, 4);
}
inline std::string node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
                        const std::string& name, std::vector<std::string> attrs = {}) {
  std::string n;
  for (const auto& i : in) n += field_bytes(1, i);
  for (const auto& o : out) n += field_bytes(2, o);
  n += field_bytes(3, name) + field_bytes(4, op);
  for (const auto& a : attrs) n += field_bytes(5, a);
  return n;
}
inline std::string model(std::vector<std::string> nodes, std::vector<std::string> inits,
                         std::vector<std::string> inputs, std::vector<std::string> outputs, int opset = 17) {
  std::string g;
  for (const auto& n : nodes) g += field_bytes(1, n);
  g += field_bytes(2, "test");
  for (const auto& t : inits) g += field_bytes(5, t);
  for (const auto& i : inputs) g += field_bytes(11, i);
  for (const auto& o : outputs) g += field_bytes(12, o);
  return field_varint(1, 8) + field_bytes(7, g) +
         field_bytes(8, field_bytes(1, "") + field_varint(2, uint64_t(opset)));
}
inline std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace meganeura::test::onnx_writer
