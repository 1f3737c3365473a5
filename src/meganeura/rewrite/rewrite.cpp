// rewrite(): picks the driver and turns its result into the mapping and the OptimizeReport.
#include "meganeura/rewrite/rewrite.hpp"

#include "meganeura/rewrite/drivers.hpp"

namespace meganeura::rewrite {

NodeId RewriteResult::map(NodeId old) const {
  auto it = mapping.find(old);
  if (it == mapping.end())
    throw GraphError("[RewriteResult::map] expected a node whose value survives the rewrite, got %" +
                     (old.valid() ? std::to_string(old.v) : std::string("invalid")) + ", which was removed");
  return it->second;
}

RewriteResult rewrite_with_rules(const Graph& g, RewriteMode mode, const std::vector<Rule>& rules,
                                 OptimizeReport& report, const RewriteBudgets& budgets) {
  if (g.outputs().empty())
    throw GraphError("[rewrite] expected a graph with at least one output (Graph::set_outputs), got none");
  report.rules_fired.clear();
  report.nodes_before = g.size();
  RewriteResult res;
  if (mode == RewriteMode::Off) {
    res.graph = g;
    for (uint32_t i = 0; i < g.size(); ++i) res.mapping[NodeId{i}] = NodeId{i};
    report.nodes_after = g.size();
    report.stop_reason = "off";
    return res;
  }
  DriverResult d =
      mode == RewriteMode::Greedy ? run_greedy(g, rules, budgets) : run_saturate(g, rules, budgets);
  for (size_t r = 0; r < rules.size(); ++r)
    if (d.fired[r] > 0) report.rules_fired.emplace_back(rules[r].name, d.fired[r]);
  if (d.cse > 0) report.rules_fired.emplace_back(rewrite::kRuleCse, static_cast<int>(d.cse));
  int dead = 0;
  for (uint32_t i = 0; i < g.size(); ++i) {
    if (d.map[i].valid())
      res.mapping[NodeId{i}] = d.map[i];
    else
      ++dead;
  }
  if (dead > 0) report.rules_fired.emplace_back(rewrite::kRuleDeadCode, dead);
  res.graph = std::move(d.graph);
  report.nodes_after = res.graph.size();
  report.stop_reason = d.stop;
  return res;
}

RewriteResult rewrite(const Graph& g, RewriteMode mode, OptimizeReport& report,
                      const RewriteBudgets& budgets) {
  RuleOptions opt;
  opt.fold_max_elements = budgets.fold_max_elements;
  return rewrite_with_rules(g, mode, rewrite::default_rules(opt), report, budgets);
}

}  // namespace meganeura::rewrite
