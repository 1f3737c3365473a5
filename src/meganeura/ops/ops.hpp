#pragma once
// The op table: every Op is defined by one line of ir/op_list.hpp (name, scheduling class, cost) and exactly
// one OpDef row, registered from the file of its family (ops/elementwise.cpp, ops/matmul.cpp, ops/reduce.cpp,
// ops/loss.cpp, ops/movement_basic.cpp, ops/norm.cpp, ops/movement.cpp, ops/vision.cpp, ops/attention.cpp).
// Graph::make, autodiff, the reference interpreter and the code generator all read the same row.
#include <string>
#include <vector>

#include "meganeura/ir/graph.hpp"
#include "meganeura/ir/host_tensor.hpp"
#include "meganeura/ir/shape_rule.hpp"

namespace meganeura::ops {

// What a VJP sees. `fwd` is a copy of the forward node (graph.node() references move when the graph grows).
// `grad` has fwd's shape. Return one entry per input: the gradient w.r.t. that input with the input's
// shape, or an invalid NodeId when no gradient flows (non-differentiable input or !need[i]).
struct VjpCtx {
  Graph& g;
  NodeId id;
  Node fwd;
  NodeId grad;
  std::vector<bool> need;

  NodeId in(size_t i) const { return fwd.inputs[i]; }
  // by value: a reference into the graph would dangle once the VJP adds nodes
  Shape in_shape(size_t i) const { return g.node(fwd.inputs[i]).shape; }
  bool needs(size_t i) const { return need[i]; }
};

using ShapeRule = TypeInfo (*)(const ShapeCtx&);
using Vjp = std::vector<NodeId> (*)(VjpCtx&);
// float64 reference: inputs in the node's input order, result must have node.shape.
using Reference = HostTensor (*)(const Node& node, const std::vector<const HostTensor*>& in);

// What an op computes. Its name, scheduling class and cost are its line in ir/op_list.hpp; `name` is filled
// from there when the row is added.
struct OpDef {
  Op op = Op::Count_;
  int arity = 0;  // -1: any number (concat)
  ShapeRule shape = nullptr;
  Vjp vjp = nullptr;              // nullptr: no gradient flows through this op (stop_gradient, argmax, ...)
  Reference reference = nullptr;  // nullptr only for Input/Parameter/Constant (the interpreter feeds them)
  // Pointwise ops: a GLSL float expression. $0..$9 are the operands (already broadcast), $r0..$r9 the
  // attrs.reals as float literals, $i0..$i9 the attrs.ints as int literals, $fa attrs.flag_a as 1.0 or 0.0.
  // Helpers used here (mn_erf, ...) are defined in pointwise_glsl_prelude().
  const char* glsl = nullptr;
  const char* name = nullptr;  // op_name(op), set by OpTable::add
};

class OpTable {
 public:
  void add(OpDef def);  // throws GraphError on a duplicate row
  const OpDef* find(Op op) const;

 private:
  OpDef rows_[size_t(Op::Count_)];
};

// The table, built once (thread-safe) from every family's register function.
const OpTable& table();
// The row of `op`; throws GraphError naming the op when its family has not registered it.
const OpDef& def(Op op);
bool registered(Op op);

// GLSL helper functions that pointwise templates may call (erf has no GLSL builtin).
const char* pointwise_glsl_prelude();
// A GLSL float literal of `v` (9 significant digits, so an f32 round-trips; NaN and ±Inf as bit patterns,
// negative values parenthesised). The one literal printer: codegen uses it too.
std::string float_lit(double v);
// Expands an OpDef::glsl template for `node` with operand expressions `operands`.
std::string expand_glsl(const OpDef& d, const Node& node, const std::vector<std::string>& operands);

// Family registration; one per ops/<family>.cpp.
void register_leaf(OpTable& t);
void register_elementwise(OpTable& t);
void register_matmul(OpTable& t);
void register_reduce(OpTable& t);
void register_loss(OpTable& t);
void register_movement_basic(OpTable& t);
void register_norm(OpTable& t);
void register_movement(OpTable& t);
void register_vision(OpTable& t);
void register_attention(OpTable& t);
void register_state(OpTable& t);
void register_sample(OpTable& t);

}  // namespace meganeura::ops
