#include <algorithm>

#include "meganeura/core/error.hpp"
#include "meganeura/ir/graph.hpp"
#include "meganeura/ir/shape_rule.hpp"

namespace meganeura {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I32: return "i32";
    case DType::U32: return "u32";
    case DType::Q4_0: return "q4_0";
    case DType::Q4_1: return "q4_1";
    case DType::Q5_0: return "q5_0";
    case DType::Q5_1: return "q5_1";
    case DType::Q8_0: return "q8_0";
    case DType::Q4_K: return "q4_k";
    case DType::Q5_K: return "q5_k";
    case DType::Q6_K: return "q6_k";
  }
  return "?";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
    case DType::I32:
    case DType::U32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    default: return 0;
  }
}

bool is_quantized(DType t) { return dtype_block_elems(t) > 1; }

uint32_t dtype_block_elems(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0: return 32;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return 256;
    default: return 1;
  }
}

uint32_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::Q4_0: return 18;
    case DType::Q4_1: return 20;
    case DType::Q5_0: return 22;
    case DType::Q5_1: return 24;
    case DType::Q8_0: return 34;
    case DType::Q4_K: return 144;
    case DType::Q5_K: return 176;
    case DType::Q6_K: return 210;
    default: return uint32_t(dtype_size(t));
  }
}

uint64_t storage_bytes(DType t, int64_t elements) {
  const uint32_t be = dtype_block_elems(t);
  if (elements < 0 || elements % be != 0)
    throw ShapeError("[storage_bytes] expected a whole number of " + std::to_string(be) +
                     "-element blocks of " + dtype_name(t) + ", got " + std::to_string(elements) +
                     " elements");
  return uint64_t(elements / be) * dtype_block_bytes(t);
}

DType parse_dtype(const std::string& name) {
  std::string low;
  for (char c : name) low += char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::U32, DType::Q4_0, DType::Q4_1,
                  DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K})
    if (low == dtype_name(t)) return t;
  throw ConfigError(
      "[parse_dtype] expected one of f32, f16, bf16, i32, u32, q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, "
      "q5_k, q6_k, got '" +
      name + "'");
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ",";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape r(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    r[i] = da == 1 ? db : da;
  }
  return r;
}

void ShapeCtx::fail(const std::string& expected, const std::string& got) const {
  std::string m = "[" + std::string(op_name(op)) + "] expected " + expected + ", got " + got + "; inputs:";
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Node& n = graph.node(inputs[i]);
    m += i ? ", %" : " %";
    m += std::to_string(inputs[i].v);
    if (!n.prov.name.empty()) m += " '" + n.prov.name + "'";
    m += ' ';
    m += dtype_name(n.dtype);
    m += shape_str(n.shape);
  }
  if (inputs.empty()) m += " none";
  m += "; node " + (prov.name.empty() ? std::string("(unnamed)") : "'" + prov.name + "'");
  m += " at " + where(prov.loc);
  throw ShapeError(m);
}

int64_t ShapeCtx::axis(int64_t a, size_t rank) const {
  int64_t r = int64_t(rank);
  if (a < -r || a >= r || r == 0)
    fail("an axis in [-" + std::to_string(r) + ", " + std::to_string(r) + ")", "axis " + std::to_string(a));
  return a < 0 ? a + r : a;
}

}  // namespace meganeura
