// Movement folding: reshape/permute chains, transposes absorbed into matmul flags, sums of zero pads that
// tile an axis.
#include "meganeura/rewrite/rule_helpers.hpp"

namespace meganeura::rewrite {

namespace {

// The axis a zero Pad widens, when it widens exactly one (-1 otherwise).
int64_t single_pad_axis(const Attrs& a) {
  if (a.reals.size() != 1 || a.reals[0] != 0.0 || a.ints.size() % 2) return -1;
  const size_t rank = a.ints.size() / 2;
  int64_t axis = -1;
  for (size_t d = 0; d < rank; ++d) {
    if (a.ints[d] == 0 && a.ints[rank + d] == 0) continue;
    if (axis >= 0) return -1;
    axis = int64_t(d);
  }
  return axis;
}

}  // namespace

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
  // pad(x) + pad(y), zero pads along one axis where x's range ends where y's begins, is pad(concat(x, y)):
  // each element is x + 0 or 0 + y. Slice's VJP pads, so the gradient of a fused QKV product was the sum of
  // three pads (two copy kernels and a third adding them); as one concat it is one copy kernel. The sum
  // rounds -0 to +0 where the concat keeps -0; every other value, NaN included, is the same.
  rs.push_back(rule(
      "add_adjacent_pads",
      node(Op::Add, {node(Op::Pad, {any("x")}).as("p"), node(Op::Pad, {any("y")}).as("q")}),
      [](const TermView& v, const Match& m) {
        const Attrs &a = m.binding("p").attrs, &b = m.binding("q").attrs;
        const int64_t axis = single_pad_axis(a);
        if (axis < 0 || single_pad_axis(b) != axis || v.shape(m["p"]) != v.shape(m.root) ||
            v.shape(m["q"]) != v.shape(m.root) || v.dtype(m["x"]) != v.dtype(m["y"]))
          return false;
        const size_t ax = size_t(axis);
        return a.ints[ax] + v.shape(m["x"])[ax] == b.ints[ax];  // x's range, then y's
      },
      [](TermBuilder& b, const Match& m) -> std::optional<Handle> {
        const Attrs &pa = m.binding("p").attrs, &qa = m.binding("q").attrs;
        const size_t ax = size_t(single_pad_axis(pa)), rank = pa.ints.size() / 2;
        Attrs cat;
        cat.axes = {int64_t(ax)};
        std::optional<Handle> c = b.make(Op::Concat, {m["x"], m["y"]}, cat);
        if (!c || (pa.ints[ax] == 0 && qa.ints[rank + ax] == 0)) return c;
        Attrs pad;
        pad.ints.assign(2 * rank, 0);
        pad.ints[ax] = pa.ints[ax];
        pad.ints[rank + ax] = qa.ints[rank + ax];
        pad.reals = {0.0};
        return b.make(Op::Pad, {*c}, pad);
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
