#pragma once
// Private to nnef/: values of the NNEF evaluator and the table of primitive lowerings (ops.cpp).
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "meganeura/ir/graph.hpp"
#include "meganeura/nnef/nnef.hpp"
#include "meganeura/nnef/syntax.hpp"

namespace meganeura::nnef {

// An NNEF value: a literal, a tensor (a Graph node), an array or tuple of values, or the result of something
// that could not be lowered (Poison: whatever uses it is skipped, the cause is reported once).
struct Val {
  enum class K { None, Int, Real, Bool, Str, Tensor, Array, Tuple, Poison };
  K k = K::None;
  double num = 0;
  bool b = false;
  std::string s;
  NodeId node;
  std::vector<Val> items;

  static Val of(K k, double num = 0) {
    Val v;
    v.k = k;
    v.num = num;
    return v;
  }
  static Val integer(double v) { return of(K::Int, v); }
  static Val real(double v) { return of(K::Real, v); }
  static Val logical(bool b) {
    Val v = of(K::Bool);
    v.b = b;
    return v;
  }
  static Val str(std::string s) {
    Val v = of(K::Str);
    v.s = std::move(s);
    return v;
  }
  static Val tensor(NodeId n) {
    Val v = of(K::Tensor);
    v.node = n;
    return v;
  }
  static Val list(K k, std::vector<Val> items) {
    Val v = of(k);
    v.items = std::move(items);
    return v;
  }
  static Val poison() { return of(K::Poison); }
  bool numeric() const { return k == K::Int || k == K::Real; }
};

// Thrown by a lowering for what it cannot lower; the driver reports it with the op and the graph node.
struct Unsupported {
  std::string reason;
};

class Lowering;

// A primitive's arguments, bound by name to its declaration (defaults filled in).
struct Args {
  Lowering& L;
  Graph& g;
  const std::string& op;
  const std::string& generic;  // the call's <type>, or the declaration's default
  std::map<std::string, Val> v;

  const Val& at(const std::string& name) const;
  NodeId tensor(const std::string& name) const;  // a tensor, or a number as a scalar constant
  bool is_literal(const std::string& name) const { return at(name).numeric(); }
  std::vector<NodeId> tensors(const std::string& name) const;
  int64_t integer(const std::string& name) const;
  double real(const std::string& name) const;
  bool logical(const std::string& name) const;
  std::string str(const std::string& name) const;
  std::vector<int64_t> ints(const std::string& name) const;
  std::vector<std::pair<int64_t, int64_t>> pairs(const std::string& name) const;
  [[noreturn]] void unsupported(const std::string& why) const { throw Unsupported{why}; }
};

using OpFn = std::function<Val(Args&)>;
const std::map<std::string, OpFn>& primitives();
// The standard's fragment declarations (and the compound fragments' bodies) as NNEF text.
const char* standard_fragments();

// NNEF broadcasting: the lower-rank operand gets trailing singleton axes (a [1, C] bias against [N, C, H,
// W]).
std::pair<NodeId, NodeId> align(Graph& g, NodeId a, NodeId b);
// Shape values checked before they reach a Graph builder: each in [0, 2^31), the product below 2^40.
Shape checked_shape(const std::vector<int64_t>& dims, const std::string& what);

class Lowering {
 public:
  Lowering(NnefModel& model, const NnefTensorSource& source, const NnefOptions& options, std::string origin)
      : g(model.graph), model(model), source(source), options(options), origin(std::move(origin)) {}
  Graph& g;
  NnefModel& model;
  const NnefTensorSource& source;
  const NnefOptions& options;
  const std::string origin;
  std::string node;                         // the graph-body identifier being computed (names externals)
  std::map<std::string, NodeId> variables;  // by label: a label used twice is one parameter
};

}  // namespace meganeura::nnef
