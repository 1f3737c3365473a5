// Fusions into the ops the scheduler has fused kernels for, and the matmul epilogue order.
#include "meganeura/rewrite/rule_helpers.hpp"

namespace meganeura::rewrite {

void add_fusion_rules(std::vector<Rule>& rs) {
  rs.push_back(rule("silu", node(Op::Mul, {any("x"), node(Op::Sigmoid, {any("x")})}), same_as_root("x"),
                    [](TermBuilder& b, const Match& m) { return b.make(Op::Silu, {m["x"]}, {}); }));
  rs.push_back(rule(
      "swiglu", node(Op::Mul, {node(Op::Silu, {any("g")}), any("u")}),
      [](const TermView& v, const Match& m) {
        return v.shape(m["g"]) == v.shape(m.root) && v.shape(m["u"]) == v.shape(m.root) &&
               v.dtype(m["g"]) == v.dtype(m["u"]);
      },
      [](TermBuilder& b, const Match& m) {
        return b.make(Op::SwiGlu, {m["g"], m["u"]}, {});
      }));
  rs.push_back(rule("log_softmax", node(Op::Log, {node(Op::Softmax, {any("x")}).as("sm")}), nullptr,
                    [](TermBuilder& b, const Match& m) {
                      return b.make(Op::LogSoftmax, {m["x"]}, m.binding("sm").attrs);
                    }));
  // -sum(t * log_softmax(x), last axis) is the per-row cross entropy
  auto ce_rows =
      node(Op::Sum, {node(Op::Mul, {any("t"), node(Op::LogSoftmax, {any("x")}).as("ls")})}).as("sum");
  Guard ce_guard = [](const TermView& v, const Match& m) {
    const Shape& xs = v.shape(m["x"]);
    if (xs.empty() || v.shape(m["t"]) != xs || v.dtype(m["t"]) != v.dtype(m["x"])) return false;
    int64_t last = static_cast<int64_t>(xs.size()) - 1;
    const auto& ls = m.binding("ls").attrs.axes;
    if (norm_axes(ls.empty() ? std::vector<int64_t>{-1} : ls, xs.size()) != std::vector<int64_t>{last})
      return false;
    const auto& s = m.binding("sum").attrs;
    return !s.keepdim && norm_axes(s.axes, xs.size()) == std::vector<int64_t>{last};
  };
  auto ce_build = [](Reduction r) {
    return [r](TermBuilder& b, const Match& m) -> std::optional<Handle> {
      auto ce = b.make(Op::CrossEntropy, {m["x"], m["t"]}, reduction_attrs(r));
      if (!ce || b.shape(*ce) != b.shape(m.root)) return std::nullopt;
      return ce;
    };
  };
  rs.push_back(rule("cross_entropy", node(Op::Neg, {ce_rows}), ce_guard, ce_build(Reduction::None)));
  rs.push_back(rule(
      "cross_entropy_mean", node(Op::Neg, {node(Op::Mean, {ce_rows}).as("red")}),
      [ce_guard](const TermView& v, const Match& m) {
        const auto& a = m.binding("red").attrs;
        return ce_guard(v, m) && !a.keepdim && v.shape(m.root).empty();
      },
      ce_build(Reduction::Mean)));
  // a reduction over every row of a per-row cross entropy becomes the op's reduction attribute
  rs.push_back(rule(
      "cross_entropy_reduce",
      node({Op::Mean, Op::Sum}, {node(Op::CrossEntropy, {any("x"), any("t")}).as("ce")}),
      [](const TermView& v, const Match& m) {
        return m.binding("ce").attrs.reduction == Reduction::None && !m.root_attrs.keepdim &&
               v.shape(m.root).empty();
      },
      [](TermBuilder& b, const Match& m) -> std::optional<Handle> {
        Attrs a = m.binding("ce").attrs;
        a.reduction = m.root_op == Op::Mean ? Reduction::Mean : Reduction::Sum;
        return b.make(Op::CrossEntropy, {m["x"], m["t"]}, a);
      }));
  // Add(other, chain) -> Add(chain, other): the scheduler reads a matmul epilogue along input 0
  rs.push_back(rule(
      "matmul_epilogue_order", node(Op::Add, {any("p"), any("q")}),
      [](const TermView& v, const Match& m) {
        return is_epilogue_chain(v, m.root_kids[1]) && !is_epilogue_chain(v, m.root_kids[0]);
      },
      [](TermBuilder& b, const Match& m) {
        return b.make(Op::Add, {m.root_kids[1], m.root_kids[0]}, m.root_attrs);
      },
      /*canonical=*/true));
}

}  // namespace meganeura::rewrite
