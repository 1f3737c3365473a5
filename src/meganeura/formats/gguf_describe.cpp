// File::describe(): the text `meganeura inspect FILE.gguf` prints.
#include <cstdio>
#include <map>
#include <sstream>

#include "meganeura/formats/gguf.hpp"

namespace meganeura::gguf {
namespace {

constexpr size_t kMaxShownChars = 64;
constexpr uint64_t kMaxShownElements = 4;

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < kMaxShownChars; ++i) {
    const unsigned char ch = static_cast<unsigned char>(s[i]);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch < 32 || ch == 127) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", ch);
      out += buf;
    } else {
      out += static_cast<char>(ch);
    }
  }
  out += '"';
  if (s.size() > kMaxShownChars) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string scalar_text(const Value& v) {
  if (v.type == ValueType::Bool) return v.bits ? "true" : "false";
  if (v.is_float()) {
    std::ostringstream s;
    s.precision(v.type == ValueType::F32 ? 9 : 17);
    s << v.as_double();
    return s.str();
  }
  return v.type == ValueType::U64 ? std::to_string(v.bits) : std::to_string(v.as_int());
}

std::string type_text(const Value& v) {
  if (v.type != ValueType::Array) return value_type_name(v.type);
  std::string inner = v.element == ValueType::Array && !v.arrays.empty() ? type_text(v.arrays[0])
                                                                         : value_type_name(v.element);
  return "[" + inner + "; " + std::to_string(v.count) + "]";
}

std::string value_text(const Value& v) {
  if (v.type == ValueType::String) return quoted(v.str);
  if (v.type != ValueType::Array) return scalar_text(v);
  std::string s = "[";
  const uint64_t shown = std::min(v.count, kMaxShownElements);
  for (uint64_t i = 0; i < shown; ++i) {
    if (i) s += ", ";
    if (v.element == ValueType::String)
      s += quoted(v.strings[i]);
    else if (v.element == ValueType::Array)
      s += value_text(v.arrays[i]);
    else
      s += scalar_text(v.element_value(i));
  }
  if (v.count > shown) s += ", ...";
  return s + "]";
}

std::string shape_text(const TensorInfo& t) {
  std::string s = "[";
  const auto shape = t.shape();
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

std::string File::describe() const {
  std::ostringstream o;
  uint64_t data_bytes = 0;
  std::map<std::string, int> by_type;
  for (const TensorInfo& t : tensors_) {
    data_bytes += t.bytes;
    ++by_type[quant::name(t.type)];
  }
  o << origin_ << ": GGUF v" << version_ << ", " << metadata_.size() << " metadata keys, " << tensors_.size()
    << " tensors (" << data_bytes << " bytes of tensor data at offset " << data_offset_ << ", alignment "
    << alignment_ << ")\n";
  const Value* arch = find("general.architecture");
  o << "architecture: " << (arch && arch->type == ValueType::String ? arch->str : std::string("(none)"))
    << "\n";
  o << "tensor types:";
  for (const auto& [name, n] : by_type) o << " " << name << " x" << n;
  o << "\nmetadata:\n";
  for (const auto& [key, v] : metadata_)
    o << "  " << key << ": " << type_text(v) << " = " << value_text(v) << "\n";
  o << "tensors (shapes row-major, outermost first):\n";
  for (const TensorInfo& t : tensors_)
    o << "  " << t.name << ": " << quant::name(t.type) << " " << shape_text(t) << ", " << t.bytes
      << " bytes at +" << t.offset << "\n";
  return o.str();
}

}  // namespace meganeura::gguf
