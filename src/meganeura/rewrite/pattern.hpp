#pragma once
// The pattern language shared by both rewrite drivers. A pattern is matched against a TermView, which is
// either a plain Graph (one node per value) or an e-graph (several equivalent nodes per value, called a
// class); a match binds capture names to value handles, so a rule's builder never knows which driver runs it.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "meganeura/ir/graph.hpp"

namespace meganeura::rewrite {

using Handle = uint32_t;  // a NodeId's value in the greedy driver, an e-class id in the saturation driver

struct TermNode {
  Op op;
  const Attrs* attrs;
  const std::vector<Handle>* kids;
};

// Read access to values. Implementations must enumerate nodes in a deterministic order.
class TermView {
 public:
  virtual ~TermView() = default;
  // calls fn for each node computing h until fn returns true; returns whether fn did
  virtual bool for_each_node(Handle h, const std::function<bool(const TermNode&)>& fn) const = 0;
  virtual Shape shape(Handle h) const = 0;  // by value: builders add nodes while holding it
  virtual DType dtype(Handle h) const = 0;
  // the value of every element when h is a Fill, or a Constant whose elements are all equal
  virtual std::optional<double> uniform_value(Handle h) const = 0;
  // the data when h is a Constant (or a Fill small enough to expand), else nullptr
  virtual const std::vector<float>* constant_data(Handle h) const = 0;
  bool is_constant(Handle h) const { return uniform_value(h) || constant_data(h); }
  bool has_op(Handle h, Op op) const;
};

// Write access: a rule's builder makes new values through this. make() returns nullopt when the op's shape
// rule rejects the inputs, so a builder may try a form and fall back.
class TermBuilder : public TermView {
 public:
  virtual std::optional<Handle> make(Op op, std::vector<Handle> kids, Attrs attrs) = 0;
  virtual Handle fill(double value, const Shape& shape, DType dtype) = 0;
  virtual Handle constant(std::vector<float> data, const Shape& shape) = 0;
};

// A pattern node: any value, a value whose elements all equal a number, or an op node (one of `ops`, any
// op when empty) with child patterns. Commutative ops (Add, Mul, Maximum, Minimum, Eq, Ne) also match with
// their two children swapped, so one rule covers both operand orders.
struct Pat {
  enum class Kind : uint8_t { Any, Value, Node };
  Kind kind = Kind::Any;
  std::string cap;                             // capture name; an Any captured twice must bind the same value
  double value = 0.0;                          // Kind::Value
  std::vector<Op> ops;                         // Kind::Node
  std::vector<Pat> kids;                       // Kind::Node; ignored when any_kids
  bool any_kids = false;                       // match the op whatever its inputs are
  std::function<bool(const Attrs&)> attrs_ok;  // Kind::Node guard on the node's attributes

  Pat as(std::string name) const {
    Pat p = *this;
    p.cap = std::move(name);
    return p;
  }
  Pat where(std::function<bool(const Attrs&)> f) const {
    Pat p = *this;
    p.attrs_ok = std::move(f);
    return p;
  }
};

Pat any(std::string cap);
Pat val(double v);
Pat node(Op op, std::vector<Pat> kids);
Pat node(std::vector<Op> ops, std::vector<Pat> kids);
Pat node_any_kids(std::vector<Op> ops);

struct Binding {
  std::string name;
  Handle h;
  bool is_node = false;  // bound by an op-node pattern: op/attrs/kids below are the matched node's
  Op op = Op::Count_;
  Attrs attrs;
  std::vector<Handle> kids;
};

struct Match {
  Handle root = 0;
  Op root_op = Op::Count_;
  Attrs root_attrs;
  std::vector<Handle> root_kids;
  std::vector<Binding> bindings;

  Handle operator[](const std::string& name) const;  // throws GraphError on an unknown capture
  const Binding& binding(const std::string& name) const;
  bool has(const std::string& name) const;
};

bool is_commutative(Op op);

// Enumerates matches of p rooted at value h, in a deterministic order, calling on_match until it returns
// true (stop). Returns whether enumeration was stopped.
bool match_all(const Pat& p, const TermView& v, Handle h, const std::function<bool(const Match&)>& on_match);

}  // namespace meganeura::rewrite
