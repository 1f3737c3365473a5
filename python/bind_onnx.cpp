// ONNX from Python: load_onnx(path, dims=...) → OnnxModel, whose `graph` is an ordinary Graph (append a loss
// to fine-tune: initializers are parameters) and whose build_* methods make a session and load the
// initializers' values into it.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <set>

#include "bindings.hpp"
#include "meganeura/onnx/onnx.hpp"

namespace meganeura::python {

using namespace nb::literals;

namespace {

nb::list value_infos(const std::vector<OnnxValueInfo>& infos) {
  nb::list out;
  for (const auto& v : infos) {
    nb::dict d;
    d["name"] = v.name;
    d["shape"] = v.shape;
    d["dtype"] = dtype_name(v.dtype);
    d["elem_type"] = v.elem_type;
    out.append(d);
  }
  return out;
}

// The initializers' values into every parameter of the session's graph that has one. A parameter the user
// added keeps its seeded start; an initializer the final graph no longer reads (a head replaced by the user)
// is skipped.
void load_initializers(const OnnxModel& m, Session& s) {
  std::set<std::string> wanted;
  for (NodeId p : s.graph().parameters()) wanted.insert(s.graph().node(p).prov.name);
  for (const auto& [name, values] : m.parameters)
    if (wanted.count(name)) s.set_parameter(name, values);
}

PySession build_loaded(const OnnxModel& m, const SessionConfig& c) {
  Session s = [&] {
    nb::gil_scoped_release release;  // compiles shaders
    return build(m.graph, c);
  }();
  load_initializers(m, s);
  return wrap_session(std::move(s));
}

}  // namespace

void bind_onnx(nb::module_& m) {
  nb::class_<OnnxModel>(m, "OnnxModel")
      .def_prop_ro(
          "graph", [](OnnxModel& o) -> Graph& { return o.graph; }, nb::rv_policy::reference_internal,
          "The lowered Graph (its outputs are the file's outputs); add nodes to it before building.")
      .def_prop_ro("inputs", [](const OnnxModel& o) { return value_infos(o.inputs); })
      .def_prop_ro("outputs", [](const OnnxModel& o) { return value_infos(o.outputs); })
      .def_prop_ro("opset", [](const OnnxModel& o) { return o.opset; })
      .def_prop_ro("op_histogram", [](const OnnxModel& o) { return o.op_histogram; })
      .def_prop_ro(
          "parameters",
          [](nb::handle self) {
            const OnnxModel& o = nb::cast<const OnnxModel&>(self);
            const Graph& g = o.graph;
            nb::dict out;
            for (const auto& [name, values] : o.parameters) {
              Shape shape{int64_t(values.size())};
              for (NodeId p : g.parameters())
                if (g.node(p).prov.name == name) shape = g.node(p).shape;
              std::vector<size_t> dims(shape.begin(), shape.end());
              out[name.c_str()] =
                  nb::ndarray<nb::numpy, const float>(values.data(), dims.size(), dims.data(), self);
            }
            return out;
          },
          "The initializers' values by parameter name: read-only arrays over the model's memory (no copy).")
      .def(
          "build", [](const OnnxModel& o, const SessionConfig& c) { return build_loaded(o, c); }, "config"_a,
          "build(graph, config), then the initializers' values into its parameters.")
      .def(
          "build_session", [](const OnnxModel& o) { return build_loaded(o, SessionConfig::from_env()); },
          "A training session (config from the environment) starting from the initializers.")
      .def(
          "build_inference_session",
          [](const OnnxModel& o) {
            SessionConfig c = SessionConfig::from_env();
            c.training = false;
            c.optimizer.kind = OptimizerKind::None;
            return build_loaded(o, c);
          },
          "An inference session starting from the initializers.")
      .def(
          "load_initializers", [](const OnnxModel& o, PySession& s) { load_initializers(o, s.get()); },
          "session"_a, "The initializers' values into a session built from this model's graph (a reset).");

  m.def(
      "load_onnx",
      [](const std::string& path, const std::map<std::string, int64_t>& dims,
         bool initializers_as_constants) {
        OnnxOptions o;
        o.dims = dims;
        o.initializers_as_constants = initializers_as_constants;
        nb::gil_scoped_release release;
        return load_onnx(path, o);
      },
      "path"_a, "dims"_a = std::map<std::string, int64_t>{}, "initializers_as_constants"_a = false,
      "An ONNX file lowered into a Graph. dims binds symbolic input dimensions by name; float initializers "
      "become parameters (fine-tunable) unless initializers_as_constants. Raises ValueError listing every "
      "node that could not be lowered.");
  m.def("onnx_supported_ops", &onnx_supported_ops);
}

}  // namespace meganeura::python
