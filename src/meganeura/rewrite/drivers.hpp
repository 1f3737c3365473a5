#pragma once
// The two drivers behind rewrite() (internal to the rewrite stage).
#include <string>
#include <vector>

#include "meganeura/rewrite/rewrite.hpp"

namespace meganeura::rewrite {

struct DriverResult {
  Graph graph;
  std::vector<NodeId> map;  // input node id -> result node id; invalid where the value is gone
  std::vector<int> fired;   // per rule of the table given
  size_t cse = 0;           // rebuilt nodes that turned out equal to an existing one
  std::string stop;
};

DriverResult run_greedy(const Graph& g, const std::vector<Rule>& rules, const RewriteBudgets& budgets);
DriverResult run_saturate(const Graph& g, const std::vector<Rule>& rules, const RewriteBudgets& budgets);

// "a, b, c": the rules that fired most in `counts`, busiest first (names a cycle when a budget ran out)
std::string busiest_rules(const std::vector<Rule>& rules, const std::vector<int>& counts);

}  // namespace meganeura::rewrite
