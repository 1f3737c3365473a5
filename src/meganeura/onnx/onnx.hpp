#pragma once
// load_onnx: an ONNX model file lowered into an ordinary Graph. Initializers become named parameters (so an
// imported model can be fine-tuned) or constants; graph inputs become Graph inputs; each ONNX value's name
// names the node that computes it, so dispatch labels, profiles and read_node_by_name show ONNX names.
// Shape computations (Shape, ConstantOfShape, Range and whatever combines them) are evaluated at load time.
// What cannot be lowered is collected over the whole model and thrown as one ImportError.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "meganeura/core/import_error.hpp"
#include "meganeura/ir/graph.hpp"
#include "meganeura/ir/host_tensor.hpp"

namespace meganeura {

struct OnnxOptions {
  // Sizes of symbolic input dimensions (dim_param), by name. An input dimension that is symbolic and not
  // bound here, or unknown, is an ImportError naming the input.
  std::map<std::string, int64_t> dims;
  // Whole input shapes, by input name: for inputs whose dimensions have no usable name (exporters write "?"
  // for several different dimensions, or -1). Each must have the declared rank and agree with every fixed
  // declared dimension; it takes precedence over `dims` for that input.
  std::map<std::string, Shape> shapes;
  // Graph inputs given a value at load time: they become constants and fold into shape computations (a
  // "shape" or "axes" input of a test model). Shapes must match the input's declared shape.
  std::map<std::string, HostTensor> values;
  // Float initializers become constants instead of parameters (nothing to fine-tune, more to fold).
  bool initializers_as_constants = false;
  // Float tensors of Constant nodes with two or more elements become parameters too, named after the
  // node's output: exporters such as paddle2onnx write every weight as a Constant node, and fine-tuning such
  // a model needs them as parameters. Scalars stay constants. Off by default: ONNX says Constant is constant.
  bool constants_as_parameters = false;
};

struct OnnxValueInfo {
  std::string name;
  Shape shape;
  int32_t elem_type = 0;     // onnx TensorProto.DataType (1 float, 7 int64, 9 bool, ...)
  DType dtype = DType::F32;  // the Graph node's dtype: F32 for floats, I32 for integer and boolean inputs
};

struct OnnxModel {
  Graph graph;
  // Runtime inputs (Graph inputs of the same names), in the file's order; inputs bound by options.values are
  // not listed.
  std::vector<OnnxValueInfo> inputs;
  // The file's outputs, in order: graph.outputs() holds their nodes (F32: integers and booleans as exact
  // floats).
  std::vector<OnnxValueInfo> outputs;
  // The initial value of every parameter the graph uses, by parameter name (the initializer's name).
  std::vector<std::pair<std::string, std::vector<float>>> parameters;
  int64_t opset = 0;                           // of the default domain
  std::map<std::string, size_t> op_histogram;  // node count per op_type
};

OnnxModel load_onnx(const std::string& path, const OnnxOptions& options = {});
// From bytes in memory; external tensor data is looked up relative to `dir` ("" refuses external data).
OnnxModel load_onnx_bytes(std::span<const std::byte> bytes, const std::string& origin,
                          const OnnxOptions& options, const std::string& dir = "");

// A serialized TensorProto (an ONNX test's input_0.pb): its values as float64 (integers exact up to 2^53)
// with its name and data type.
struct OnnxTensor {
  std::string name;
  int32_t elem_type = 0;
  HostTensor value;
};
OnnxTensor read_onnx_tensor(const std::string& path);
OnnxTensor read_onnx_tensor_bytes(std::span<const std::byte> bytes, const std::string& origin);

// Op types (default domain) that load_onnx lowers, sorted. Attributes and opset versions may still be
// refused.
std::vector<std::string> onnx_supported_ops();

}  // namespace meganeura
