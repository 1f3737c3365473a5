#pragma once
// TensorProto → float64 values (every numeric ONNX type; integers exact up to 2^53), with every count and
// external-data range checked against the file.
#include <string>

#include "meganeura/ir/host_tensor.hpp"
#include "meganeura/onnx/proto.hpp"

namespace meganeura::onnx {

bool is_float_type(int32_t t);    // float, double, float16, bfloat16
bool is_numeric_type(int32_t t);  // what decode_tensor reads

// `where` names the tensor in messages; external data is read relative to `dir` ("" refuses it).
HostTensor decode_tensor(const TensorProto& t, const std::string& where, const std::string& dir);

}  // namespace meganeura::onnx
