#pragma once
// What Graph::make asks of an op before the node exists: its arity and its result type. ir declares these
// entry points and calls them; the op table (ops/table.cpp) defines them from each op's OpDef row. So ir
// includes nothing above it, and every rule lives with its op.
#include <string>
#include <vector>

#include "meganeura/ir/graph.hpp"

namespace meganeura {

// What a shape rule sees: the node being built, before it exists.
struct ShapeCtx {
  Op op;
  const Graph& graph;
  const std::vector<NodeId>& inputs;
  const Attrs& attrs;
  const Provenance& prov;

  const Node& in(size_t i) const { return graph.node(inputs[i]); }
  const Shape& shape(size_t i) const { return in(i).shape; }
  DType dtype(size_t i) const { return in(i).dtype; }
  size_t arity() const { return inputs.size(); }
  // Throws ShapeError "[op] expected <expected>, got <got>; inputs: ...; node '<name>' at <file:line>".
  [[noreturn]] void fail(const std::string& expected, const std::string& got) const;
  // Axis in [-rank, rank) to [0, rank); fails otherwise.
  int64_t axis(int64_t a, size_t rank) const;
};

struct TypeInfo {
  Shape shape;
  DType dtype;
};

// The op's number of inputs (-1: any); throws GraphError naming the op when no row is registered for it.
int op_arity(Op op);
// The result type of the node `ctx` describes, by its op's shape rule (which throws ShapeError).
TypeInfo infer_type(const ShapeCtx& ctx);

}  // namespace meganeura
