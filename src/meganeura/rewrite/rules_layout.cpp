// Layout rules: movement ops that change no byte of the layout become aliases.
#include "meganeura/rewrite/rule_helpers.hpp"

namespace meganeura::rewrite {

void add_layout_rules(std::vector<Rule>& rs) {
  // A permute that only moves axes of size 1 keeps every element at its flat index (the axes of size > 1 stay
  // in order), so it is a reshape: an alias with no kernel. Decode steps are full of them: [B, 1, H, D] ->
  // [B, H, 1, D] when a single token's projection is split into heads and merged back.
  rs.push_back(rule(
      "permute_unit_axes", node(Op::Permute, {any("x")}),
      [](const TermView& v, const Match& m) {
        const Shape& xs = v.shape(m["x"]);
        const std::vector<int64_t> p = norm_perm(m.root_attrs.axes);
        if (p.size() != xs.size() || is_identity_perm(p)) return false;
        int64_t prev = -1;
        for (int64_t a : p) {
          if (xs[size_t(a)] == 1) continue;
          if (a < prev) return false;
          prev = a;
        }
        return true;
      },
      [](TermBuilder& b, const Match& m) -> std::optional<Handle> {
        Attrs a;
        a.ints = b.shape(m.root);
        return b.make(Op::Reshape, {m["x"]}, a);
      }));
}

}  // namespace meganeura::rewrite
