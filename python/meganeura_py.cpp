// Python bindings (nanobind): graphs, sessions, the Trainer and its data, with NumPy arrays in and out. The
// loaders (GGUF, Hugging Face, tokenizers, generation) are bound in bind_models.cpp, ONNX in bind_onnx.cpp;
// what is copied and what is not: bindings.hpp.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>

#include "bindings.hpp"
#include "meganeura/core/import_error.hpp"
#include "meganeura/runtime/device.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using namespace meganeura;
using namespace meganeura::python;

namespace {

using F32In = nb::ndarray<const float, nb::numpy, nb::c_contig, nb::device::cpu>;
using I32In = nb::ndarray<const int32_t, nb::numpy, nb::c_contig, nb::device::cpu>;

const Node* node_by_name(const Graph& g, const std::vector<NodeId>& nodes, const std::string& name) {
  for (NodeId n : nodes)
    if (g.node(n).prov.name == name) return &g.node(n);
  return nullptr;
}

std::vector<std::string> names_of(const Graph& g, const std::vector<NodeId>& nodes) {
  std::vector<std::string> out;
  for (NodeId n : nodes) out.push_back(g.node(n).prov.name);
  return out;
}

// `a` as a C-contiguous NumPy array of `dtype`: the same object when it already is one (no copy).
nb::object contiguous(nb::handle a, const char* dtype) {
  return nb::module_::import_("numpy").attr("ascontiguousarray")(a, "dtype"_a = dtype);
}

struct PyTrainer {
  std::unique_ptr<Trainer> trainer;
  PySession view;
};

std::shared_ptr<TensorDataset> dataset_from(
    const std::map<std::string, nb::ndarray<nb::numpy, nb::c_contig, nb::device::cpu>>& columns) {
  auto ds = std::make_shared<TensorDataset>();
  for (const auto& [name, a] : columns) {
    if (a.ndim() < 1)
      throw ConfigError("[DataLoader] expected column '" + name + "' to have a row axis, got a scalar");
    Shape example;
    size_t count = 1;
    for (size_t d = 0; d < a.ndim(); ++d) {
      if (d > 0) example.push_back(static_cast<int64_t>(a.shape(d)));
      count *= a.shape(d);
    }
    if (a.dtype() == nb::dtype<float>()) {
      const float* p = static_cast<const float*>(a.data());
      ds->add_f32(name, example, std::vector<float>(p, p + count));
    } else if (a.dtype() == nb::dtype<int32_t>()) {
      const int32_t* p = static_cast<const int32_t*>(a.data());
      ds->add_i32(name, example, std::vector<int32_t>(p, p + count));
    } else {
      throw ConfigError("[DataLoader] expected column '" + name + "' as float32 or int32, got another dtype");
    }
  }
  return ds;
}

nb::dict epoch_dict(const EpochRecord& r) {
  nb::dict d;
  d["epoch"] = r.epoch + 1;
  d["train_loss"] = r.train_loss;
  d["steps"] = r.steps;
  d["seconds"] = r.seconds;
  d["steps_per_s"] = r.steps_per_s;
  if (r.test_loss) d["test_loss"] = *r.test_loss;
  if (r.test_accuracy) d["test_accuracy"] = *r.test_accuracy;
  return d;
}

}  // namespace

