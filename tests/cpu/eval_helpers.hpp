#pragma once
// Builds a one-op graph over given values and evaluates it with the CPU reference interpreter, for the
// hand-computed cases of the op tests.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "meganeura/autodiff/autodiff.hpp"
#include "meganeura/ir/graph.hpp"
#include "meganeura/reference/interpreter.hpp"

namespace meganeura::test {

struct Value {
  HostTensor t;
  DType dtype = DType::F32;
};

inline Value f32(Shape s, std::vector<double> d) {
  return {HostTensor(std::move(s), std::move(d)), DType::F32};
}
inline Value i32(Shape s, std::vector<double> d) {
  return {HostTensor(std::move(s), std::move(d)), DType::I32};
}

// 0, 1, 2, ... as a tensor of the given shape
inline Value iota(Shape s, double start = 0.0) {
  HostTensor t(std::move(s));
  for (size_t i = 0; i < t.size(); ++i) t[i] = start + double(i);
  return {t, DType::F32};
}

using Builder = std::function<NodeId(Graph&, const std::vector<NodeId>&)>;

inline HostTensor eval_op(const Builder& build, const std::vector<Value>& ins) {
  Graph g;
  reference::Feeds feeds;
  std::vector<NodeId> ids;
  for (size_t i = 0; i < ins.size(); ++i) {
    const std::string n = "in" + std::to_string(i);
    ids.push_back(g.input(n, ins[i].t.shape, ins[i].dtype));
    feeds[n] = ins[i].t;
  }
  return reference::evaluate(g, feeds, build(g, ids));
}

// Gradient of sum(op(ins) * upstream) w.r.t. input `wrt` (made a parameter).
inline HostTensor grad_op(const Builder& build, const std::vector<Value>& ins, size_t wrt,
                          const HostTensor& upstream) {
  Graph g;
  reference::Feeds feeds;
  std::vector<NodeId> ids;
  for (size_t i = 0; i < ins.size(); ++i) {
    const std::string n = "in" + std::to_string(i);
    ids.push_back(i == wrt ? g.parameter(n, ins[i].t.shape, ins[i].dtype)
                           : g.input(n, ins[i].t.shape, ins[i].dtype));
    feeds[n] = ins[i].t;
  }
  NodeId y = build(g, ids);
  NodeId up = g.input("upstream", g.node(y).shape);
  feeds["upstream"] = upstream;
  NodeId loss = g.sum(g.mul(y, up));
  Graph dg = differentiate(g, loss, {ids[wrt]});
  return reference::evaluate(dg, feeds, *dg.gradient(ids[wrt]));
}

inline ::testing::AssertionResult near_all(const HostTensor& got, const Shape& shape,
                                           const std::vector<double>& want, double tol = 1e-12) {
  if (got.shape != shape)
    return ::testing::AssertionFailure() << "shape " << shape_str(got.shape) << ", want " << shape_str(shape);
  if (got.data.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.data.size();
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::abs(got.data[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i]))))
      return ::testing::AssertionFailure() << "[" << i << "] got " << got.data[i] << ", want " << want[i];
  return ::testing::AssertionSuccess();
}

}  // namespace meganeura::test
