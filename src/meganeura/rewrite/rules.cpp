#include "meganeura/rewrite/rules.hpp"

#include <algorithm>
#include <numeric>

#include "meganeura/rewrite/fold.hpp"
#include "meganeura/rewrite/graph_util.hpp"

namespace meganeura::rw {

namespace {

using Build = std::function<std::optional<Handle>(TermBuilder&, const Match&)>;
using Guard = std::function<bool(const TermView&, const Match&)>;

Rule rule(std::string name, Pat p, Guard g, Build b, bool canonical = false) {
  Rule r;
  r.name = std::move(name);
  r.pattern = std::move(p);
  r.guard = std::move(g);
  r.build = std::move(b);
  r.canonical = canonical;
  return r;
}

// x replaces the root only when that changes neither shape nor dtype (x + 0 may broadcast x).
Guard same_as_root(std::string x) {
  return [x](const TermView& v, const Match& m) {
    return v.shape(m[x]) == v.shape(m.root) && v.dtype(m[x]) == v.dtype(m.root);
  };
}

Build keep(std::string x) {
  return [x](TermBuilder&, const Match& m) -> std::optional<Handle> { return m[x]; };
}

Build zeros() {
  return [](TermBuilder& b, const Match& m) -> std::optional<Handle> {
    return b.fill(0.0, b.shape(m.root), b.dtype(m.root));
  };
}

std::vector<int64_t> norm_axes(const std::vector<int64_t>& axes, size_t rank) {
  std::vector<int64_t> r;
  if (axes.empty()) {
    r.resize(rank);
    std::iota(r.begin(), r.end(), 0);
    return r;
  }
  for (int64_t a : axes) r.push_back(a < 0 ? a + static_cast<int64_t>(rank) : a);
  std::sort(r.begin(), r.end());
  return r;
}

// A permutation with negative entries counted from the end; empty when it is not a permutation (the shape
// rule would have rejected it, but a rule must never index out of bounds on a bad attribute).
std::vector<int64_t> norm_perm(const std::vector<int64_t>& p) {
  auto n = static_cast<int64_t>(p.size());
  std::vector<int64_t> r;
  std::vector<bool> seen(p.size(), false);
  for (int64_t a : p) {
    int64_t x = a < 0 ? a + n : a;
    if (x < 0 || x >= n || seen[static_cast<size_t>(x)]) return {};
    seen[static_cast<size_t>(x)] = true;
    r.push_back(x);
  }
  return r;
}

bool is_identity_perm(const std::vector<int64_t>& perm) {
  std::vector<int64_t> p = norm_perm(perm);
  if (p.size() != perm.size()) return false;
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// A permutation that swaps the last two axes and keeps the rest: a matrix transpose per batch.
bool swaps_last_two(const Attrs& a) {
  std::vector<int64_t> p = norm_perm(a.axes);
  if (p.size() != a.axes.size()) return false;
  size_t r = p.size();
  if (r < 2) return false;
  for (size_t i = 0; i + 2 < r; ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return p[r - 2] == static_cast<int64_t>(r - 1) && p[r - 1] == static_cast<int64_t>(r - 2);
}

bool is_activation(Op op) {
  return op == Op::Relu || op == Op::Gelu || op == Op::Silu || op == Op::Sigmoid || op == Op::Tanh ||
         op == Op::LeakyRelu;
}

// The value ends a matmul epilogue chain: MatMul, Add(chain, _), activation(chain).
bool is_epilogue_chain(const TermView& v, Handle h, int depth = 0) {
  if (depth > 3) return false;
  return v.for_each_node(h, [&](const TermNode& n) {
    if (n.op == Op::MatMul) return true;
    if (n.op == Op::Add || is_activation(n.op)) return is_epilogue_chain(v, (*n.kids)[0], depth + 1);
    return false;
  });
}

Attrs reduction_attrs(Reduction r) {
  Attrs a;
  a.reduction = r;
  return a;
}

// ---- constant folding -------------------------------------------------------------------------------

Rule constant_fold(int64_t max_elements) {
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
  return rule("constant_fold", node_any_kids({}), g, b);
}

}  // namespace

std::vector<Rule> default_rules(const RuleOptions& opt) {
  std::vector<Rule> rs;
  rs.push_back(constant_fold(opt.fold_max_elements));

  // ---- algebraic identities: exactly value-preserving for finite inputs ----
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
                    [](TermBuilder& b, const Match& m) { return b.make(Op::Sub, {m["x"], m["y"]}, {}); }));
  rs.push_back(rule("sub_neg", node(Op::Sub, {any("x"), node(Op::Neg, {any("y")})}), nullptr,
                    [](TermBuilder& b, const Match& m) { return b.make(Op::Add, {m["x"], m["y"]}, {}); }));
  rs.push_back(rule("mul_self", node(Op::Mul, {any("x"), any("x")}), nullptr,
                    [](TermBuilder& b, const Match& m) { return b.make(Op::Square, {m["x"]}, {}); }));
  rs.push_back(rule("idempotent", node({Op::Abs, Op::Relu}, {node({Op::Abs, Op::Relu}, {any("x")}).as("in")}),
                    [](const TermView&, const Match& m) { return m.binding("in").op == m.root_op; },
                    keep("in")));
  rs.push_back(rule("cast_same", node(Op::Cast, {any("x")}),
                    [](const TermView& v, const Match& m) { return m.root_attrs.dtype == v.dtype(m["x"]); },
                    keep("x")));

