// gguf::Value: numeric views of scalars and array elements, and the builders the writer uses.
#include <cstring>

#include "meganeura/core/error.hpp"
#include "meganeura/formats/gguf.hpp"

namespace meganeura::gguf {

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::Bool: return "bool";
    case ValueType::String: return "string";
    case ValueType::Array: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "invalid";
}

size_t value_type_size(ValueType t) {
  switch (t) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::Bool: return 1;
    case ValueType::U16:
    case ValueType::I16: return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32: return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64: return 8;
    case ValueType::String:
    case ValueType::Array: return 0;
  }
  return 0;
}

namespace {

void require_scalar(ValueType t, const char* fn) {
  if (value_type_size(t) == 0)
    throw FormatError(std::string("[gguf::Value::") + fn + "] expected a scalar value, got " +
                      value_type_name(t));
}

int64_t bits_as_int(ValueType t, uint64_t b) {
  switch (t) {
    case ValueType::I8: return static_cast<int8_t>(b);
    case ValueType::I16: return static_cast<int16_t>(b);
    case ValueType::I32: return static_cast<int32_t>(b);
    case ValueType::I64: return static_cast<int64_t>(b);
    case ValueType::F32: {
      float f;
      const uint32_t u = static_cast<uint32_t>(b);
      std::memcpy(&f, &u, 4);
      return static_cast<int64_t>(f);
    }
    case ValueType::F64: {
      double d;
      std::memcpy(&d, &b, 8);
      return static_cast<int64_t>(d);
    }
    default: return static_cast<int64_t>(b);
  }
}

double bits_as_double(ValueType t, uint64_t b) {
  switch (t) {
    case ValueType::F32: {
      float f;
      const uint32_t u = static_cast<uint32_t>(b);
      std::memcpy(&f, &u, 4);
      return f;
    }
    case ValueType::F64: {
      double d;
      std::memcpy(&d, &b, 8);
      return d;
    }
    case ValueType::U64: return static_cast<double>(b);
    default: return static_cast<double>(bits_as_int(t, b));
  }
}

}  // namespace

bool Value::is_integer() const {
  switch (type) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::U16:
    case ValueType::I16:
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::U64:
    case ValueType::I64: return true;
    default: return false;
  }
}
bool Value::is_float() const { return type == ValueType::F32 || type == ValueType::F64; }

int64_t Value::as_int() const {
  require_scalar(type, "as_int");
  return bits_as_int(type, bits);
}
uint64_t Value::as_uint() const {
  require_scalar(type, "as_uint");
  return type == ValueType::U64 ? bits : static_cast<uint64_t>(bits_as_int(type, bits));
}
double Value::as_double() const {
  require_scalar(type, "as_double");
  return bits_as_double(type, bits);
}

Value Value::element_value(uint64_t i) const {
  const size_t es = type == ValueType::Array ? value_type_size(element) : 0;
  if (es == 0)
    throw FormatError("[gguf::Value::element_value] expected an array of scalars, got " +
                      std::string(type == ValueType::Array ? "an array of " : "") +
                      value_type_name(type == ValueType::Array ? element : type));
  if (i >= count)
    throw FormatError("[gguf::Value::element_value] expected an index below " + std::to_string(count) +
                      ", got " + std::to_string(i));
  uint64_t b = 0;
  std::memcpy(&b, packed.data() + i * es, es);
  return scalar(element, b);
}
int64_t Value::int_at(uint64_t i) const { return element_value(i).as_int(); }
double Value::double_at(uint64_t i) const { return element_value(i).as_double(); }

Value Value::scalar(ValueType t, uint64_t bits) {
  require_scalar(t, "scalar");
  Value v;
  v.type = t;
  v.bits = bits;
  return v;
}
Value Value::of_f32(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return scalar(ValueType::F32, u);
}
Value Value::of_f64(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return scalar(ValueType::F64, u);
}
Value Value::of_string(std::string s) {
  Value v;
  v.type = ValueType::String;
  v.str = std::move(s);
  return v;
}
Value Value::packed_array(ValueType element, std::vector<uint8_t> bytes) {
  const size_t es = value_type_size(element);
  if (es == 0 || bytes.size() % es != 0)
    throw FormatError(std::string("[gguf::Value::packed_array] expected whole ") + value_type_name(element) +
                      " elements, got " + std::to_string(bytes.size()) + " bytes");
  Value v;
  v.type = ValueType::Array;
  v.element = element;
  v.count = bytes.size() / es;
  v.packed = std::move(bytes);
  return v;
}
Value Value::string_array(std::vector<std::string> s) {
  Value v;
  v.type = ValueType::Array;
  v.element = ValueType::String;
  v.count = s.size();
  v.strings = std::move(s);
  return v;
}
Value Value::array_array(std::vector<Value> a) {
  Value v;
  v.type = ValueType::Array;
  v.element = ValueType::Array;
  v.count = a.size();
  v.arrays = std::move(a);
  return v;
}

std::vector<int64_t> TensorInfo::shape() const { return std::vector<int64_t>(dims.rbegin(), dims.rend()); }

}  // namespace meganeura::gguf
