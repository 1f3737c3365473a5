// Equality-saturation driver: collect every match, apply them all, restore congruence; repeat within
// count budgets; then extract the cheapest graph by the cost model.
#include <algorithm>
#include <limits>
#include <queue>
#include <set>

#include "meganeura/rewrite/cost.hpp"
#include "meganeura/rewrite/drivers.hpp"
#include "meganeura/rewrite/egraph.hpp"
#include "meganeura/rewrite/graph_util.hpp"

namespace meganeura::rewrite {

namespace {

struct Pending {
  size_t rule;
  Match m;
};

// Runs the rules until saturation or a budget; returns the stop reason.
std::string saturate(EGraph& eg, const Graph& g, const std::vector<Rule>& rules, const RewriteBudgets& b,
                     std::vector<int>& fired) {
  // matches already applied (rule, root, captures; canonical when applied) are not collected again, so a
  // per-rule match budget is spent on new matches and the run moves on
  std::set<std::vector<Handle>> applied;
  auto key_of = [&](size_t r, const Match& m) {
    std::vector<Handle> k{static_cast<Handle>(r), eg.find(m.root)};
    for (const auto& bd : m.bindings) k.push_back(eg.find(bd.h));
    return k;
  };
  for (size_t iter = 0;; ++iter) {
    if (iter >= b.max_iterations) return "budget: iterations";
    std::vector<Pending> pending;
    bool limited = false;
    std::vector<Handle> classes = eg.canonical_classes();
    for (size_t r = 0; r < rules.size(); ++r) {
      const Rule& rule = rules[r];
      if (rule.canonical) continue;
      size_t count = 0;
      for (Handle c : classes) {
        bool stopped = match_all(rule.pattern, eg, c, [&](const Match& m) {
          if (rule.guard && !rule.guard(eg, m)) return false;
          if (!applied.insert(key_of(r, m)).second) return false;
          pending.push_back({r, m});
          return ++count >= b.max_matches_per_rule;
        });
        if (stopped) {
          limited = true;
          break;
        }
      }
    }
    bool changed = false;
    bool full = false;
    for (const Pending& p : pending) {
      Handle root = eg.find(p.m.root);
      NodeId origin = eg.enodes()[eg.members(root)[0]].origin;
      eg.ctx_rule = static_cast<int>(p.rule);
      eg.ctx_origin = origin;
      eg.ctx_prov = Provenance::derived(g.node(origin).prov, origin, rules[p.rule].name);
      size_t before = eg.enodes().size();
      std::optional<Handle> res = rules[p.rule].build(eg, p.m);
      if (res) {
        bool grew = eg.enodes().size() > before;
        bool merged = eg.merge(root, *res);
        if (grew || merged) {
          ++fired[p.rule];
          changed = true;
        }
      }
      if (eg.full()) {
        full = true;
        break;
      }
    }
    eg.rebuild();
    if (full) return "budget: e-nodes";
    if (!changed && !limited) return "saturated";
  }
}

// Cheapest e-node per class. A plain tree cost counts a value once per use, which grows exponentially with
// depth in a residual network and drowns local differences in rounding; so a child class's cost is shared
// among the e-nodes that read it (cost / readers). Classes are finalised in cost order once all children of
// a candidate are final (Knuth's generalisation of Dijkstra), which makes the choice acyclic by construction;
// one more sweep in that order re-picks each class's best candidate among those whose children came
// earlier. Ties go to the older e-node, so the result is deterministic.
std::vector<uint32_t> extract(const EGraph& eg) {
  constexpr uint32_t kNone = UINT32_MAX;
  const auto& en = eg.enodes();
  std::vector<Handle> classes = eg.canonical_classes();
  size_t n = classes.empty() ? 0 : classes.back() + 1;
  std::vector<bool> has_fill(n, false);
  std::vector<std::vector<uint32_t>> parents(n);
  std::vector<size_t> waiting(en.size(), 0);
  std::vector<std::vector<Handle>> distinct_kids(en.size());
  std::vector<uint32_t> members;
  for (Handle c : classes)
    for (uint32_t e : eg.members(c)) {
      members.push_back(e);
      if (en[e].op == Op::Fill) has_fill[c] = true;
    }
  std::sort(members.begin(), members.end());
  std::vector<double> own(en.size(), 0), best(n, std::numeric_limits<double>::infinity());
  std::vector<double> readers(n, 0);
  for (uint32_t e : members) {
    std::vector<CostInput> ins;
    for (Handle k : en[e].kids) {
      const auto& kn = en[eg.members(k)[0]];
      ins.push_back({&kn.shape, kn.dtype, has_fill[eg.find(k)]});
    }
    own[e] = node_cost(en[e].op, eg.attrs(en[e].attrs), ins, en[e].shape, en[e].dtype);
    auto& kids = distinct_kids[e];
    for (Handle k : en[e].kids) kids.push_back(eg.find(k));
    std::sort(kids.begin(), kids.end());
    kids.erase(std::unique(kids.begin(), kids.end()), kids.end());
    waiting[e] = kids.size();
    for (Handle k : kids) {
      parents[k].push_back(e);
      readers[k] += 1;
    }
  }
  auto cost_of = [&](uint32_t e) {
    double sum = own[e];
    for (Handle k : en[e].kids) sum += best[eg.find(k)] / readers[eg.find(k)];
    return sum;
  };
  using Item = std::pair<double, uint32_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue;
  for (uint32_t e : members)
    if (waiting[e] == 0) queue.push({own[e], e});
  std::vector<uint32_t> choice(n, kNone);
  std::vector<size_t> rank(n, SIZE_MAX);
  std::vector<Handle> order;
  while (!queue.empty()) {
    auto [cost, e] = queue.top();
    queue.pop();
    Handle c = eg.class_of_enode(e);
    if (choice[c] != kNone) continue;
    choice[c] = e;
    best[c] = cost;
    rank[c] = order.size();
    order.push_back(c);
    for (uint32_t p : parents[c])
      if (--waiting[p] == 0) queue.push({cost_of(p), p});
  }
  for (Handle c : order) {
    for (uint32_t e : eg.members(c)) {
      const auto& kids = distinct_kids[e];
      if (!std::all_of(kids.begin(), kids.end(), [&](Handle k) { return rank[k] < rank[c]; })) continue;
      double cost = cost_of(e);
      if (cost < best[c] || (cost == best[c] && e < choice[c])) {
        best[c] = cost;
        choice[c] = e;
      }
    }
  }
  return choice;
}

}  // namespace

DriverResult run_saturate(const Graph& g, const std::vector<Rule>& rules, const RewriteBudgets& budgets) {
  EGraph eg(g, budgets.max_enodes);
  DriverResult out;
  out.fired.assign(rules.size(), 0);
  out.stop = saturate(eg, g, rules, budgets, out.fired);
  std::vector<uint32_t> choice = extract(eg);
  const auto& en = eg.enodes();

  Graph d;
  std::vector<NodeId> built(choice.size());
  auto build = [&](Handle root) {
    std::vector<std::pair<Handle, bool>> stack{{eg.find(root), false}};
    while (!stack.empty()) {
      auto [c, expanded] = stack.back();
      stack.pop_back();
      c = eg.find(c);
      if (built[c].valid()) continue;
      if (choice[c] == UINT32_MAX)
        throw GraphError(
            "[rewrite] expected every e-class to have a finite-cost node, got none (a driver bug)");
      const EGraph::ENode& n = en[choice[c]];
      if (!expanded) {
        stack.push_back({c, true});
        for (auto it = n.kids.rbegin(); it != n.kids.rend(); ++it)
          if (!built[eg.find(*it)].valid()) stack.push_back({*it, false});
        continue;
      }
      std::vector<NodeId> kids;
      for (Handle k : n.kids) kids.push_back(built[eg.find(k)]);
      Provenance prov = n.rule < 0 ? g.node(n.origin).prov
                                   : Provenance::derived(g.node(n.origin).prov, n.origin, rules[n.rule].name);
      size_t before = d.size();
      NodeId id = copy_node(d, eg.scratch(), n.proto, kids, prov);
      if (id.v < before && !is_leaf(n.op)) ++out.cse;
      built[c] = id;
    }
  };
  // Emit in the order of each class's oldest input-graph node, so a graph that is already optimal comes back
  // in its own order (and inputs and parameters keep their registration order).
  std::vector<bool> needed(choice.size(), false);
  {
    std::vector<Handle> stack;
    for (NodeId r : roots(g)) stack.push_back(eg.class_of_input(r));
    while (!stack.empty()) {
      Handle c = eg.find(stack.back());
      stack.pop_back();
      if (needed[c]) continue;
      needed[c] = true;
      if (choice[c] == UINT32_MAX) continue;  // reported by build() below
      for (Handle k : en[choice[c]].kids) stack.push_back(k);
    }
  }
  for (uint32_t i = 0; i < g.size(); ++i)
    if (eg.loaded(NodeId{i}) && needed[eg.class_of_input(NodeId{i})]) build(eg.class_of_input(NodeId{i}));
  for (NodeId r : roots(g)) build(eg.class_of_input(r));
  std::vector<NodeId> outs;
  for (NodeId o : g.outputs()) outs.push_back(built[eg.class_of_input(o)]);
  d.set_outputs(outs);
  for (const auto& [wrt, grad] : g.gradients())
    d.set_gradient(built[eg.class_of_input(wrt)], built[eg.class_of_input(grad)]);
  out.map.assign(g.size(), NodeId{});
  for (uint32_t i = 0; i < g.size(); ++i)
    if (eg.loaded(NodeId{i})) out.map[i] = built[eg.class_of_input(NodeId{i})];
  carry_names(g, out.map, d);

  // rules that only pick between equal-cost spellings run greedily on the extracted graph
  std::vector<Rule> canonical;
  std::vector<size_t> canonical_index;
  for (size_t r = 0; r < rules.size(); ++r)
    if (rules[r].canonical) {
      canonical.push_back(rules[r]);
      canonical_index.push_back(r);
    }
  if (canonical.empty()) {
    out.graph = std::move(d);
    return out;
  }
  DriverResult post = run_greedy(d, canonical, budgets);
  for (auto& m : out.map)
    if (m.valid()) m = post.map[m.v];
  for (size_t k = 0; k < canonical.size(); ++k) out.fired[canonical_index[k]] += post.fired[k];
  out.cse += post.cse;
  out.graph = std::move(post.graph);
  return out;
}

}  // namespace meganeura::rewrite