NB_MODULE(_meganeura, m) {
  m.doc() = "meganeura: neural-network training and inference on any Vulkan GPU";
  m.attr("__version__") = MEGANEURA_VERSION;

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const ShapeError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const ConfigError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const FormatError& e) {  // a malformed or unsupported file, named with its field
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const DataError& e) {  // a malformed tokenizer or data file
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const ImportError& e) {  // every ONNX node that could not be lowered
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  nb::enum_<Precision>(m, "Precision")
      .value("F32", Precision::F32)
      .value("Mixed16", Precision::Mixed16)
      .value("F16", Precision::F16)
      .value("BF16", Precision::BF16);
  nb::enum_<OptimizerKind>(m, "Optimizer")
      .value("None_", OptimizerKind::None)
      .value("SGD", OptimizerKind::Sgd)
      .value("Adam", OptimizerKind::Adam)
      .value("AdamW", OptimizerKind::AdamW)
      .value("LaProp", OptimizerKind::LaProp);
  nb::enum_<ParameterInit>(m, "ParameterInit")
      .value("Seeded", ParameterInit::Seeded)
      .value("Zeros", ParameterInit::Zeros);

  nb::class_<NodeId>(m, "Node")
      .def_prop_ro("index", [](NodeId n) { return n.v; })
      .def("__repr__", [](NodeId n) { return "<meganeura.Node " + std::to_string(n.v) + ">"; });

  nb::class_<Graph>(m, "Graph")
      .def(nb::init<>())
      .def(
          "input",
          [](Graph& g, const std::string& name, Shape shape) { return g.input(name, std::move(shape)); },
          "name"_a, "shape"_a)
      .def(
          "parameter",
          [](Graph& g, const std::string& name, Shape shape) { return g.parameter(name, std::move(shape)); },
          "name"_a, "shape"_a)
      .def("scalar", [](Graph& g, double v) { return g.scalar(v); })
      .def("named", [](Graph& g, NodeId x, const std::string& name) { return g.named(x, name); })
      .def("set_outputs", [](Graph& g, std::vector<NodeId> outs) { g.set_outputs(std::move(outs)); })
      .def(
          "matmul", [](Graph& g, NodeId a, NodeId b, bool ta, bool tb) { return g.matmul(a, b, ta, tb); },
          "a"_a, "b"_a, "transpose_a"_a = false, "transpose_b"_a = false)
      .def("add", [](Graph& g, NodeId a, NodeId b) { return g.add(a, b); })
      .def("sub", [](Graph& g, NodeId a, NodeId b) { return g.sub(a, b); })
      .def("mul", [](Graph& g, NodeId a, NodeId b) { return g.mul(a, b); })
      .def("div", [](Graph& g, NodeId a, NodeId b) { return g.div(a, b); })
      .def("relu", [](Graph& g, NodeId x) { return g.relu(x); })
      .def("gelu", [](Graph& g, NodeId x) { return g.gelu(x); })
      .def("silu", [](Graph& g, NodeId x) { return g.silu(x); })
      .def("sigmoid", [](Graph& g, NodeId x) { return g.sigmoid(x); })
      .def("tanh", [](Graph& g, NodeId x) { return g.tanh(x); })
      .def("exp", [](Graph& g, NodeId x) { return g.exp(x); })
      .def("log", [](Graph& g, NodeId x) { return g.log(x); })
      .def(
          "softmax", [](Graph& g, NodeId x, int64_t axis) { return g.softmax(x, axis); }, "x"_a,
          "axis"_a = -1)
      .def(
          "sum",
          [](Graph& g, NodeId x, std::vector<int64_t> axes, bool keepdim) { return g.sum(x, axes, keepdim); },
          "x"_a, "axes"_a = std::vector<int64_t>{}, "keepdim"_a = false)
      .def(
          "mean",
          [](Graph& g, NodeId x, std::vector<int64_t> axes, bool keepdim) {
            return g.mean(x, axes, keepdim);
          },
          "x"_a, "axes"_a = std::vector<int64_t>{}, "keepdim"_a = false)
      .def("reshape", [](Graph& g, NodeId x, Shape s) { return g.reshape(x, std::move(s)); })
      .def(
          "transpose", [](Graph& g, NodeId x, int64_t a, int64_t b) { return g.transpose(x, a, b); }, "x"_a,
          "a"_a = -2, "b"_a = -1)
      .def("cross_entropy_loss",
           [](Graph& g, NodeId logits, NodeId targets) { return g.cross_entropy_loss(logits, targets); })
      .def("mse_loss", [](Graph& g, NodeId p, NodeId t) { return g.mse_loss(p, t); })
      .def("shape", [](const Graph& g, NodeId n) { return g.node(n).shape; })
      .def("name_of", [](const Graph& g, NodeId n) { return g.node(n).prov.name; })
      .def_prop_ro("outputs", [](const Graph& g) { return g.outputs(); })
      .def_prop_ro("inputs", [](const Graph& g) { return g.inputs(); })
      .def_prop_ro("parameters", [](const Graph& g) { return g.parameters(); })
      .def("__len__", &Graph::size)
      .def("to_text", &Graph::to_text);

  nb::class_<SessionConfig>(m, "SessionConfig")
      .def(nb::init<>())
      .def_static("from_env", &SessionConfig::from_env)
      .def_rw("training", &SessionConfig::training)
      .def_rw("precision", &SessionConfig::precision)
      .def_rw("init", &SessionConfig::init)
      .def_rw("seed", &SessionConfig::seed)
      .def_rw("validation", &SessionConfig::validation)
      .def_rw("keep_gradients", &SessionConfig::keep_gradients)
      .def_prop_rw(
          "optimizer", [](const SessionConfig& c) { return c.optimizer.kind; },
          [](SessionConfig& c, OptimizerKind k) { c.optimizer.kind = k; })
      .def_prop_rw(
          "learning_rate", [](const SessionConfig& c) { return c.optimizer.learning_rate; },
          [](SessionConfig& c, double lr) { c.optimizer.learning_rate = lr; });

  nb::class_<PySession>(m, "Session")
      .def(
          "set_input",
          [](PySession& s, const std::string& name, nb::handle a) {
            Session& x = s.get();
            const Node* in = node_by_name(x.graph(), x.graph().inputs(), name);
            if (in && in->dtype == DType::I32) {
              auto v = nb::cast<I32In>(contiguous(a, "int32"));
              x.set_input(name, std::span<const int32_t>(v.data(), v.size()));
            } else {
              auto v = nb::cast<F32In>(contiguous(a, "float32"));
              x.set_input(name, std::span<const float>(v.data(), v.size()));
            }
          },
          "name"_a, "array"_a,
          "The input's values from any array-like: read in place when C-contiguous float32 (int32 for an "
          "integer input), else converted by NumPy first.")
      .def(
          "set_parameter",
          [](PySession& s, const std::string& name, nb::handle a) {
            auto v = nb::cast<F32In>(contiguous(a, "float32"));
            s.get().set_parameter(name, std::span<const float>(v.data(), v.size()));
          },
          "name"_a, "array"_a)
      .def(
          "read_parameter",
          [](PySession& s, const std::string& name) {
            Session& x = s.get();
            const Node* p = node_by_name(x.graph(), x.graph().parameters(), name);
            return to_numpy(x.read_parameter(name), p ? p->shape : Shape{});
          },
          "name"_a)
      .def(
          "read_gradient",
          [](PySession& s, const std::string& name) {
            Session& x = s.get();
            const Node* p = node_by_name(x.graph(), x.graph().parameters(), name);
            return to_numpy(x.read_gradient(name), p ? p->shape : Shape{});
          },
          "parameter"_a, "The last step's gradient of a parameter (training sessions).")
      .def("read_output",
           [](PySession& s, size_t i) {
             Session& x = s.get();
             std::vector<float> v = x.read_output(i);
             const Shape shape =
                 i < x.graph().outputs().size() ? x.graph().node(x.graph().outputs()[i]).shape : Shape{};
             return to_numpy(std::move(v), shape);
           })
      .def("read_output",
           [](PySession& s, const std::string& name) {
             Session& x = s.get();
             const Node* o = node_by_name(x.graph(), x.graph().outputs(), name);
             return to_numpy(x.read_output(name), o ? o->shape : Shape{});
           })
      .def_prop_ro("parameters",
                   [](PySession& s) { return names_of(s.get().graph(), s.get().graph().parameters()); })
      .def_prop_ro("inputs", [](PySession& s) { return names_of(s.get().graph(), s.get().graph().inputs()); })
      .def(
          "step", [](PySession& s) { return s.get().step(); }, nb::call_guard<nb::gil_scoped_release>())
      .def(
          "wait", [](PySession& s) { s.get().wait(); }, nb::call_guard<nb::gil_scoped_release>())
      .def(
          "run", [](PySession& s) { s.get().run(); }, nb::call_guard<nb::gil_scoped_release>())
      .def("set_learning_rate", [](PySession& s, double lr) { s.get().set_learning_rate(lr); })
      .def_prop_ro("device", [](PySession& s) { return s.get().caps().name; });

  m.def(
      "build_session",
      [](const Graph& g) { return wrap_session(released([&] { return build_session(g); })); }, "graph"_a,
      "A training session, configured from the environment (autodiff, rewrites, compile, GPU set-up).");
  m.def(
      "build_inference_session",
      [](const Graph& g) { return wrap_session(released([&] { return build_inference_session(g); })); },
      "graph"_a);
  m.def(
      "build",
      [](const Graph& g, const SessionConfig& c) {
        return wrap_session(released([&] { return build(g, c); }));
      },
      "graph"_a, "config"_a);

  nb::class_<TrainConfig>(m, "TrainConfig")
      .def(nb::init<>())
      .def(
          "__init__",
          [](TrainConfig* t, int epochs, int64_t batch_size, uint64_t seed, bool progress) {
            new (t) TrainConfig();
            t->epochs = epochs;
            t->batch_size = batch_size;
            t->seed = seed;
            t->progress = progress ? ProgressMode::Auto : ProgressMode::Off;
          },
          "epochs"_a = 10, "batch_size"_a = 32, "seed"_a = 0, "progress"_a = true)
      .def_rw("epochs", &TrainConfig::epochs)
      .def_rw("batch_size", &TrainConfig::batch_size)
      .def_rw("seed", &TrainConfig::seed);

  nb::class_<DataLoader>(m, "DataLoader")
      .def(
          "__init__",
          [](DataLoader* l,
             const std::map<std::string, nb::ndarray<nb::numpy, nb::c_contig, nb::device::cpu>>& columns,
             int64_t batch_size, bool shuffle, uint64_t seed) {
            LoaderOptions o;
            o.batch_size = batch_size;
            o.shuffle = shuffle;
            o.seed = seed;
            new (l) DataLoader(dataset_from(columns), o);
          },
          "columns"_a, "batch_size"_a = 32, "shuffle"_a = true, "seed"_a = 0,
          "Batches of {name: array with rows first} (float32 or int32), copied once into the loader.")
      .def("batches_per_epoch", &DataLoader::batches_per_epoch);

  nb::class_<PyTrainer>(m, "Trainer")
      .def(
          "__init__",
          [](PyTrainer* t, PySession& s, const TrainConfig& c) {
            if (!s.owned)
              throw ConfigError(
                  "[Trainer] expected a session of its own, got one already handed to a Trainer");
            new (t) PyTrainer();
            t->trainer = std::make_unique<Trainer>(std::move(*s.owned), c);
            s.owned.reset();
            t->view.lent = &static_cast<SessionTarget&>(t->trainer->target()).session();
          },
          "session"_a, "config"_a = TrainConfig{}, "Takes the session over (use trainer.session afterwards).")
      .def(
          "train",
          [](PyTrainer& t, DataLoader& loader, int epochs) {
            const History* h;
            {
              nb::gil_scoped_release release;
              h = &t.trainer->train(loader, epochs);
            }
            nb::list out;
            for (const EpochRecord& r : h->epochs) out.append(epoch_dict(r));
            return out;
          },
          "loader"_a, "epochs"_a = 0,
          "Trains; returns every epoch so far as a dict (train_loss, steps, ...).")
      .def("init_parameters", [](PyTrainer& t) { t.trainer->init_parameters(); })
      .def("save", [](PyTrainer& t, const std::string& path) { t.trainer->save(path); })
      .def("restore", [](PyTrainer& t, const std::string& path) { t.trainer->restore(path); })
      .def_prop_ro(
          "session", [](PyTrainer& t) -> PySession& { return t.view; }, nb::rv_policy::reference_internal);

  bind_models(m);
  bind_onnx(m);
}
