#include "meganeura/rewrite/rules.hpp"

#include "meganeura/rewrite/rule_helpers.hpp"

namespace meganeura::rewrite {

std::vector<Rule> default_rules(const RuleOptions& opt) {
  std::vector<Rule> rs;
  add_fold_rules(rs, opt);  // first: a constant subexpression needs no other rule
  add_algebra_rules(rs);
  add_movement_rules(rs);
  add_layout_rules(rs);
  add_fusion_rules(rs);
  return rs;
}

}  // namespace meganeura::rewrite
