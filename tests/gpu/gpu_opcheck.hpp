#pragma once
// GPU checks shared by the op tests (include after gpu_fixture.hpp's GpuTest is in scope).
//
//   session_config(training)    the environment's config with a per-process shader cache
//   shared_device()             the fixture's device, borrowed by sessions
//   check_forward_gpu(g, ...)   g's outputs on the GPU vs the float64 CPU reference
//   build_gpu(g, training, options)  a session on the shared device with a process-wide kernel cache
//   check_op_gpu(label, build, specs, tol, seed, options)
//       places an op mid-graph with tests/cpu/gradcheck.hpp's place_op (differentiable operand
//       i = x_i * w_i + c_i with w_i a parameter, loss = sum(y * r) with a random r), compiles it
//       into a forward+backward session (no optimizer) and checks
//         1. the op's value y and every gradient d loss / d w_i against the CPU reference of the same
//            differentiated graph (|gpu - ref| <= atol + rtol |ref|);
//         2. a gradcheck through the compiled GPU session: for each w_i, the central difference of the
//            GPU's own loss along a random ±1 direction d vs <gpu grad_i, d>.
//       The forward-only session used for 2 is checked against the reference too (it fuses differently).
//   Integer operands (labels, indices) come from InputSpec::values or are floored random values. Feeds are
//   rounded to f32 before the reference sees them, so both sides compute on the same inputs.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../cpu/gradcheck.hpp"
#include "gpu_fixture.hpp"
#include "meganeura/autodiff/autodiff.hpp"
#include "meganeura/reference/interpreter.hpp"
#include "meganeura/session/pipeline.hpp"

