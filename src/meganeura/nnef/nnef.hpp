#pragma once
// load_nnef: an NNEF 1.0 model (a folder holding graph.nnef and one binary .dat file per variable) lowered
// into an ordinary Graph. `variable` tensors become named parameters (so an imported model can be
// fine-tuned), `external` tensors become Graph inputs, and each NNEF identifier of the graph body names the
// node that computes it. Compound fragments (the standard's and the file's own `fragment` definitions) are
// expanded; primitives are lowered to IR ops. What cannot be lowered is collected over the whole graph and
// thrown as one ImportError; a malformed file is a FormatError naming file:line:column.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "meganeura/core/import_error.hpp"
#include "meganeura/ir/graph.hpp"
#include "meganeura/ir/host_tensor.hpp"

namespace meganeura {

struct NnefOptions {
  // A variable whose .dat file is missing becomes a parameter without an initial value (its entry in
  // NnefModel::parameters is empty: set it before running) instead of failing the load, so a graph
  // description alone can be inspected or trained from scratch. Off: a missing file is a FormatError.
  bool allow_missing_tensors = false;
};

struct NnefValueInfo {
  std::string name;
  Shape shape;
};

struct NnefModel {
  Graph graph;
  std::vector<NnefValueInfo> inputs;   // the graph's `external` tensors, in the graph's input order
  std::vector<NnefValueInfo> outputs;  // graph.outputs() holds their nodes
  // The initial value of every parameter (float variable) the graph uses, by its label (empty for a
  // variable without its file under allow_missing_tensors).
  std::vector<std::pair<std::string, std::vector<float>>> parameters;
  std::string version;
  std::vector<std::string> extensions;
  std::map<std::string, size_t> op_histogram;  // invocations per operation in the graph body
};

// A folder (graph.nnef + .dat files) or the graph.nnef file itself.
NnefModel load_nnef(const std::string& path, const NnefOptions& options = {});

// Tensor data by variable label ("conv1/filter" → the bytes of conv1/filter.dat), nullopt when absent.
using NnefTensorSource = std::function<std::optional<std::vector<std::byte>>(const std::string& label)>;
// From a graph description in memory; `origin` names it in errors.
NnefModel load_nnef_text(std::string_view text, const std::string& origin, const NnefTensorSource& tensors,
                         const NnefOptions& options = {});

// One binary tensor file (.dat): header (magic 'N' 0xEF, version 1.0, data length, rank, extents, bits per
// item, item type) and data. Floats (16/32/64 bits), signed and unsigned integers (8..64 bits), logicals
// (1 or 8 bits), and quantized integers (their stored integers: the quantization itself is in graph.quant).
struct NnefTensor {
  enum ItemType : uint32_t { Float = 0, Uint = 1, Quint = 2, Qint = 3, Int = 4, Bool = 5 };
  uint32_t item_type = Float;
  uint32_t bits = 32;
  HostTensor value;  // float64 (integers exact up to 2^53)
};
NnefTensor read_nnef_tensor_bytes(std::span<const std::byte> bytes, const std::string& origin);
NnefTensor read_nnef_tensor(const std::string& path);

// What `meganeura inspect model.nnef` prints: the model lowered as far as it goes (missing .dat files read as
// zeros), with every unsupported operation listed instead of thrown.
struct NnefInspection {
  std::string version;
  std::vector<NnefValueInfo> inputs, outputs;
  std::vector<NnefValueInfo> parameters;  // by label
  std::map<std::string, size_t> op_histogram;
  std::vector<ImportError::Item> unsupported;
};
NnefInspection inspect_nnef(const std::string& path);
std::string describe(const NnefInspection& m);  // the lines `inspect` prints

// Operations load_nnef lowers (primitives and standard compound fragments), sorted.
std::vector<std::string> nnef_supported_ops();

}  // namespace meganeura
