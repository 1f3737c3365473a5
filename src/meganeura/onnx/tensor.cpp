#include "meganeura/onnx/tensor.hpp"

#include <cstring>

#include "meganeura/core/error.hpp"
#include "meganeura/formats/mmap.hpp"
#include "meganeura/quant/half.hpp"

namespace meganeura::onnx {

std::optional<NarrowType> narrow_type(int32_t t) {
  auto f = [](int width, NumberFormat format) { return NarrowType{width, true, format, true}; };
  auto i = [](int width, bool is_signed) {
    return NarrowType{width, false, NumberFormat::F8E4M3FN, is_signed};
  };
  switch (ElemType(t)) {
    case ElemType::Float8E4M3FN: return f(8, NumberFormat::F8E4M3FN);
    case ElemType::Float8E4M3FNUZ: return f(8, NumberFormat::F8E4M3FNUZ);
    case ElemType::Float8E5M2: return f(8, NumberFormat::F8E5M2);
    case ElemType::Float8E5M2FNUZ: return f(8, NumberFormat::F8E5M2FNUZ);
    case ElemType::Float4E2M1: return f(4, NumberFormat::F4E2M1);
    case ElemType::Float8E8M0: return f(8, NumberFormat::F8E8M0);
    case ElemType::Float6E2M3: return f(6, NumberFormat::F6E2M3);
    case ElemType::Float6E3M2: return f(6, NumberFormat::F6E3M2);
    case ElemType::Uint4: return i(4, false);
    case ElemType::Int4: return i(4, true);
    case ElemType::Uint2: return i(2, false);
    case ElemType::Int2: return i(2, true);
    default: return std::nullopt;
  }
}

bool is_float_type(int32_t t) {
  const auto e = ElemType(t);
  if (e == ElemType::Float || e == ElemType::Double || e == ElemType::Float16 || e == ElemType::Bfloat16)
    return true;
  const auto n = narrow_type(t);
  return n && n->is_float;
}

bool is_numeric_type(int32_t t) { return (t >= 1 && t <= 7) || (t >= 9 && t <= 13) || (t >= 16 && t <= 28); }

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

// The value of one narrow code (the low `width` bits of `code`).
double narrow_value(uint32_t code, const NarrowType& n) {
  code &= (1u << n.width) - 1u;
  if (n.is_float) return decode_format(code, n.format);
  if (n.is_signed && (code >> (n.width - 1)) != 0) return double(int32_t(code) - (int32_t(1) << n.width));
  return double(code);
}

// Element i of an LSB-first stream of `width`-bit values; the caller has checked that the bytes cover it.
uint32_t packed_code(const unsigned char* p, size_t i, int width) {
  const size_t bit = i * size_t(width);
  uint32_t v = p[bit / 8];
  if (bit % 8 + size_t(width) > 8) v |= uint32_t(p[bit / 8 + 1]) << 8;  // a 6-bit value across two bytes
  return (v >> (bit % 8)) & ((1u << width) - 1u);
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
  const std::optional<NarrowType> narrow = narrow_type(t.data_type);
  auto from_bytes = [&](const unsigned char* p, size_t size) {
    if (narrow) {
      const size_t want = (count * size_t(narrow->width) + 7) / 8;  // the last byte may be part padding
      if (size != want)
        fail(std::string(t.external ? "external data" : "raw_data") + ": expected " + std::to_string(want) +
             " bytes of " + elem_type_name(t.data_type) + " data (" + std::to_string(narrow->width) +
             " bits a value) for dims " + shape_str(t.dims) + ", got " + std::to_string(size));
      out.data.resize(count);
      for (size_t i = 0; i < count; ++i)
        out.data[i] = narrow_value(packed_code(p, i, narrow->width), *narrow);
      return;
    }
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
  if (narrow) {
    // int32_data: one value an entry for 8- and 6-bit types; for 4- and 2-bit types one byte of packed values
    // an entry (onnx.proto), so the entries are read as the bytes of raw_data would be.
    const size_t per = narrow->width == 4 ? 2 : narrow->width == 2 ? 4 : 1;
    const size_t want = (count + per - 1) / per;
    const uint32_t limit = per == 1 ? (1u << narrow->width) - 1u : 255u;
    if (t.int32_data.size() != want)
      fail("int32_data: expected " + std::to_string(want) + " entries of " + elem_type_name(t.data_type) +
           " data for dims " + shape_str(t.dims) + ", got " + std::to_string(t.int32_data.size()));
    std::vector<unsigned char> bytes(want);
    for (size_t k = 0; k < want; ++k) {
      const int32_t v = t.int32_data[k];
      if (v < 0 || uint32_t(v) > limit)
        fail("int32_data[" + std::to_string(k) + "]: expected a value in [0, " + std::to_string(limit) +
             "] (" + elem_type_name(t.data_type) + (per == 1 ? " bits" : " packed bits") + "), got " +
             std::to_string(v));
      bytes[k] = static_cast<unsigned char>(v);
    }
    out.data.resize(count);
    for (size_t i = 0; i < count; ++i)
      out.data[i] = narrow_value(per == 1 ? bytes[i] : packed_code(bytes.data(), i, narrow->width), *narrow);
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