namespace meganeura::test {

inline std::shared_ptr<runtime::Device> shared_device() {
  // The fixture owns the device for the whole process; sessions borrow it.
  return std::shared_ptr<runtime::Device>(&gpu_device(), [](runtime::Device*) {});
}

inline SessionConfig session_config(bool training) {
  SessionConfig c = gpu_config();
  static const std::string cache = [] {
    auto dir = std::filesystem::temp_directory_path() / ("meganeura-test-gpu-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    return dir.string();
  }();
  c.cache_dir = cache;  // fresh per process: results never depend on an earlier run
  c.training = training;
  c.dump_plan.clear();
  c.optimizer.kind = OptimizerKind::None;
  return c;
}

struct GpuTolerance {
  double atol = 1e-5, rtol = 1e-4;  // GPU vs float64 reference (values and gradients)
  double fd_eps = 1e-3;             // step of the GPU finite difference (w_i are near 1)
  double fd_rtol = 2e-2;            // |fd - <g,d>| <= fd_rtol |<g,d>| + fd_noise sum_i |g_i| + fd_atol
  double fd_noise = 1e-3;
  double fd_atol = 1e-3;
  bool finite_difference = true;  // off where the loss jumps (comparisons, sign) or autodiff is meant
                                  // to differ from the derivative (stop_gradient)
};

inline ::testing::AssertionResult close_to(const std::vector<float>& got, const HostTensor& want, double atol,
                                           double rtol, const std::string& what) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << what << ": " << got.size() << " values from the GPU, reference has " << want.size();
  size_t bad = 0;
  std::ostringstream os;
  for (size_t i = 0; i < got.size(); ++i) {
    double tol = atol + rtol * std::fabs(want[i]);
    if (!(std::fabs(double(got[i]) - want[i]) <= tol) && bad++ < 5)
      os << "\n  " << what << "[" << i << "]: gpu " << got[i] << " vs reference " << want[i];
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " values of " << what << " differ:" << os.str();
}

// One kernel cache for every session of the process (the device lives as long): lavapipe JIT-compiles each
// pipeline, which dominates building many small sessions.
inline KernelCache& shared_kernels() {
  static KernelCache cache;
  return cache;
}

inline Session build_gpu(const Graph& g, bool training, CompileOptions options = {}) {
  options.cache = &shared_kernels();
  return build_with(g, session_config(training), shared_device(), options);
}

// The GPU sees float32 inputs: round the reference's feeds the same way, so both compute on equal values.
inline void round_to_float(reference::Feeds& feeds) {
  for (auto& [name, t] : feeds)
    for (double& v : t.data) v = double(float(v));
}

inline void feed(Session& s, const Graph& g, NodeId leaf, const HostTensor& t) {
  const Node& nd = g.node(leaf);
  if (nd.dtype == DType::I32) {
    std::vector<int32_t> v(t.data.begin(), t.data.end());
    s.set_input(nd.prov.name, v);
  } else if (nd.op == Op::Parameter) {
    std::vector<float> v(t.data.begin(), t.data.end());
    s.set_parameter(nd.prov.name, v);
  } else {
    std::vector<float> v(t.data.begin(), t.data.end());
    s.set_input(nd.prov.name, v);
  }
}

inline void feed_all(Session& s, const Graph& g, const reference::Feeds& feeds) {
  for (NodeId n : g.inputs()) feed(s, g, n, feeds.at(g.node(n).prov.name));
  for (NodeId n : g.parameters()) feed(s, g, n, feeds.at(g.node(n).prov.name));
}

// g's outputs on the GPU (inference session) vs the CPU reference, with the given feeds.
inline ::testing::AssertionResult check_forward_gpu(const Graph& g, const reference::Feeds& feeds,
                                                    const std::string& what, double atol = 1e-5,
                                                    double rtol = 1e-4) {
  reference::Feeds rounded = feeds;
  round_to_float(rounded);
  Session s = build_gpu(g, false);
  feed_all(s, g, rounded);
  s.run();
  auto want = reference::evaluate_outputs(g, rounded);
  for (size_t i = 0; i < want.size(); ++i) {
    auto r = close_to(s.read_output(i), want[i], atol, rtol, what + " output " + std::to_string(i));
    if (!r) return r;
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult check_op_gpu(const std::string& label, const test::OpBuilder& build_op,
                                               const std::vector<test::InputSpec>& specs,
                                               GpuTolerance tol = {}, uint64_t seed = 1,
                                               const CompileOptions& options = {}) {
  std::mt19937_64 rng(seed);
  test::PlacedOp placed = test::place_op(build_op, specs, rng);
  Graph& g = placed.g;
  reference::Feeds& feeds = placed.feeds;
  const std::vector<NodeId>& params = placed.params;
  const NodeId y = placed.y, loss = placed.loss;
  round_to_float(feeds);
  g.set_outputs({loss, y});

  // 1. values and gradients against the reference of the differentiated graph
  Graph dg = differentiate(g, loss, params);
  std::vector<NodeId> want_nodes{loss, y};
  for (NodeId p : params) want_nodes.push_back(*dg.gradient(p));
  std::vector<HostTensor> want = reference::evaluate(dg, feeds, want_nodes);

  // The forward-only session fuses differently (nothing is kept for a backward pass): check it too.
  Session f = build_gpu(g, false, options);
  feed_all(f, g, feeds);
  f.run();
  for (size_t o = 0; o < 2; ++o) {
    auto r = close_to(f.read_output(o), want[o], tol.atol, tol.rtol,
                      label + (o ? " value" : " loss") + " (forward session)");
    if (!r) return r;
  }
  Session s = build_gpu(g, !params.empty(), options);
  feed_all(s, g, feeds);
  s.run();
  for (size_t o = 0; o < 2; ++o) {
    auto r = close_to(s.read_output(o), want[o], tol.atol, tol.rtol, label + (o ? " value" : " loss"));
    if (!r) return r;
  }
  std::vector<std::vector<float>> grads;
  for (size_t k = 0; k < params.size(); ++k) {
    const std::string& pname = g.node(params[k]).prov.name;
    grads.push_back(s.read_gradient(pname));
    auto rk = close_to(grads.back(), want[2 + k], tol.atol, tol.rtol, label + " d loss/d " + pname);
    if (!rk) return rk;
  }
  if (params.empty() || !tol.finite_difference) return ::testing::AssertionSuccess();

  // 2. finite differences of the GPU's own forward pass
  for (size_t k = 0; k < params.size(); ++k) {
    const std::string& pname = g.node(params[k]).prov.name;
    const HostTensor& w = feeds.at(pname);
    std::vector<float> d(w.size());
    std::bernoulli_distribution coin(0.5);
    double dot = 0, scale = 0;
    for (size_t i = 0; i < d.size(); ++i) {
      d[i] = coin(rng) ? 1.0f : -1.0f;
      dot += double(grads[k][i]) * d[i];
      scale += std::fabs(double(grads[k][i]));
    }
    auto loss_at = [&](double sign) {
      std::vector<float> v(w.size());
      for (size_t i = 0; i < v.size(); ++i) v[i] = float(w[i] + sign * tol.fd_eps * d[i]);
      f.set_parameter(pname, v);
      f.run();
      return double(f.read_output(0).at(0));
    };
    double fd = (loss_at(1) - loss_at(-1)) / (2 * tol.fd_eps);
    std::vector<float> orig(w.data.begin(), w.data.end());
    f.set_parameter(pname, orig);
    // A step of fd_eps can cross a kink of a piecewise op (minimum, maximum, relu, abs: about one of 2000
    // elements is within a step of its tie), and then the central difference differs from any gradient by a
    // bias the GPU has no part in. The float64 reference takes the same steps, so its own difference minus
    // its own gradient is that bias, and the GPU's must match it.
    auto ref_loss_at = [&](double sign) {
      reference::Feeds moved = feeds;
      for (size_t i = 0; i < d.size(); ++i)
        moved.at(pname).data[i] = double(float(w[i] + sign * tol.fd_eps * d[i]));
      return reference::evaluate(g, moved, std::vector<NodeId>{loss})[0][0];
    };
    double ref_dot = 0;
    for (size_t i = 0; i < d.size(); ++i) ref_dot += want[2 + k][i] * d[i];
    const double kink = (ref_loss_at(1) - ref_loss_at(-1)) / (2 * tol.fd_eps) - ref_dot;
    // The f32 loss carries rounding noise proportional to the gradient's size (fd_noise * sum |g|); a ±1
    // direction makes <g, d> only ~sqrt(n) times one |g_i|, so the relative part is taken of <g, d> itself.
    if (!(std::fabs(fd - dot - kink) <= tol.fd_rtol * std::fabs(dot) + tol.fd_noise * scale + tol.fd_atol))
      return ::testing::AssertionFailure()
             << label << ": GPU finite difference of the loss along a ±1 direction in " << pname << " is "
             << fd << ", GPU gradient gives " << dot << " and the reference's kink bias " << kink
             << " (sum |g| = " << scale << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace meganeura::test
