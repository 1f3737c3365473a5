#pragma once
// Small pieces the rule families share: the rule constructor, common guards and builders, axis helpers.
#include <algorithm>
#include <numeric>

#include "meganeura/rewrite/rules.hpp"

namespace meganeura::rewrite {

using Build = std::function<std::optional<Handle>(TermBuilder&, const Match&)>;
using Guard = std::function<bool(const TermView&, const Match&)>;

inline Rule rule(std::string name, Pat p, Guard g, Build b, bool canonical = false) {
  Rule r;
  r.name = std::move(name);
  r.pattern = std::move(p);
  r.guard = std::move(g);
  r.build = std::move(b);
  r.canonical = canonical;
  return r;
}

// x replaces the root only when that changes neither shape nor dtype (x + 0 may broadcast x).
inline Guard same_as_root(std::string x) {
  return [x](const TermView& v, const Match& m) {
    return v.shape(m[x]) == v.shape(m.root) && v.dtype(m[x]) == v.dtype(m.root);
  };
}

inline Build keep(std::string x) {
  return [x](TermBuilder&, const Match& m) -> std::optional<Handle> { return m[x]; };
}

inline Build zeros() {
  return [](TermBuilder& b, const Match& m) -> std::optional<Handle> {
    return b.fill(0.0, b.shape(m.root), b.dtype(m.root));
  };
}

inline std::vector<int64_t> norm_axes(const std::vector<int64_t>& axes, size_t rank) {
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
inline std::vector<int64_t> norm_perm(const std::vector<int64_t>& p) {
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

inline bool is_identity_perm(const std::vector<int64_t>& perm) {
  std::vector<int64_t> p = norm_perm(perm);
  if (p.size() != perm.size()) return false;
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// A permutation that swaps the last two axes and keeps the rest: a matrix transpose per batch.
inline bool swaps_last_two(const Attrs& a) {
  std::vector<int64_t> p = norm_perm(a.axes);
  if (p.size() != a.axes.size()) return false;
  size_t r = p.size();
  if (r < 2) return false;
  for (size_t i = 0; i + 2 < r; ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return p[r - 2] == static_cast<int64_t>(r - 1) && p[r - 1] == static_cast<int64_t>(r - 2);
}

inline bool is_activation(Op op) {
  return op == Op::Relu || op == Op::Gelu || op == Op::Silu || op == Op::Sigmoid || op == Op::Tanh ||
         op == Op::LeakyRelu;
}

// The value ends a matmul epilogue chain: MatMul, Add(chain, _), activation(chain).
inline bool is_epilogue_chain(const TermView& v, Handle h, int depth = 0) {
  if (depth > 3) return false;
  return v.for_each_node(h, [&](const TermNode& n) {
    if (n.op == Op::MatMul) return true;
    if (n.op == Op::Add || is_activation(n.op)) return is_epilogue_chain(v, (*n.kids)[0], depth + 1);
    return false;
  });
}

inline Attrs reduction_attrs(Reduction r) {
  Attrs a;
  a.reduction = r;
  return a;
}

// Each family appends its rules in priority order.
void add_fold_rules(std::vector<Rule>& rs, const RuleOptions& opt);
void add_algebra_rules(std::vector<Rule>& rs);
void add_movement_rules(std::vector<Rule>& rs);
void add_fusion_rules(std::vector<Rule>& rs);
void add_layout_rules(std::vector<Rule>& rs);  // rules_layout.cpp

}  // namespace meganeura::rewrite
