#pragma once
// The rewrite stage: Graph -> Graph, one rule set (rules.hpp) run by one of two drivers.
//
//  * Greedy (default): rebuilds the graph bottom-up; at each node the first rule that matches fires, again
//    and again until none does; whole passes repeat until one fires nothing ("fixed point"). Rebuilding
//    through Graph interning is CSE, and only values reachable from the roots are rebuilt (dead code).
//  * Saturate (experimental): a union-find e-graph. Each iteration collects every match of every rule,
//    then applies them, then restores congruence. Bounded by counts only (iterations, e-nodes, matches per
//    rule), so a run is reproducible. The result is extracted by the cost model in cost.hpp.
//  * Off: the graph is copied unchanged.
//
// Roots: the outputs, every gradient (Graph::gradients(): key and value), every parameter and every input
// (kept even when unused, so set_input/set_parameter by name keep working).
//
// Provenance: a node made by a rule has prov.rule = the rule's name and prov.derived_from = the ids (in the
// graph given to rewrite()) of the node it replaced; it inherits that node's builder line. When a rule
// replaces a named node, Graph::find(name) finds the replacement (Graph::alias: a node that already has a
// name keeps it). Names given with Graph::alias only (not in a node's provenance) are not carried over.
//
// The rule machinery lives in namespace meganeura::rw (pattern.hpp, rules.hpp); only this header is the
// stage's interface. Values are assumed finite: x*0 -> 0 and x-x -> 0 are applied.
//
// Fused forms produced, for the scheduler (schedule/) to recognise:
//  * Silu(x)                    from x * sigmoid(x)
//  * SwiGlu(g, u) = silu(g) * u from silu(g) * u (same shapes)
//  * LogSoftmax(x, axis)        from log(softmax(x, axis))
//  * CrossEntropy(logits, targets, reduction)
//                               from -sum(targets * log_softmax(logits), last axis), then mean/sum over the
//                               rest folded into attrs.reduction (None/Mean/Sum)
//  * MatMul(a, b, flag_a, flag_b): a transposed operand (Permute swapping the last two axes) becomes a flag;
//                               a transposed product becomes the swapped product.
//  * Matmul epilogue, kept as a canonical chain of ordinary nodes (no new op, so the CPU reference and
//    autodiff need nothing new):  MatMul -> [Add(mm, bias)] -> [activation] -> [Add(chain, residual)]
//    where each Add has the chain as input 0 (rule "matmul_epilogue_order" commutes it there), bias
//    broadcasts along rows, activation is one of Relu, Gelu, Silu, Sigmoid, Tanh, LeakyRelu. Use
//    find_matmul_epilogue() below to read one; it only extends the chain through single-use, non-root
//    nodes, the same condition the scheduler uses for fusing a producer.
#include <cstddef>
#include <map>
#include <optional>
#include <vector>

#include "meganeura/config/config.hpp"
#include "meganeura/config/report.hpp"
#include "meganeura/ir/graph.hpp"
#include "meganeura/rewrite/rules.hpp"

namespace meganeura::rewrite {

struct RewriteBudgets {
  // greedy
  size_t max_steps = 100000;  // rule firings in total; beyond it the stop reason names the busiest rules
  size_t max_passes = 64;     // whole-graph rebuilds
  // saturation
  size_t max_iterations = 12;
  size_t max_enodes = 20000;
  size_t max_matches_per_rule = 4000;  // per iteration; further matches of that rule wait for the next one
  // both
  int64_t fold_max_elements = 4096;  // constant folding never materialises a bigger tensor
};

struct RewriteResult {
  Graph graph;
  // every node of the input graph whose value is still computed -> its node in `graph`; always contains
  // the outputs, parameters, inputs and both sides of every gradient
  std::map<NodeId, NodeId> mapping;
  NodeId map(NodeId old) const;  // throws GraphError when old was removed
};

// The session pipeline's entry point. Fills report.rules_fired (rule name, times; in rule-table order, then
// "cse" and "dead_code"), nodes_before (g.size()), nodes_after (result size) and stop_reason:
// "fixed point" | "saturated" | "off" | "budget: steps (cycling: a, b)" | "budget: passes (cycling: ...)" |
// "budget: iterations" | "budget: e-nodes". Throws GraphError for a graph with no outputs.
RewriteResult rewrite(const Graph& g, RewriteMode mode, OptimizeReport& report,
                      const RewriteBudgets& budgets = {});

// The same with an explicit rule table (tests use it for cycling rules and for one rule at a time).
RewriteResult rewrite_with_rules(const Graph& g, RewriteMode mode, const std::vector<Rule>& rules,
                                 OptimizeReport& report, const RewriteBudgets& budgets = {});

// A matmul and the epilogue the scheduler may fuse into it (see above). Absent parts are invalid ids.
struct MatMulEpilogue {
  NodeId matmul, bias_add, activation, residual_add;
  NodeId bias, residual;
  NodeId last;  // the node whose value the fused kernel writes
};
// Reads the epilogue chain starting at a MatMul node; nullopt when mm is not a MatMul.
std::optional<MatMulEpilogue> find_matmul_epilogue(const Graph& g, NodeId mm);

}  // namespace meganeura::rewrite

namespace meganeura {
// The stage's types by their short names (the entry points are rewrite::rewrite and
// rewrite::rewrite_with_rules).
using rewrite::find_matmul_epilogue;
using rewrite::MatMulEpilogue;
using rewrite::RewriteBudgets;
using rewrite::RewriteResult;
}  // namespace meganeura
