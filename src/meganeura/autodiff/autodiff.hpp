#pragma once
// Reverse-mode autodiff as Graph -> Graph.
#include <vector>

#include "meganeura/ir/graph.hpp"

namespace meganeura {

// Returns a copy of `g` (every NodeId of g keeps its meaning) extended with the gradient of `loss` w.r.t.
// each node of `wrt` (default: every parameter). Gradients are registered by handle (result.gradient(p))
// and named "grad/<name>"; they do not change the outputs (if g has none, the outputs become {loss}).
// The loss must hold one floating-point value (shape {} preferred). Nodes made by autodiff carry
// rule "autodiff", derived_from = the forward node, and that node's builder line. stop_gradient and
// non-differentiable ops (comparisons, argmax, sign, integer casts) pass no gradient; a node of `wrt`
// that the loss does not depend on gets an exact zero Fill.
Graph differentiate(const Graph& g, NodeId loss, const std::vector<NodeId>& wrt = {});

}  // namespace meganeura
