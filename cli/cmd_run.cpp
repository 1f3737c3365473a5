// meganeura run: an ONNX model's outputs for inputs given as .npy files, written as .npy files. The model is
// imported by load_onnx (symbolic input dimensions bound from the inputs' shapes), built as an inference
// session and run once.
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "command.hpp"
#include "flags.hpp"
#include "meganeura/formats/mmap.hpp"
#include "meganeura/formats/npy.hpp"
#include "meganeura/meganeura.hpp"
#include "meganeura/onnx/onnx.hpp"
#include "meganeura/onnx/proto.hpp"
#include "meganeura/runtime/device.hpp"

namespace meganeura::cli {
namespace {

namespace fs = std::filesystem;

std::string shape_text(const Shape& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// The .npy dtype an output of ONNX element type `elem` is written in (outputs come back as exact floats).
std::string npy_descr(int32_t elem) {
  switch (onnx::ElemType(elem)) {
    case onnx::ElemType::Int64: return "<i8";
    case onnx::ElemType::Int32: return "<i4";
    case onnx::ElemType::Bool: return "|b1";
    case onnx::ElemType::Uint8: return "|u1";
    case onnx::ElemType::Int8: return "|i1";
    case onnx::ElemType::Double: return "<f8";
    default: return "<f4";
  }
}

int run_model(const std::string& program, const std::string& model,
              const std::vector<std::string>& input_args, const std::string& out_dir, Precision precision,
              bool json) {
  if (precision == Precision::F16 || precision == Precision::BF16)
    throw ConfigError("[" + program +
                      "] expected --precision f32 or mixed16 for an ONNX model (its imported "
                      "parameters are f32; 16-bit storage applies to language models), got " +
                      precision_name(precision));
  // name=file.npy, each input once
  std::map<std::string, NpyArray> given;
  for (const std::string& a : input_args) {
    const size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == a.size())
      throw UsageError("[" + program + "] expected --input NAME=FILE.npy, got '" + a + "'");
    const std::string name = a.substr(0, eq);
    if (given.count(name))
      throw UsageError("[" + program + "] expected each input once, got '" + name + "' twice");
    given.emplace(name, read_npy(a.substr(eq + 1)));
  }

  // Symbolic dimensions take their sizes from the arrays given for the inputs that declare them.
  const MappedFile file(model);
  const onnx::ModelProto proto = onnx::parse_model(file.bytes(), model);
  OnnxOptions options;
  std::set<std::string> initializers;
  for (const onnx::TensorProto& t : proto.graph.initializer) initializers.insert(t.name);
  std::string names;  // the inputs to give, for messages
  for (const onnx::ValueInfoProto& in : proto.graph.input)
    if (!initializers.count(in.name)) names += (names.empty() ? "" : ", ") + in.name;
  for (const auto& [name, _] : given) {
    bool known = false;
    for (const onnx::ValueInfoProto& in : proto.graph.input)
      known |= in.name == name && !initializers.count(name);
    if (!known)
      throw ConfigError("[" + program + "] expected --input names among the model's inputs (" + names +
                        "), got '" + name + "'");
  }
  for (const onnx::ValueInfoProto& in : proto.graph.input) {
    if (initializers.count(in.name)) continue;  // an initializer listed as an input (older exporters)
    const auto it = given.find(in.name);
    if (it == given.end())
      throw ConfigError("[" + program + "] expected --input " + in.name +
                        "=FILE.npy for the model's input '" + in.name + "', got none");
    const Shape& have = it->second.value.shape;
    if (in.has_shape && in.dims.size() != have.size())
      throw ConfigError("[" + program + "] expected input '" + in.name + "' of rank " +
                        std::to_string(in.dims.size()) + ", got " + shape_text(have) + " from its .npy file");
    for (size_t d = 0; d < in.dims.size() && d < have.size(); ++d) {
      const onnx::Dim& dim = in.dims[d];
      if (dim.has_value || dim.param.empty()) continue;
      const auto [bound, fresh] = options.dims.emplace(dim.param, have[d]);
      if (!fresh && bound->second != have[d])
        throw ConfigError("[" + program + "] expected dimension '" + dim.param + "' to be " +
                          std::to_string(bound->second) + " in every input, got " + std::to_string(have[d]) +
                          " in '" + in.name + "'");
    }
  }
  OnnxModel m = load_onnx(model, options);

  SessionConfig cfg = SessionConfig::from_env();
  cfg.training = false;
  cfg.optimizer.kind = OptimizerKind::None;
  cfg.precision = precision;
  cfg.init = ParameterInit::Zeros;  // every parameter is uploaded from the file below
  Session s = build(m.graph, cfg);
  for (const auto& [name, values] : m.parameters) s.set_parameter(name, values);
  for (const OnnxValueInfo& in : m.inputs) {
    const auto it = given.find(in.name);
    if (it == given.end())
      throw ConfigError("[" + program + "] expected --input " + in.name + "=FILE.npy (shape " +
                        shape_text(in.shape) + "), got none");
    const HostTensor& v = it->second.value;
    if (v.shape != in.shape)
      throw ConfigError("[" + program + "] expected input '" + in.name + "' of shape " +
                        shape_text(in.shape) + ", got " + shape_text(v.shape));
    if (in.dtype == DType::I32) {
      std::vector<int32_t> ints(v.data.begin(), v.data.end());
      s.set_input(in.name, ints);
    } else {
      std::vector<float> floats(v.data.begin(), v.data.end());
      s.set_input(in.name, floats);
    }
  }
  s.run();
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  nlohmann::json outputs = nlohmann::json::array();
  for (size_t i = 0; i < m.outputs.size(); ++i) {
    const OnnxValueInfo& o = m.outputs[i];
    const std::vector<float> values = s.read_output(i);
    const Shape shape = m.graph.node(m.graph.outputs()[i]).shape;
    // Output names may hold '/' or ':' (exported graphs): the file name keeps letters, digits, '.', '-', '_'.
    std::string stem = o.name;
    for (char& c : stem)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
    const std::string path = (fs::path(out_dir) / (stem + ".npy")).string();
    write_npy(path, HostTensor(shape, std::vector<double>(values.begin(), values.end())),
              npy_descr(o.elem_type));
    outputs.push_back({{"name", o.name}, {"shape", shape}, {"file", path}});
    if (!json) std::printf("%s %s -> %s\n", o.name.c_str(), shape_text(shape).c_str(), path.c_str());
  }
  if (json)
    json_line(nlohmann::json{{"model", model}, {"device", s.caps().name}, {"outputs", outputs}}.dump());
  return 0;
}

int run_main(int argc, char** argv) {
  std::string model, out_dir = ".";
  std::vector<std::string> inputs;
  Precision precision = Precision::F32;
  bool json = false;
  const std::string program = argv[0];
  Flags f(program,
          "Runs an ONNX model once on the GPU: each --input NAME=FILE.npy feeds a graph input (symbolic\n"
          "dimensions take the array's sizes), each output is written to OUTPUT_DIR/<output name>.npy.");
  f.positional("MODEL", model, "an .onnx file");
  f.custom(
      "--input", [&inputs](const std::string& v) { inputs.push_back(v); },
      "an input's values (repeat per input)", "NAME=FILE.npy");
  f.option("--output-dir", out_dir, "where the outputs' .npy files go", "DIR");
  f.precision(precision);
  f.flag("--json", json, "one JSON object on stdout: the outputs' names, shapes and files");
  f.epilog("example: meganeura run mlp.onnx --input x=x.npy --output-dir out");
  return run(f, argc, argv, [&] { return run_model(program, model, inputs, out_dir, precision, json); });
}

const bool registered =
    register_command({"run", "run an ONNX model on .npy inputs and write its outputs as .npy", run_main});

}  // namespace
}  // namespace meganeura::cli
