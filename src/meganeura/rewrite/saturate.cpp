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

namespace meganeura::rw {

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
      eg.ctx_prov = Provenance{"", g.node(origin).prov.loc, rules[p.rule].name, {origin}};
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

// Cheapest e-node per class, finalising classes in cost order (Knuth's generalisation of Dijkstra): a
// node is considered only once all its child classes are final, so the choice is acyclic by construction,
// and ties go to the older e-node, so the result is deterministic.
std::vector<uint32_t> extract(const EGraph& eg) {
  constexpr uint32_t kNone = UINT32_MAX;
  const auto& en = eg.enodes();
  size_t nclasses = 0;
  for (uint32_t e = 0; e < en.size(); ++e) nclasses = std::max<size_t>(nclasses, eg.class_of_enode(e) + 1);
  std::vector<Handle> classes = eg.canonical_classes();
  std::vector<bool> has_fill(nclasses + 1, false);
  std::vector<std::vector<uint32_t>> parents(nclasses + 1);
  std::vector<size_t> waiting(en.size(), 0);
  std::vector<uint32_t> members;
  for (Handle c : classes)
    for (uint32_t e : eg.members(c)) {
      members.push_back(e);
      if (en[e].op == Op::Fill) has_fill[c] = true;
    }
  std::sort(members.begin(), members.end());
  using Item = std::pair<double, uint32_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue;
  std::vector<double> own(en.size(), 0), best(nclasses + 1, std::numeric_limits<double>::infinity());
  for (uint32_t e : members) {
    std::vector<Handle> kids = en[e].kids;
    std::vector<CostInput> ins;
    for (Handle k : kids) ins.push_back({&en[eg.members(k)[0]].shape, en[eg.members(k)[0]].dtype, has_fill[eg.find(k)]});
    own[e] = node_cost(en[e].op, eg.attrs(en[e].attrs), ins, en[e].shape, en[e].dtype);
    std::sort(kids.begin(), kids.end());
    kids.erase(std::unique(kids.begin(), kids.end()), kids.end());
    waiting[e] = kids.size();
    for (Handle k : kids) parents[eg.find(k)].push_back(e);
    if (kids.empty()) queue.push({own[e], e});
  }
  std::vector<uint32_t> choice(nclasses + 1, kNone);
  while (!queue.empty()) {
    auto [cost, e] = queue.top();
    queue.pop();
    Handle c = eg.class_of_enode(e);
    if (choice[c] != kNone) continue;
    choice[c] = e;
    best[c] = cost;
    for (uint32_t p : parents[c]) {
      if (--waiting[p] > 0) continue;
      double sum = own[p];
      for (Handle k : en[p].kids) sum += best[eg.find(k)];
      queue.push({sum, p});
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
        throw GraphError("[rewrite] expected every e-class to have a finite-cost node, got none (a driver bug)");
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
                                   : Provenance{"", g.node(n.origin).prov.loc, rules[n.rule].name, {n.origin}};
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
  // a name follows its value: a rewritten named node's name finds the value that replaced it
  for (uint32_t i = 0; i < g.size(); ++i) {
    const std::string& name = g.node(NodeId{i}).prov.name;
    if (!name.empty() && out.map[i].valid() && !d.find(name)) d.alias(out.map[i], name);
  }

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

}  // namespace meganeura::rw
