// Python bindings (nanobind): graphs, sessions, the Trainer and its data, with NumPy arrays in and out.
// Inputs and parameters are read from the caller's array without a copy (C-contiguous float32/int32 arrays;
// anything else is converted by NumPy first); values read back arrive in a new array that owns the
// library's vector (moved, not copied).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>

#include "meganeura/meganeura.hpp"
#include "meganeura/runtime/device.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using namespace meganeura;

namespace {

using F32In = nb::ndarray<const float, nb::numpy, nb::c_contig, nb::device::cpu>;
using I32In = nb::ndarray<const int32_t, nb::numpy, nb::c_contig, nb::device::cpu>;

// A vector's values as a 1-D or shaped NumPy array that owns them.
nb::ndarray<nb::numpy, float> to_numpy(std::vector<float> v, const Shape& shape) {
  auto* owned = new std::vector<float>(std::move(v));
  nb::capsule free_it(owned, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  std::vector<size_t> dims(shape.begin(), shape.end());
  if (dims.empty() && owned->size() != 1) dims = {owned->size()};
  return nb::ndarray<nb::numpy, float>(owned->data(), dims.size(), dims.data(), free_it);
}

const Shape* shape_by_name(const Graph& g, const std::vector<NodeId>& nodes, const std::string& name) {
  for (NodeId n : nodes)
    if (g.node(n).prov.name == name) return &g.node(n).shape;
  return nullptr;
}

// A Session owned by Python, or one lent by the Trainer that took it over (kept alive by that Trainer).
struct PySession {
  std::unique_ptr<Session> owned;
  Session* lent = nullptr;
  Session& get() {
    if (owned) return *owned;
    if (lent) return *lent;
    throw SessionError(
        "[Session] expected a live session, got one handed to a Trainer (use trainer.session)");
  }
};

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
      .def_prop_rw(
          "optimizer", [](const SessionConfig& c) { return c.optimizer.kind; },
          [](SessionConfig& c, OptimizerKind k) { c.optimizer.kind = k; })
      .def_prop_rw(
          "learning_rate", [](const SessionConfig& c) { return c.optimizer.learning_rate; },
          [](SessionConfig& c, double lr) { c.optimizer.learning_rate = lr; });

  nb::class_<PySession>(m, "Session")
      .def("set_input", [](PySession& s, const std::string& name,
                           F32In a) { s.get().set_input(name, std::span<const float>(a.data(), a.size())); })
      .def("set_input",
           [](PySession& s, const std::string& name, I32In a) {
             s.get().set_input(name, std::span<const int32_t>(a.data(), a.size()));
           })
      .def("set_parameter",
           [](PySession& s, const std::string& name, F32In a) {
             s.get().set_parameter(name, std::span<const float>(a.data(), a.size()));
           })
      .def("read_parameter",
           [](PySession& s, const std::string& name) {
             Session& x = s.get();
             const Shape* shape = shape_by_name(x.graph(), x.graph().parameters(), name);
             return to_numpy(x.read_parameter(name), shape ? *shape : Shape{});
           })
      .def("read_output",
           [](PySession& s, size_t i) {
             Session& x = s.get();
             std::vector<float> v = x.read_output(i);
             const Shape shape =
                 i < x.graph().outputs().size() ? x.graph().node(x.graph().outputs()[i]).shape : Shape{};
             return to_numpy(std::move(v), shape);
           })
      .def("read_output",
           [](PySession& s, const std::string& name) { return to_numpy(s.get().read_output(name), {}); })
      .def(
          "step", [](PySession& s) { return s.get().step(); }, nb::call_guard<nb::gil_scoped_release>())
      .def(
          "wait", [](PySession& s) { s.get().wait(); }, nb::call_guard<nb::gil_scoped_release>())
      .def(
          "run", [](PySession& s) { s.get().run(); }, nb::call_guard<nb::gil_scoped_release>())
      .def("set_learning_rate", [](PySession& s, double lr) { s.get().set_learning_rate(lr); })
      .def_prop_ro("device", [](PySession& s) { return s.get().caps().name; });

  auto wrap = [](Session s) {
    PySession p;
    p.owned = std::make_unique<Session>(std::move(s));
    return p;
  };
  m.def(
      "build_session", [wrap](const Graph& g) { return wrap(build_session(g)); }, "graph"_a,
      "A training session, configured from the environment (autodiff, rewrites, compile, GPU set-up).");
  m.def(
      "build_inference_session", [wrap](const Graph& g) { return wrap(build_inference_session(g)); },
      "graph"_a);
  m.def(
      "build", [wrap](const Graph& g, const SessionConfig& c) { return wrap(build(g, c)); }, "graph"_a,
      "config"_a);

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
}
