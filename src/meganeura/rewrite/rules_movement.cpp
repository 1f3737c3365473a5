// Movement folding: reshape/permute chains, and transposes absorbed into matmul flags.
#include "meganeura/rewrite/rule_helpers.hpp"

namespace meganeura::rewrite {

void add_movement_rules(std::vector<Rule>& rs) {
  rs.push_back(rule("reshape_identity", node({Op::Reshape, Op::BroadcastTo}, {any("x")}), same_as_root("x"),
                    keep("x")));
  rs.push_back(
      rule("reshape_reshape", node(Op::Reshape, {node(Op::Reshape, {any("x")})}), nullptr,
           [](TermBuilder& b, const Match& m) { return b.make(Op::Reshape, {m["x"]}, m.root_attrs); }));
  rs.push_back(rule("permute_identity", node(Op::Permute, {any("x")}).where([](const Attrs& a) {
    return is_identity_perm(a.axes);
  }),
                    nullptr, keep("x")));
  rs.push_back(rule("permute_permute", node(Op::Permute, {node(Op::Permute, {any("x")}).as("in")}), nullptr,
                    [](TermBuilder& b, const Match& m) -> std::optional<Handle> {
                      // out axis i = inner axis p2[i] = x axis p1[p2[i]]
                      std::vector<int64_t> p1 = norm_perm(m.binding("in").attrs.axes);
                      std::vector<int64_t> p2 = norm_perm(m.root_attrs.axes);
                      if (p1.empty() || p1.size() != p2.size()) return std::nullopt;
                      Attrs a;
                      for (int64_t i : p2) a.axes.push_back(p1[static_cast<size_t>(i)]);
                      if (is_identity_perm(a.axes)) return m["x"];
                      return b.make(Op::Permute, {m["x"]}, a);
                    }));
  rs.push_back(rule("matmul_transpose_a",
                    node(Op::MatMul, {node(Op::Permute, {any("a")}).where(swaps_last_two), any("b")}),
                    nullptr, [](TermBuilder& b, const Match& m) {
                      Attrs a = m.root_attrs;
                      a.flag_a = !a.flag_a;
                      return b.make(Op::MatMul, {m["a"], m["b"]}, a);
                    }));
  rs.push_back(rule("matmul_transpose_b",
                    node(Op::MatMul, {any("a"), node(Op::Permute, {any("b")}).where(swaps_last_two)}),
                    nullptr, [](TermBuilder& b, const Match& m) {
                      Attrs a = m.root_attrs;
                      a.flag_b = !a.flag_b;
                      return b.make(Op::MatMul, {m["a"], m["b"]}, a);
                    }));
  // (A.B)^T = B^T.A^T: the same dot products in the same order, so exact
  rs.push_back(
      rule("matmul_transpose_out",
           node(Op::Permute, {node(Op::MatMul, {any("a"), any("b")}).as("mm")}).where(swaps_last_two),
           nullptr, [](TermBuilder& b, const Match& m) -> std::optional<Handle> {
             Attrs a = m.binding("mm").attrs;
             Attrs t = a;
             t.flag_a = !a.flag_b;
             t.flag_b = !a.flag_a;
             auto r = b.make(Op::MatMul, {m["b"], m["a"]}, t);
             if (!r || b.shape(*r) != b.shape(m.root)) return std::nullopt;
             return r;
           }));
}

}  // namespace meganeura::rewrite
