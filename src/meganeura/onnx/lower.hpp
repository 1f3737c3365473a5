#pragma once
// Private to onnx/: the lowering context that op converters (ops_*.cpp) work through.
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "meganeura/ir/graph.hpp"
#include "meganeura/ir/host_tensor.hpp"
#include "meganeura/onnx/onnx.hpp"
#include "meganeura/onnx/proto.hpp"
#include "meganeura/reference/interpreter.hpp"

namespace meganeura::onnx {

// Thrown by a converter for what it cannot lower; the driver collects it and goes on with the next node.
struct Unsupported {
  std::string attribute;  // "" for the op or an input
  std::string reason;
};

// One ONNX value: a graph node, a value known at load time, or both (an initializer once it is used as data).
struct Value {
  NodeId node;
  std::optional<HostTensor> known;
  int32_t type = 1;  // ONNX elem type
  Shape shape;
  bool parameter = false;  // a float initializer: materialised as a parameter
  bool poisoned = false;   // made by a node that could not be lowered
};

class Lowering {
 public:
  Lowering(Graph& g, OnnxModel& model, int64_t opset) : g(g), opset(opset), model_(model) {}

  Graph& g;
  const int64_t opset;

  // the node being lowered
  const NodeProto* node = nullptr;
  size_t arity() const { return node->input.size(); }
  bool has_input(size_t i) const { return i < node->input.size() && !node->input[i].empty(); }
  const Value& value(size_t i);
  NodeId in(size_t i);  // input i as a graph node (F32)
  const Shape& shape(size_t i) { return value(i).shape; }
  int32_t type(size_t i) { return value(i).type; }
  const HostTensor& known(size_t i);  // input i's value at load time, or Unsupported
  std::vector<int64_t> known_ints(size_t i);
  void out(size_t i, NodeId n, int32_t type);  // defines output i
  void out(size_t i, NodeId n) { out(i, n, type(0)); }
  void out_known(size_t i, HostTensor t, int32_t type);  // defines output i as a load-time value
  size_t outputs() const { return node->output.size(); }
  bool has_output(size_t i) const { return i < node->output.size() && !node->output[i].empty(); }

  // attributes (each read marks the attribute handled: an attribute no converter read is unsupported)
  bool has(const std::string& name);
  int64_t attr_i(const std::string& name, int64_t fallback);
  double attr_f(const std::string& name, double fallback);
  std::string attr_s(const std::string& name, const std::string& fallback);
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> fallback = {});
  std::vector<double> attr_floats(const std::string& name);
  const AttributeProto* attr(const std::string& name);
  [[noreturn]] void unsupported(const std::string& attribute, const std::string& reason) const {
    throw Unsupported{attribute, reason};
  }

  // helpers
  NodeId constant(const HostTensor& t);        // F32 constant node
  NodeId index_constant(const HostTensor& t);  // I32 constant node
  int64_t axis(int64_t a, size_t rank) const;  // normalised, Unsupported when out of range
  // x gathered along `axis` by load-time indices (any shape): numpy.take.
  NodeId take(NodeId x, int64_t axis, const HostTensor& indices);
  // x gathered along `axis` by runtime F32 indices (negative ones count from the end).
  NodeId take_node(NodeId x, int64_t axis, NodeId indices);
  // Cast semantics between ONNX types. `saturate` and `e8m0_rounding` are Cast's attributes for the float8
  // types (saturate) and float8e8m0 (both); the other narrow floats round to nearest-even and saturate.
  NodeId to_type(NodeId x, int32_t from, int32_t to, bool saturate = true,
                 FormatRounding e8m0_rounding = FormatRounding::Up);

  // driver
  std::map<std::string, Value> values;
  std::set<std::string> read_attrs;
  reference::Feeds* feeds = nullptr;
  bool constants_as_parameters = false;  // OnnxOptions::constants_as_parameters

 private:
  OnnxModel& model_;
};

using Converter = std::function<void(Lowering&)>;
using ConverterTable = std::map<std::string, Converter>;
// op_type → converter (default domain); each ops_*.cpp adds its rows.
const ConverterTable& converters();
void add_elementwise_ops(ConverterTable& t);
void add_tensor_ops(ConverterTable& t);
void add_nn_ops(ConverterTable& t);
void add_attention_ops(ConverterTable& t);
void add_resize_ops(ConverterTable& t);
void add_loss_ops(ConverterTable& t);
void add_index_ops(ConverterTable& t);
void add_rnn_ops(ConverterTable& t);

// numpy-style helpers on load-time values
HostTensor host_ints(const std::vector<int64_t>& v);

}  // namespace meganeura::onnx
