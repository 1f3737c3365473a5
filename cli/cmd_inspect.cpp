// meganeura inspect: what a model file holds and what of it meganeura can run — inputs, outputs, parameters
// (name, shape, dtype), an op histogram and what is unsupported — for .onnx, .gguf, .safetensors and Hugging
// Face folders. One Inspector row per format (kInspectors below); a new format is a function that fills a
// Summary (graph_summary does most of it for a loader that returns a Graph) and one row.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "command.hpp"
#include "flags.hpp"
#include "meganeura/formats/gguf.hpp"
#include "meganeura/formats/mmap.hpp"
#include "meganeura/formats/safetensors.hpp"
#include "meganeura/models/gguf_model.hpp"
#include "meganeura/models/hf.hpp"
#include "meganeura/nnef/nnef.hpp"
#include "meganeura/onnx/onnx.hpp"
#include "meganeura/onnx/proto.hpp"

namespace meganeura::cli {
namespace {

namespace fs = std::filesystem;

struct TensorRow {
  std::string name;
  Shape shape;
  std::string dtype;
};

struct Summary {
  std::string format;
  std::vector<std::pair<std::string, std::string>> facts;  // architecture, opset, version, ...
  std::vector<TensorRow> inputs, outputs, parameters;
  std::map<std::string, size_t> ops;
  std::vector<std::string> unsupported;  // empty: meganeura runs all of it
  std::string note;                      // what the format does not say (a weights-only file has no graph)
};

std::string shape_text(const Shape& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i)
    t += (i ? ", " : "") + (s[i] < 0 ? std::string("?") : std::to_string(s[i]));
  return t + "]";
}

// Inputs, outputs, parameters and op histogram of a Graph a loader built (GGUF and HF models, and any
// importer that returns a Graph: load_nnef's would plug in here).
void graph_summary(const Graph& g, Summary& s) {
  auto row = [&](NodeId id) {
    const Node& n = g.node(id);
    return TensorRow{n.prov.name, n.shape, dtype_name(n.dtype)};
  };
  for (NodeId id : g.inputs()) s.inputs.push_back(row(id));
  for (NodeId id : g.outputs()) s.outputs.push_back(row(id));
  if (!g.states().empty()) {  // persistent values a step reads and writes (KV caches): one line for all
    const Node& first = g.node(g.states().front());
    s.facts.push_back({"states", std::to_string(g.states().size()) + " (" + first.prov.name + " " +
                                     shape_text(first.shape) + " " + dtype_name(first.dtype) + ", ...)"});
  }
  for (uint32_t i = 0; i < g.size(); ++i) ++s.ops[op_name(g.node(NodeId{i, g.tag()}).op)];
}

Summary inspect_onnx(const std::string& path) {
  Summary s;
  s.format = "onnx";
  const MappedFile file(path);
  const onnx::ModelProto m = onnx::parse_model(file.bytes(), path);
  s.facts.push_back({"ir_version", std::to_string(m.ir_version)});
  for (const onnx::OpsetId& o : m.opset_import)
    s.facts.push_back(
        {"opset " + (o.domain.empty() ? std::string("ai.onnx") : o.domain), std::to_string(o.version)});
  if (!m.producer_name.empty()) s.facts.push_back({"producer", m.producer_name});
  std::set<std::string> initializers;
  for (const onnx::TensorProto& t : m.graph.initializer) {
    initializers.insert(t.name);
    s.parameters.push_back({t.name, t.dims, onnx::elem_type_name(t.data_type)});
  }
  OnnxOptions options;  // symbolic dimensions bound to 1: enough to find what cannot be lowered
  auto value_row = [&](const onnx::ValueInfoProto& v) {
    TensorRow r{v.name, {}, onnx::elem_type_name(v.elem_type)};
    if (!v.has_shape) r.dtype += " (shape not declared)";
    for (const onnx::Dim& d : v.dims) {
      r.shape.push_back(d.has_value ? d.value : -1);
      if (!d.has_value && !d.param.empty()) options.dims.emplace(d.param, 1);
      if (!d.has_value) r.dtype += (d.param.empty() ? " ?" : " " + d.param);  // which dimension is symbolic
    }
    return r;
  };
  for (const onnx::ValueInfoProto& v : m.graph.input)
    if (!initializers.count(v.name)) s.inputs.push_back(value_row(v));
  for (const onnx::ValueInfoProto& v : m.graph.output) s.outputs.push_back(value_row(v));
  const std::vector<std::string> supported = onnx_supported_ops();
  std::set<std::string> missing;
  for (const onnx::NodeProto& n : m.graph.node) {
    const bool default_domain = n.domain.empty() || n.domain == "ai.onnx";
    const std::string op = default_domain ? n.op_type : n.domain + "." + n.op_type;
    ++s.ops[op];
    if (!default_domain || !std::binary_search(supported.begin(), supported.end(), n.op_type))
      missing.insert(op);
  }
  for (const std::string& op : missing) s.unsupported.push_back(op + " (op)");
  // Attributes, opset versions and dtypes the importer refuses show only when it tries: every item at once.
  try {
    (void)load_onnx(path, options);
  } catch (const ImportError& e) {
    for (const ImportError::Item& i : e.items()) {
      if (i.attribute.empty() && missing.count(i.op)) continue;  // listed above
      s.unsupported.push_back(i.op + (i.attribute.empty() ? "" : "." + i.attribute) + " at " + i.node + ": " +
                              i.reason);
    }
  } catch (const Error& e) {
    if (missing.empty()) s.unsupported.push_back(std::string("load_onnx: ") + e.what());
  }
  return s;
}

Summary inspect_gguf(const std::string& path) {
  Summary s;
  s.format = "gguf";
  const gguf::File f = gguf::File::open(path);
  s.facts.push_back({"version", std::to_string(f.version())});
  if (f.find("general.architecture")) s.facts.push_back({"architecture", f.architecture()});
  if (f.find("general.name")) s.facts.push_back({"name", f.get_string("general.name")});
  if (f.find("tokenizer.ggml.model")) s.facts.push_back({"tokenizer", f.get_string("tokenizer.ggml.model")});
  for (const gguf::TensorInfo& t : f.tensors())
    s.parameters.push_back({t.name, t.shape(), quant::name(t.type)});
  try {
    const models::LlamaConfig c = models::gguf_llama_config(f);
    s.facts.push_back({"context", std::to_string(c.max_context)});
    graph_summary(models::build_llama(c, 1, 1).graph, s);  // the decode step's graph
    s.note = "inputs, outputs and ops: the one-token decode step's graph";
  } catch (const Error& e) {
    s.unsupported.push_back(e.what());
  }
  return s;
}

Summary inspect_safetensors(const std::string& path) {
  Summary s;
  s.format = "safetensors";
  const SafetensorsFile f(path);
  for (const auto& [k, v] : f.metadata()) s.facts.push_back({"metadata " + k, v});
  for (const SafetensorsEntry& e : f.entries()) {
    s.parameters.push_back({e.name, e.shape, e.dtype});
    if (e.dtype != "F32" && e.dtype != "F16" && e.dtype != "BF16" && e.dtype != "I32" && e.dtype != "U32")
      s.unsupported.push_back(e.name + ": dtype " + e.dtype);
  }
  s.note = "weights only: a safetensors file holds no graph";
  return s;
}

Summary inspect_hf(const std::string& path) {
  Summary s;
  s.format = "huggingface";
  try {
    const models::LanguageModel m = models::load_hf(path);
    s.facts.push_back({"architecture", m.architecture});
    s.facts.push_back({"context", std::to_string(m.config.max_context)});
    s.facts.push_back({"tokenizer", m.tokenizer ? "tokenizer.json" : "none"});
    for (const models::WeightView& w : m.weights)
      s.parameters.push_back({w.name, w.shape, dtype_name(w.dtype)});
    graph_summary(models::build_llama(m.config, 1, 1).graph, s);
    s.note = "inputs, outputs and ops: the one-token decode step's graph; parameter names are meganeura's";
  } catch (const Error& e) {
    s.unsupported.push_back(e.what());
  }
  return s;
}

Summary inspect_nnef_model(const std::string& path) {
  Summary s;
  s.format = "nnef";
  const NnefInspection m = inspect_nnef(path);  // lists what it cannot lower instead of throwing
  s.facts.push_back({"version", m.version});
  for (const auto& i : m.inputs) s.inputs.push_back({i.name, i.shape, "f32"});
  for (const auto& o : m.outputs) s.outputs.push_back({o.name, o.shape, "f32"});
  for (const auto& p : m.parameters) s.parameters.push_back({p.name, p.shape, "f32"});
  s.ops = m.op_histogram;
  for (const auto& u : m.unsupported) s.unsupported.push_back(u.op + " at '" + u.node + "': " + u.reason);
  return s;
}

struct Inspector {
  const char* format;
  bool (*accepts)(const fs::path& path);
  Summary (*inspect)(const std::string& path);
};

bool has_magic(const fs::path& p, const std::string& magic) {
  std::ifstream f(p, std::ios::binary);
  std::string head(magic.size(), '\0');
  return f.read(head.data(), std::streamsize(head.size())) && head == magic;
}

const Inspector kInspectors[] = {
    {"onnx", [](const fs::path& p) { return fs::is_regular_file(p) && p.extension() == ".onnx"; },
     inspect_onnx},
    {"gguf", [](const fs::path& p) { return fs::is_regular_file(p) && has_magic(p, "GGUF"); }, inspect_gguf},
    {"safetensors",
     [](const fs::path& p) { return fs::is_regular_file(p) && p.extension() == ".safetensors"; },
     inspect_safetensors},
    {"nnef",
     [](const fs::path& p) {
       return fs::is_regular_file(p / "graph.nnef") || (fs::is_regular_file(p) && p.extension() == ".nnef");
     },
     inspect_nnef_model},
    {"huggingface", [](const fs::path& p) { return fs::is_directory(p) && fs::exists(p / "config.json"); },
     inspect_hf},
};

nlohmann::json rows_json(const std::vector<TensorRow>& rows) {
  nlohmann::json a = nlohmann::json::array();
  for (const TensorRow& r : rows) a.push_back({{"name", r.name}, {"shape", r.shape}, {"dtype", r.dtype}});
  return a;
}

void print_text(const std::string& path, const Summary& s, bool all) {
  std::printf("%s: %s\n", path.c_str(), s.format.c_str());
  for (const auto& [k, v] : s.facts) std::printf("  %s: %s\n", k.c_str(), v.c_str());
  auto rows = [&](const char* title, const std::vector<TensorRow>& r, size_t limit) {
    std::printf("%s (%zu):\n", title, r.size());
    for (size_t i = 0; i < r.size() && i < limit; ++i)
      std::printf("  %-40s %-20s %s\n", r[i].name.c_str(), shape_text(r[i].shape).c_str(),
                  r[i].dtype.c_str());
    if (r.size() > limit) std::printf("  ... %zu more (--all lists them)\n", r.size() - limit);
  };
  rows("inputs", s.inputs, SIZE_MAX);
  rows("outputs", s.outputs, SIZE_MAX);
  rows("parameters", s.parameters, all ? SIZE_MAX : 20);
  std::vector<std::pair<std::string, size_t>> ops(s.ops.begin(), s.ops.end());
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::printf("ops (%zu kinds):\n", ops.size());
  for (const auto& [op, n] : ops) std::printf("  %-24s %zu\n", op.c_str(), n);
  if (s.unsupported.empty())
    std::printf("unsupported: none\n");
  else {
    std::printf("unsupported (%zu):\n", s.unsupported.size());
    for (const std::string& u : s.unsupported) std::printf("  %s\n", u.c_str());
  }
  if (!s.note.empty()) std::printf("note: %s\n", s.note.c_str());
}

int inspect_main(int argc, char** argv) {
  std::string path;
  bool json = false, all = false;
  const std::string program = argv[0];
  std::string formats;
  for (const Inspector& i : kInspectors) formats += (formats.empty() ? "" : ", ") + std::string(i.format);
  Flags f(
      program,
      "Lists what a model file holds — inputs, outputs, parameters (name, shape, dtype), an op histogram —\n"
      "and what of it meganeura cannot run. Formats: " +
          formats + " (a folder with config.json).");
  f.positional("FILE", path, "a .onnx, .gguf or .safetensors file, or a Hugging Face model folder");
  f.flag("--all", all, "list every parameter (the text lists the first 20)");
  f.flag("--json", json, "one JSON object on stdout");
  return run(f, argc, argv, [&] {
    std::error_code ec;
    if (!fs::exists(path, ec))
      throw ConfigError("[" + program + "] expected an existing FILE, got '" + path + "'");
    for (const Inspector& i : kInspectors) {
      if (!i.accepts(path)) continue;
      const Summary s = i.inspect(path);
      if (!json) {
        print_text(path, s, all);
        return 0;
      }
      nlohmann::json facts = nlohmann::json::object();
      for (const auto& [k, v] : s.facts) facts[k] = v;
      json_line(nlohmann::json{
          {"file", path},
          {"format", s.format},
          {"facts", facts},
          {"inputs", rows_json(s.inputs)},
          {"outputs", rows_json(s.outputs)},
          {"parameters", rows_json(s.parameters)},
          {"ops", s.ops},
          {"unsupported", s.unsupported},
          {"note",
           s.note}}.dump());
      return 0;
    }
    throw ConfigError("[" + program + "] expected a model in one of the formats " + formats + ", got '" +
                      path + "'");
  });
}

const bool registered = register_command(
    {"inspect",
     "inputs, outputs, parameters, ops and what is unsupported in an .onnx/.gguf/.safetensors/HF model",
     inspect_main});

}  // namespace
}  // namespace meganeura::cli
