#pragma once
// Small graph helpers shared by the rewrite drivers: which nodes are roots and live, how to copy a node
// into another graph, and how to read a Fill's value.
#include <optional>
#include <vector>

#include "meganeura/ir/graph.hpp"

namespace meganeura::rewrite {

bool is_leaf(Op op);  // Input, Parameter, Constant, Fill

// outputs, both sides of every gradient, every parameter and every input, without duplicates, ascending
std::vector<NodeId> roots(const Graph& g);
// live[i]: node i is a root or feeds one
std::vector<bool> live_nodes(const Graph& g);

// The value of every element when n is a Fill.
std::optional<double> fill_value(const Node& n);
// Makes a Fill of `value` in g (a node with rule provenance when prov.rule is set).
NodeId make_fill(Graph& g, double value, const Shape& shape, DType dtype, const Provenance& prov);

// Copies node `id` of `from` into `to` with its inputs replaced by `kids` (ids in `to`) and provenance
// `prov`. Leaves are recreated through their builder so that `to` registers inputs and parameters.
NodeId copy_node(Graph& to, const Graph& from, NodeId id, const std::vector<NodeId>& kids,
                 const Provenance& prov);

// Makes every name of `from` (node names and aliases) find the mapped value in `to`: the value is the same,
// so its names follow it. map: `from` ids -> `to` ids, invalid where the value is gone.
void carry_names(const Graph& from, const std::vector<NodeId>& map, Graph& to);

}  // namespace meganeura::rewrite
