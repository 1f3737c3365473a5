#pragma once
// A shape-aware cost estimate for one node: bytes moved plus arithmetic, by the kernel archetype the node
// lands in. The saturation driver extracts the cheapest equivalent graph with it; the scheduler may use it
// to compare fusion choices. Units are arbitrary but consistent: 1 per byte, 1 per flop (transcendentals 8).
#include <vector>

#include "meganeura/ir/graph.hpp"

namespace meganeura::rewrite {

struct CostInput {
  const Shape* shape;
  DType dtype;
  bool is_fill;  // a Fill is never materialised, so reading it is free
};

// Leaves cost 0; every other node costs at least 1, so a cheapest choice never forms a cycle.
double node_cost(Op op, const Attrs& attrs, const std::vector<CostInput>& inputs, const Shape& out,
                 DType out_dtype);
double node_cost(const Graph& g, NodeId id);

}  // namespace meganeura::rewrite
