#pragma once
// Eager evaluation: the value of one node of a graph that is still being built, computed on the GPU by the
// same pipeline build_session runs (rewrite, schedule, codegen, the same kernels). The graph is only read:
// after inspecting values, the same Graph compiles unchanged for training.
//
//   Graph g;  eager::Eager ev;
//   auto x = g.input("x", {4, 8});  ev.set("x", data);
//   auto h = g.relu(g.matmul(x, w));
//   std::vector<float> hv = ev.eval(g, h);   // compiled once for this subgraph, then cached
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "meganeura/ir/graph.hpp"
#include "meganeura/session/session.hpp"

namespace meganeura::eager {

class Eager {
 public:
  // Opens the device SessionConfig::from_env() chooses.
  Eager();
  // On a device the caller opened; `config` supplies the rewrite mode, shader cache and validation.
  Eager(std::shared_ptr<runtime::Device> device, SessionConfig config);
  ~Eager();
  Eager(const Eager&) = delete;
  Eager& operator=(const Eager&) = delete;

  // The value fed to the input or parameter of that name in every later eval().
  void set(const std::string& name, std::span<const float> values);
  void set(const std::string& name, std::span<const int32_t> values);

  // Compiles (or finds in the cache, keyed by the structure of the subgraph `node` depends on) an inference
  // session whose one output is `node`, feeds it, runs it, and returns the value. Throws SessionError naming
  // any input or parameter the subgraph reads that has no value.
  std::vector<float> eval(const Graph& g, NodeId node);

  size_t compiled() const;  // subgraphs compiled so far (cache misses)

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace meganeura::eager
