#pragma once
// Float64 finite-difference gradient checks against the CPU reference interpreter, shared by the op tests.
//
//   gradcheck(g, loss, feeds, wrt)   autodiff's gradients of `loss` w.r.t. the named leaves `wrt` vs central
//                                    differences of the reference interpreter.
//   gradcheck_op(label, build, specs) places an op mid-graph: every differentiable operand i is
//                                    x_i * w_i + c_i (w_i a parameter), the op's result y is reduced as
//                                    sum(y * r) with a random r, so the op's VJP sees a non-trivial incoming
//                                    gradient and its result is chained into the parameters' gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "meganeura/autodiff/autodiff.hpp"
#include "meganeura/ir/graph.hpp"
#include "meganeura/reference/interpreter.hpp"

namespace meganeura::test {

inline HostTensor random_tensor(const Shape& shape, std::mt19937_64& rng, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> d(lo, hi);
  HostTensor t(shape);
  for (double& v : t.data) v = d(rng);
  return t;
}

struct GradcheckOptions {
  double eps = 1e-6;  // central-difference step
  double atol = 1e-6;
  double rtol = 1e-5;
};

inline ::testing::AssertionResult gradcheck(const Graph& g, NodeId loss, const reference::Feeds& feeds,
                                            const std::vector<NodeId>& wrt, GradcheckOptions opt = {}) {
  Graph dg = differentiate(g, loss, wrt);
  std::vector<NodeId> grads;
  for (NodeId w : wrt) {
    auto gr = dg.gradient(w);
    if (!gr) return ::testing::AssertionFailure() << "no gradient registered for %" << w.v;
    grads.push_back(*gr);
  }
  std::vector<HostTensor> analytic = reference::evaluate(dg, feeds, grads);
  for (size_t k = 0; k < wrt.size(); ++k) {
    const std::string& name = g.node(wrt[k]).prov.name;
    if (!feeds.count(name)) return ::testing::AssertionFailure() << "no feed for '" << name << "'";
    reference::Feeds f = feeds;
    HostTensor& t = f.at(name);
    for (size_t i = 0; i < t.size(); ++i) {
      double orig = t[i];
      t[i] = orig + opt.eps;
      double up = reference::evaluate(g, f, loss).data[0];
      t[i] = orig - opt.eps;
      double down = reference::evaluate(g, f, loss).data[0];
      t[i] = orig;
      double numeric = (up - down) / (2 * opt.eps);
      double a = analytic[k][i];
      if (!(std::fabs(a - numeric) <= opt.atol + opt.rtol * std::fabs(numeric)))
        return ::testing::AssertionFailure() << "d loss / d " << name << "[" << i << "]: autodiff " << a
                                             << ", finite difference " << numeric << "\n"
                                             << dg.to_text();
    }
  }
  return ::testing::AssertionSuccess();
}

// One operand of the op under test.
struct InputSpec {
  Shape shape;
  double lo = -1.0, hi = 1.0;  // range of the operand's values
  bool differentiable = true;  // false: fed as a plain input (labels, masks, indices)
  DType dtype = DType::F32;
  std::function<HostTensor(std::mt19937_64&)> values = {};  // custom values for a non-differentiable operand
};

using OpBuilder = std::function<NodeId(Graph&, const std::vector<NodeId>&)>;

// The op under test placed mid-graph: every differentiable operand i is x_i * w_i + c_i (w_i a parameter),
// the op's value is named "y", and loss = sum(y * r) with a random input r.
struct PlacedOp {
  Graph g;
  reference::Feeds feeds;
  std::vector<NodeId> params;  // the w_i
  NodeId y, loss;
};

inline PlacedOp place_op(const OpBuilder& build, const std::vector<InputSpec>& specs, std::mt19937_64& rng) {
  PlacedOp p;
  Graph& g = p.g;
  std::vector<NodeId> operands;
  for (size_t i = 0; i < specs.size(); ++i) {
    const InputSpec& s = specs[i];
    std::string n = std::to_string(i);
    if (!s.differentiable) {
      NodeId x = g.input("in" + n, s.shape, s.dtype);
      p.feeds["in" + n] = s.values ? s.values(rng) : random_tensor(s.shape, rng, s.lo, s.hi);
      if (s.dtype == DType::I32 && !s.values)
        for (double& v : p.feeds["in" + n].data) v = std::floor(v);
      operands.push_back(x);
      continue;
    }
    // x * w + c with w near 1 and c near 0 keeps the operand inside [lo, hi] (up to ~10%).
    NodeId x = g.input("x" + n, s.shape, s.dtype);
    NodeId w = g.parameter("w" + n, s.shape, s.dtype);
    NodeId c = g.input("c" + n, s.shape, s.dtype);
    double mid = 0.5 * (s.lo + s.hi), half = 0.5 * (s.hi - s.lo);
    p.feeds["x" + n] = random_tensor(s.shape, rng, mid - 0.9 * half, mid + 0.9 * half);
    p.feeds["w" + n] = random_tensor(s.shape, rng, 0.95, 1.05);
    p.feeds["c" + n] = random_tensor(s.shape, rng, -0.02 * half, 0.02 * half);
    operands.push_back(g.add(g.mul(x, w), c));
    p.params.push_back(w);
  }
  p.y = g.named(build(g, operands), "y");
  NodeId r = g.input("r", g.node(p.y).shape, g.node(p.y).dtype);
  p.feeds["r"] = random_tensor(g.node(p.y).shape, rng, -1.0, 1.0);
  p.loss = g.sum(g.mul(p.y, r));
  return p;
}

inline ::testing::AssertionResult gradcheck_op(const std::string& label, const OpBuilder& build,
                                               const std::vector<InputSpec>& specs, GradcheckOptions opt = {},
                                               uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  PlacedOp p = place_op(build, specs, rng);
  auto res = gradcheck(p.g, p.loss, p.feeds, p.params, opt);
  if (!res) return ::testing::AssertionFailure() << label << ": " << res.message();
  return res;
}

}  // namespace meganeura::test
