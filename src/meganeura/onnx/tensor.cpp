#include "meganeura/onnx/tensor.hpp"

#include <cstring>

#include "meganeura/core/error.hpp"
#include "meganeura/formats/mmap.hpp"
#include "meganeura/quant/half.hpp"

namespace meganeura::onnx {

bool is_float_type(int32_t t) {
  const auto e = ElemType(t);
  return e == ElemType::Float || e == ElemType::Double || e == ElemType::Float16 || e == ElemType::Bfloat16;
}

bool is_numeric_type(int32_t t) { return (t >= 1 && t <= 7) || (t >= 9 && t <= 13) || t == 16; }

namespace {

size_t elem_bytes(int32_t t) {
  switch (ElemType(t)) {
    case ElemType::Uint8:
    case ElemType::Int8:
    case ElemType::Bool: return 1;
    case ElemType::Uint16:
    case ElemType::Int16:
    case ElemType::Float16:
    case ElemType::Bfloat16: return 2;
    case ElemType::Float:
    case ElemType::Int32:
    case ElemType::Uint32: return 4;
    default: return 8;
  }
}

double from_bits(const unsigned char* p, int32_t t) {
  auto load = [&](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (ElemType(t)) {
    case ElemType::Float: return load(float{});
    case ElemType::Uint8: return load(uint8_t{});
    case ElemType::Int8: return load(int8_t{});
    case ElemType::Uint16: return load(uint16_t{});
    case ElemType::Int16: return load(int16_t{});
    case ElemType::Int32: return load(int32_t{});
    case ElemType::Int64: return double(load(int64_t{}));
    case ElemType::Bool: return load(uint8_t{}) != 0;
    case ElemType::Float16: return quant::f16_to_f32(load(uint16_t{}));
    case ElemType::Double: return load(double{});
    case ElemType::Uint32: return load(uint32_t{});
    case ElemType::Uint64: return double(load(uint64_t{}));
    case ElemType::Bfloat16: return quant::bf16_to_f32(load(uint16_t{}));
    default: return 0;
  }
}

// A value of int32_data: 16-bit floats and small integers are stored there as their bits or values.
double from_int32_field(int32_t v, int32_t t) {
  switch (ElemType(t)) {
    case ElemType::Float16: return quant::f16_to_f32(uint16_t(v));
    case ElemType::Bfloat16: return quant::bf16_to_f32(uint16_t(v));
    case ElemType::Bool: return v != 0;
    case ElemType::Uint8: return uint8_t(v);
    case ElemType::Uint16: return uint16_t(v);
    default: return v;
  }
}

}  // namespace

HostTensor decode_tensor(const TensorProto& t, const std::string& where, const std::string& dir) {
  auto fail = [&](const std::string& what) -> void {
    throw FormatError("[load_onnx] " + where + ": " + what);
  };
  if (!is_numeric_type(t.data_type))
    fail(std::string("expected a numeric data type, got ") + elem_type_name(t.data_type));
  if (t.has_segment) fail("expected an unsegmented tensor, got one with a segment");
  if (t.dims.size() > 16) fail("expected at most 16 dims, got " + std::to_string(t.dims.size()));
  int64_t n = 1;
  for (int64_t d : t.dims) {
    if (d < 0 || d > (int64_t(1) << 40)) fail("expected dims in [0, 2^40], got " + shape_str(t.dims));
    n = d == 0 ? 0 : n;
    if (n != 0 && d > (int64_t(1) << 40) / n)
      fail("expected fewer than 2^40 elements, got dims " + shape_str(t.dims));
    n *= d;
  }
  const size_t count = size_t(n);
  HostTensor out;
  out.shape = t.dims;
  const size_t eb = elem_bytes(t.data_type);
  auto from_bytes = [&](const unsigned char* p, size_t size) {
    if (size != count * eb)
      fail("expected " + std::to_string(count * eb) + " bytes of " + elem_type_name(t.data_type) +
           " data for dims " + shape_str(t.dims) + ", got " + std::to_string(size));
    out.data.resize(count);
    for (size_t i = 0; i < count; ++i) out.data[i] = from_bits(p + i * eb, t.data_type);
  };
  if (t.external) {
    if (dir.empty()) fail("expected data inside the file, got external data (and no folder to read it from)");
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto& [k, v] : t.external_data) {
      auto number = [&](const std::string& s) {
        if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos)
          fail("expected a decimal external_data '" + k + "', got '" + s + "'");
        return int64_t(std::stoll(s));
      };
      if (k == "location")
        location = v;
      else if (k == "offset")
        offset = number(v);
      else if (k == "length")
        length = number(v);
    }
    if (location.empty() || location.front() == '/' || location.find("..") != std::string::npos)
      fail("expected an external_data location relative to the model's folder, got '" + location + "'");
    MappedFile file(dir + "/" + location);
    const size_t size = file.size();
    if (size_t(offset) > size || (length >= 0 && size_t(length) > size - size_t(offset)))
      fail("expected external data inside '" + location + "' (" + std::to_string(size) +
           " bytes), got offset " + std::to_string(offset) + " length " + std::to_string(length));
    const size_t len = length >= 0 ? size_t(length) : size - size_t(offset);
    from_bytes(reinterpret_cast<const unsigned char*>(file.bytes().data()) + offset, len);
    return out;
  }
  if (!t.raw_data.empty() || count == 0) {
    from_bytes(reinterpret_cast<const unsigned char*>(t.raw_data.data()), t.raw_data.size());
    return out;
  }
  auto take = [&](const auto& field, const char* name, auto convert) {
    if (field.size() != count)
      fail("expected " + std::to_string(count) + " values in " + name + " for dims " + shape_str(t.dims) +
           ", got " + std::to_string(field.size()));
    out.data.resize(count);
    for (size_t i = 0; i < count; ++i) out.data[i] = convert(field[i]);
  };
  switch (ElemType(t.data_type)) {
    case ElemType::Float: take(t.float_data, "float_data", [](float v) { return double(v); }); break;
    case ElemType::Double: take(t.double_data, "double_data", [](double v) { return v; }); break;
    case ElemType::Int64: take(t.int64_data, "int64_data", [](int64_t v) { return double(v); }); break;
    case ElemType::Uint32:
    case ElemType::Uint64: take(t.uint64_data, "uint64_data", [](uint64_t v) { return double(v); }); break;
    default: take(t.int32_data, "int32_data", [&](int32_t v) { return from_int32_field(v, t.data_type); });
  }
  return out;
}

}  // namespace meganeura::onnx
