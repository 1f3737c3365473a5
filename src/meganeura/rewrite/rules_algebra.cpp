// Algebraic identities: only rewrites that are exactly value-preserving for finite inputs.
#include "meganeura/rewrite/rule_helpers.hpp"

namespace meganeura::rewrite {

void add_algebra_rules(std::vector<Rule>& rs) {
  rs.push_back(rule("add_zero", node(Op::Add, {any("x"), val(0.0)}), same_as_root("x"), keep("x")));
  rs.push_back(rule("sub_zero", node(Op::Sub, {any("x"), val(0.0)}), same_as_root("x"), keep("x")));
  rs.push_back(rule("mul_one", node(Op::Mul, {any("x"), val(1.0)}), same_as_root("x"), keep("x")));
  rs.push_back(rule("div_one", node(Op::Div, {any("x"), val(1.0)}), same_as_root("x"), keep("x")));
  // x * 0 = 0 holds for finite x only (inf * 0 is NaN); the IR's values are finite by contract
  rs.push_back(rule("mul_zero", node(Op::Mul, {any("x"), val(0.0)}), nullptr, zeros()));
  rs.push_back(rule("sub_self", node(Op::Sub, {any("x"), any("x")}), nullptr, zeros()));
  rs.push_back(rule("neg_neg", node(Op::Neg, {node(Op::Neg, {any("x")})}), nullptr, keep("x")));
  rs.push_back(rule("mul_neg_one", node(Op::Mul, {any("x"), val(-1.0)}), same_as_root("x"),
                    [](TermBuilder& b, const Match& m) { return b.make(Op::Neg, {m["x"]}, {}); }));
  rs.push_back(rule("add_neg", node(Op::Add, {any("x"), node(Op::Neg, {any("y")})}), nullptr,
                    [](TermBuilder& b, const Match& m) {
                      return b.make(Op::Sub, {m["x"], m["y"]}, {});
                    }));
  rs.push_back(rule("sub_neg", node(Op::Sub, {any("x"), node(Op::Neg, {any("y")})}), nullptr,
                    [](TermBuilder& b, const Match& m) {
                      return b.make(Op::Add, {m["x"], m["y"]}, {});
                    }));
  rs.push_back(rule("mul_self", node(Op::Mul, {any("x"), any("x")}), nullptr,
                    [](TermBuilder& b, const Match& m) { return b.make(Op::Square, {m["x"]}, {}); }));
  rs.push_back(rule(
      "idempotent", node({Op::Abs, Op::Relu}, {node({Op::Abs, Op::Relu}, {any("x")}).as("in")}),
      [](const TermView&, const Match& m) { return m.binding("in").op == m.root_op; }, keep("in")));
  rs.push_back(rule(
      "cast_same", node(Op::Cast, {any("x")}),
      [](const TermView& v, const Match& m) { return m.root_attrs.dtype == v.dtype(m["x"]); }, keep("x")));
}

}  // namespace meganeura::rewrite