  // ---- movement folding ----
  rs.push_back(rule("reshape_identity", node({Op::Reshape, Op::BroadcastTo}, {any("x")}), same_as_root("x"),
                    keep("x")));
  rs.push_back(rule("reshape_reshape", node(Op::Reshape, {node(Op::Reshape, {any("x")})}), nullptr,
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
                    node(Op::MatMul, {node(Op::Permute, {any("a")}).where(swaps_last_two), any("b")}), nullptr,
                    [](TermBuilder& b, const Match& m) {
                      Attrs a = m.root_attrs;
                      a.flag_a = !a.flag_a;
                      return b.make(Op::MatMul, {m["a"], m["b"]}, a);
                    }));
  rs.push_back(rule("matmul_transpose_b",
                    node(Op::MatMul, {any("a"), node(Op::Permute, {any("b")}).where(swaps_last_two)}), nullptr,
                    [](TermBuilder& b, const Match& m) {
                      Attrs a = m.root_attrs;
                      a.flag_b = !a.flag_b;
                      return b.make(Op::MatMul, {m["a"], m["b"]}, a);
                    }));
  // (A.B)^T = B^T.A^T: the same dot products in the same order, so exact
  rs.push_back(rule("matmul_transpose_out",
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

  // ---- fusions ----
  rs.push_back(rule("silu", node(Op::Mul, {any("x"), node(Op::Sigmoid, {any("x")})}), same_as_root("x"),
                    [](TermBuilder& b, const Match& m) { return b.make(Op::Silu, {m["x"]}, {}); }));
  rs.push_back(rule("swiglu", node(Op::Mul, {node(Op::Silu, {any("g")}), any("u")}),
                    [](const TermView& v, const Match& m) {
                      return v.shape(m["g"]) == v.shape(m.root) && v.shape(m["u"]) == v.shape(m.root) &&
                             v.dtype(m["g"]) == v.dtype(m["u"]);
                    },
                    [](TermBuilder& b, const Match& m) { return b.make(Op::SwiGlu, {m["g"], m["u"]}, {}); }));
  rs.push_back(rule("log_softmax", node(Op::Log, {node(Op::Softmax, {any("x")}).as("sm")}), nullptr,
                    [](TermBuilder& b, const Match& m) {
                      return b.make(Op::LogSoftmax, {m["x"]}, m.binding("sm").attrs);
                    }));
  // -sum(t * log_softmax(x), last axis) is the per-row cross entropy
  auto ce_rows = node(Op::Sum, {node(Op::Mul, {any("t"), node(Op::LogSoftmax, {any("x")}).as("ls")})}).as("sum");
  Guard ce_guard = [](const TermView& v, const Match& m) {
    const Shape& xs = v.shape(m["x"]);
    if (xs.empty() || v.shape(m["t"]) != xs || v.dtype(m["t"]) != v.dtype(m["x"])) return false;
    int64_t last = static_cast<int64_t>(xs.size()) - 1;
    const auto& ls = m.binding("ls").attrs.axes;
    if (norm_axes(ls.empty() ? std::vector<int64_t>{-1} : ls, xs.size()) != std::vector<int64_t>{last}) return false;
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
  rs.push_back(rule("cross_entropy_mean", node(Op::Neg, {node(Op::Mean, {ce_rows}).as("red")}),
                    [ce_guard](const TermView& v, const Match& m) {
                      const auto& a = m.binding("red").attrs;
                      return ce_guard(v, m) && !a.keepdim && v.shape(m.root).empty();
                    },
                    ce_build(Reduction::Mean)));
  // a reduction over every row of a per-row cross entropy becomes the op's reduction attribute
  rs.push_back(rule("cross_entropy_reduce",
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
  rs.push_back(rule("matmul_epilogue_order", node(Op::Add, {any("p"), any("q")}),
                    [](const TermView& v, const Match& m) {
                      return is_epilogue_chain(v, m.root_kids[1]) && !is_epilogue_chain(v, m.root_kids[0]);
                    },
                    [](TermBuilder& b, const Match& m) {
                      return b.make(Op::Add, {m.root_kids[1], m.root_kids[0]}, m.root_attrs);
                    },
                    /*canonical=*/true));
  return rs;
}

}  // namespace meganeura::rw
