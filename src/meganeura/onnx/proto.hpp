#pragma once
// The parts of ONNX's protobuf schema (onnx.proto, stable since IR version 3) that an importer reads, decoded
// by a small wire-format reader instead of libprotobuf: no generated code, no shared-library dependency, and
// every length and field is checked against the buffer before use. Unknown fields are skipped, as protobuf
// does. Errors are FormatErrors naming the file and the message path ("graph.node[3].attribute[1].t.dims").
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace meganeura::onnx {

// TensorProto.DataType
enum class ElemType : int32_t {
  Undefined = 0,
  Float = 1,
  Uint8 = 2,
  Int8 = 3,
  Uint16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Double = 11,
  Uint32 = 12,
  Uint64 = 13,
  Complex64 = 14,
  Complex128 = 15,
  Bfloat16 = 16,
  // narrow types (ir/number_format.hpp; 4-, 2- and 6-bit values are packed, the first in the lowest bits)
  Float8E4M3FN = 17,
  Float8E4M3FNUZ = 18,
  Float8E5M2 = 19,
  Float8E5M2FNUZ = 20,
  Uint4 = 21,
  Int4 = 22,
  Float4E2M1 = 23,
  Float8E8M0 = 24,
  Uint2 = 25,
  Int2 = 26,
  Float6E2M3 = 27,
  Float6E3M2 = 28,
};
const char* elem_type_name(int32_t t);  // "float", "int64", ... or "type 21"

struct TensorProto {
  std::string name;
  std::vector<int64_t> dims;
  int32_t data_type = 0;
  std::vector<float> float_data;
  std::vector<int32_t> int32_data;  // also int8/16, uint8/16, bool, float16/bfloat16 bits
  std::vector<int64_t> int64_data;
  std::vector<double> double_data;
  std::vector<uint64_t> uint64_data;  // also uint32
  std::vector<std::string> string_data;
  std::string raw_data;
  std::vector<std::pair<std::string, std::string>> external_data;  // location, offset, length, checksum
  bool external = false;                                           // data_location == EXTERNAL
  bool has_segment = false;
};

struct GraphProto;

// AttributeProto.AttributeType
enum class AttrType : int32_t {
  Undefined = 0,
  Float = 1,
  Int = 2,
  String = 3,
  Tensor = 4,
  Graph = 5,
  Floats = 6,
  Ints = 7,
  Strings = 8,
  Tensors = 9,
  Graphs = 10,
  SparseTensor = 11,
  SparseTensors = 12,
  TypeProto = 13,
  TypeProtos = 14,
};

struct AttributeProto {
  std::string name;
  int32_t type = 0;
  std::string ref_attr_name;  // set inside function bodies only
  float f = 0;
  int64_t i = 0;
  std::string s;
  std::vector<TensorProto> t;  // at most one: the `t` field
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<TensorProto> tensors;
  int graphs = 0;  // g and graphs fields seen (subgraphs are not decoded: no supported op takes one)
};

struct NodeProto {
  std::vector<std::string> input, output;
  std::string name, op_type, domain;
  std::vector<AttributeProto> attribute;
};

struct Dim {
  bool has_value = false;
  int64_t value = 0;
  std::string param;  // symbolic dimension ("" when neither is set: unknown)
};

struct ValueInfoProto {
  std::string name;
  bool is_tensor = false;  // TypeProto.tensor_type present (not a sequence, map, optional)
  int32_t elem_type = 0;
  bool has_shape = false;
  std::vector<Dim> dims;
};

struct GraphProto {
  std::string name;
  std::vector<NodeProto> node;
  std::vector<TensorProto> initializer;
  int sparse_initializers = 0;
  std::vector<ValueInfoProto> input, output, value_info;
};

struct OpsetId {
  std::string domain;
  int64_t version = 0;
};

struct ModelProto {
  int64_t ir_version = 0;
  std::string producer_name;
  std::vector<OpsetId> opset_import;
  GraphProto graph;
  bool has_graph = false;
  int functions = 0;  // model-local functions (not decoded)
};

// `origin` names the bytes in messages (a file path).
ModelProto parse_model(std::span<const std::byte> bytes, const std::string& origin);
TensorProto parse_tensor(std::span<const std::byte> bytes, const std::string& origin);

}  // namespace meganeura::onnx
