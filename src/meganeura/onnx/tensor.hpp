#pragma once
// TensorProto → float64 values (every numeric ONNX type, narrow ones included; integers exact up to 2^53),
// with every count and external-data range checked against the file.
#include <optional>
#include <string>

#include "meganeura/ir/host_tensor.hpp"
#include "meganeura/ir/number_format.hpp"
#include "meganeura/onnx/proto.hpp"

namespace meganeura::onnx {

bool is_float_type(int32_t t);    // float, double, float16, bfloat16, and the narrow floats below
bool is_numeric_type(int32_t t);  // what decode_tensor reads

// The narrow types (float8, float6, float4, E8M0, and the 4- and 2-bit integers): their width in bits and,
// for the floats, their format. Values of width 4, 2 or 6 are packed LSB first (onnx.proto: in raw_data, a
// stream of bits; in int32_data, one byte of packed values an entry for 4- and 2-bit types, one value an
// entry for the others).
struct NarrowType {
  int width = 0;
  bool is_float = false;
  NumberFormat format = NumberFormat::F8E4M3FN;  // is_float
  bool is_signed = false;                        // integers
};
std::optional<NarrowType> narrow_type(int32_t t);

// `where` names the tensor in messages; external data is read relative to `dir` ("" refuses it).
HostTensor decode_tensor(const TensorProto& t, const std::string& where, const std::string& dir);

}  // namespace meganeura::onnx
