#include "meganeura/rewrite/pattern.hpp"

#include <algorithm>

namespace meganeura::rewrite {

bool TermView::has_op(Handle h, Op op) const {
  return for_each_node(h, [&](const TermNode& n) { return n.op == op; });
}

Pat any(std::string cap) {
  Pat p;
  p.kind = Pat::Kind::Any;
  p.cap = std::move(cap);
  return p;
}

Pat val(double v) {
  Pat p;
  p.kind = Pat::Kind::Value;
  p.value = v;
  return p;
}

Pat node(Op op, std::vector<Pat> kids) { return node(std::vector<Op>{op}, std::move(kids)); }

Pat node(std::vector<Op> ops, std::vector<Pat> kids) {
  Pat p;
  p.kind = Pat::Kind::Node;
  p.ops = std::move(ops);
  p.kids = std::move(kids);
  return p;
}

Pat node_any_kids(std::vector<Op> ops) {
  Pat p = node(std::move(ops), {});
  p.any_kids = true;
  return p;
}

const Binding& Match::binding(const std::string& name) const {
  for (const auto& b : bindings)
    if (b.name == name) return b;
  throw GraphError("[rewrite::Match] expected a capture named '" + name + "', got none (a rule bug)");
}

Handle Match::operator[](const std::string& name) const { return binding(name).h; }

bool Match::has(const std::string& name) const {
  return std::any_of(bindings.begin(), bindings.end(), [&](const Binding& b) { return b.name == name; });
}

bool is_commutative(Op op) {
  switch (op) {
    case Op::Add:
    case Op::Mul:
    case Op::Maximum:
    case Op::Minimum:
    case Op::Eq:
    case Op::Ne: return true;
    default: return false;
  }
}

namespace {

// Continuation-passing matcher: each level calls k once per way it matched; k returning true stops the
// whole enumeration. Bindings are pushed before calling k and popped after, so backtracking is exact.
using Cont = std::function<bool(Match&)>;

bool match_value(const Pat& p, const TermView& v, Handle h, Match& m, const Cont& k);

bool bind_then(const std::string& cap, Binding b, Match& m, const Cont& k) {
  if (cap.empty()) return k(m);
  for (const auto& e : m.bindings)
    if (e.name == cap) return e.h == b.h ? k(m) : false;
  b.name = cap;
  m.bindings.push_back(std::move(b));
  bool stop = k(m);
  m.bindings.pop_back();
  return stop;
}

bool match_kids(const std::vector<const Pat*>& ps, const std::vector<Handle>& hs, size_t i, const TermView& v,
                Match& m, const Cont& k) {
  if (i == ps.size()) return k(m);
  return match_value(*ps[i], v, hs[i], m, [&](Match& mm) { return match_kids(ps, hs, i + 1, v, mm, k); });
}

bool match_node(const Pat& p, const TermView& v, Handle h, const TermNode& n, Match& m, const Cont& k) {
  if (!p.ops.empty() && std::find(p.ops.begin(), p.ops.end(), n.op) == p.ops.end()) return false;
  if (!p.any_kids && p.kids.size() != n.kids->size()) return false;
  if (p.attrs_ok && !p.attrs_ok(*n.attrs)) return false;
  Binding b;
  b.h = h;
  b.is_node = true;
  b.op = n.op;
  if (!p.cap.empty()) {
    b.attrs = *n.attrs;
    b.kids = *n.kids;
  }
  return bind_then(p.cap, std::move(b), m, [&](Match& mm) {
    if (p.any_kids || p.kids.empty()) return k(mm);
    std::vector<const Pat*> ps;
    for (const auto& c : p.kids) ps.push_back(&c);
    if (match_kids(ps, *n.kids, 0, v, mm, k)) return true;
    if (ps.size() == 2 && is_commutative(n.op)) {
      std::swap(ps[0], ps[1]);
      return match_kids(ps, *n.kids, 0, v, mm, k);
    }
    return false;
  });
}

bool match_value(const Pat& p, const TermView& v, Handle h, Match& m, const Cont& k) {
  switch (p.kind) {
    case Pat::Kind::Any: {
      Binding b;
      b.h = h;
      return bind_then(p.cap, std::move(b), m, k);
    }
    case Pat::Kind::Value: {
      auto u = v.uniform_value(h);
      if (!u || *u != p.value) return false;
      Binding b;
      b.h = h;
      return bind_then(p.cap, std::move(b), m, k);
    }
    case Pat::Kind::Node:
      return v.for_each_node(h, [&](const TermNode& n) { return match_node(p, v, h, n, m, k); });
  }
  return false;
}

}  // namespace

bool match_all(const Pat& p, const TermView& v, Handle h, const std::function<bool(const Match&)>& on_match) {
  Match m;
  m.root = h;
  return v.for_each_node(h, [&](const TermNode& n) {
    return match_node(p, v, h, n, m, [&](Match& mm) {
      mm.root_op = n.op;
      mm.root_attrs = *n.attrs;
      mm.root_kids = *n.kids;
      return on_match(mm);
    });
  });
}

}  // namespace meganeura::rewrite
