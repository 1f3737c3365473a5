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
  }
  return "?";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: case DType::I32: case DType::U32: return 4;
    case DType::F16: case DType::BF16: return 2;
  }
  return 0;
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
