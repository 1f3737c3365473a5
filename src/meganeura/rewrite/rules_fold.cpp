// Constant folding through the CPU reference (fold.hpp).
#include "meganeura/rewrite/fold.hpp"
#include "meganeura/rewrite/graph_util.hpp"
#include "meganeura/rewrite/rule_helpers.hpp"

namespace meganeura::rewrite {

void add_fold_rules(std::vector<Rule>& rs, const RuleOptions& opt) {
  int64_t max_elements = opt.fold_max_elements;
  Guard g = [](const TermView& v, const Match& m) {
    if (is_leaf(m.root_op) || m.root_kids.empty() || m.root_op == Op::Dropout) return false;
    if (v.dtype(m.root) != DType::F32) return false;
    for (Handle k : m.root_kids)
      if (v.dtype(k) != DType::F32 || !v.is_constant(k)) return false;
    return true;
  };
  Build b = [max_elements](TermBuilder& tb, const Match& m) -> std::optional<Handle> {
    std::vector<FoldInput> ins;
    bool all_uniform = true;
    for (Handle k : m.root_kids) {
      FoldInput in{tb.shape(k), tb.dtype(k), tb.uniform_value(k), tb.constant_data(k)};
      all_uniform = all_uniform && in.uniform.has_value();
      ins.push_back(std::move(in));
    }
    const Shape& out = tb.shape(m.root);
    if (all_uniform && is_elementwise(m.root_op)) {
      // evaluate one element: the result is uniform whatever the shape
      for (auto& in : ins) in.shape = {};
      auto r = evaluate(m.root_op, m.root_attrs, ins);
      if (!r || r->size() != 1) return std::nullopt;
      return tb.fill((*r)[0], out, tb.dtype(m.root));
    }
    if (numel(out) > max_elements) return std::nullopt;
    for (const auto& in : ins)
      if (numel(in.shape) > max_elements) return std::nullopt;
    auto r = evaluate(m.root_op, m.root_attrs, ins);
    if (!r || static_cast<int64_t>(r->size()) != numel(out)) return std::nullopt;
    return tb.constant(std::move(*r), out);
  };
  rs.push_back(rule("constant_fold", node_any_kids({}), g, b));
}

}  // namespace meganeura::rewrite
