#pragma once
// The CPU reference interpreter: evaluates any graph (forward or training) in float64, one op row's
// reference function per node, in id order (ids are topological). It is the oracle of every other test,
// so it stays a plain loop.
#include <map>
#include <string>
#include <vector>

#include "meganeura/ir/graph.hpp"
#include "meganeura/ir/host_tensor.hpp"

namespace meganeura::reference {

// Values of inputs and parameters, by node name. A block-quantized parameter (Q4_0 .. Q6_K) is fed the values
// its blocks mean (quant::dequantize of them, or Session::read_parameter), taken as they are: matmul and
// gather read it like any f32 value, as the GPU's dequantizing loads do.
using Feeds = std::map<std::string, HostTensor>;

// Evaluates `nodes` (and only what they depend on). Throws GraphError when a needed input or parameter has
// no feed, ShapeError when a feed's shape or size does not match its node.
std::vector<HostTensor> evaluate(const Graph& g, const Feeds& feeds, const std::vector<NodeId>& nodes);
HostTensor evaluate(const Graph& g, const Feeds& feeds, NodeId node);

// Evaluates g.outputs().
std::vector<HostTensor> evaluate_outputs(const Graph& g, const Feeds& feeds);

}  // namespace meganeura::reference
