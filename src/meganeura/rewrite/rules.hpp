#pragma once
// Rewrite rules as data: a name (reported and recorded in Provenance::rule), a pattern, an optional guard
// and a builder. The same table drives the greedy and the saturation driver.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "meganeura/rewrite/pattern.hpp"

namespace meganeura::rewrite {

struct Rule {
  std::string name;
  Pat pattern;                                               // its root must be an op-node pattern
  std::function<bool(const TermView&, const Match&)> guard;  // optional
  // returns the value that replaces m.root (possibly an existing one), or nullopt to decline
  std::function<std::optional<Handle>(TermBuilder&, const Match&)> build;
  // Picks one of two spellings of equal cost (e.g. operand order). The e-graph would only hold both and
  // let extraction pick either, so the saturation driver applies these greedily after extraction.
  bool canonical = false;
};

struct RuleOptions {
  int64_t fold_max_elements = 4096;  // constant-folded results larger than this are not materialised
};

// The default rule set, in priority order (the greedy driver takes the first rule that fires).
std::vector<Rule> default_rules(const RuleOptions& opt = {});

// Names of the rules that are not table entries but fall out of rebuilding: reported like rules.
inline constexpr const char* kRuleCse = "cse";
inline constexpr const char* kRuleDeadCode = "dead_code";

}  // namespace meganeura::rewrite
