// Greedy driver: bottom-up rebuild, first matching rule wins at each node, passes repeated to a fixed point.
#include <algorithm>
#include <deque>

#include "meganeura/rewrite/drivers.hpp"
#include "meganeura/rewrite/graph_util.hpp"

namespace meganeura::rewrite {

namespace {

// The plain graph seen through the pattern interface: one node per value.
class GraphTerms final : public TermBuilder {
 public:
  explicit GraphTerms(Graph& g) : g_(g) {}

  Provenance ctx;  // provenance of nodes made by the rule being applied

  bool for_each_node(Handle h, const std::function<bool(const TermNode&)>& fn) const override {
    const Node& n = g_.node(NodeId{h});
    // a deque keeps the references handed out in TermNode valid while it grows
    if (kids_.size() < g_.size()) {
      kids_.resize(g_.size());
      filled_.resize(g_.size(), false);
    }
    if (!filled_[h]) {
      for (NodeId k : n.inputs) kids_[h].push_back(k.v);
      filled_[h] = true;
    }
    return fn(TermNode{n.op, &n.attrs, &kids_[h]});
  }
  Shape shape(Handle h) const override { return g_.node(NodeId{h}).shape; }
  DType dtype(Handle h) const override { return g_.node(NodeId{h}).dtype; }
  std::optional<double> uniform_value(Handle h) const override {
    const Node& n = g_.node(NodeId{h});
    if (n.op == Op::Fill) return fill_value(n);
    if (n.op != Op::Constant) return std::nullopt;
    const auto& d = g_.constant_data(NodeId{h});
    if (d.empty() || std::any_of(d.begin(), d.end(), [&](float x) { return x != d[0]; })) return std::nullopt;
    return d[0];
  }
  const std::vector<float>* constant_data(Handle h) const override {
    return g_.node(NodeId{h}).op == Op::Constant ? &g_.constant_data(NodeId{h}) : nullptr;
  }

  std::optional<Handle> make(Op op, std::vector<Handle> kids, Attrs attrs) override {
    std::vector<NodeId> ids;
    for (Handle k : kids) ids.push_back(NodeId{k});
    try {
      return g_.make(op, std::move(ids), std::move(attrs), ctx).v;
    } catch (const Error&) {
      return std::nullopt;  // the op's shape rule rejected this form: the rule declines
    }
  }
  Handle fill(double value, const Shape& shape, DType dtype) override {
    return make_fill(g_, value, shape, dtype, ctx).v;
  }
  Handle constant(std::vector<float> data, const Shape& shape) override {
    return g_.constant(std::move(data), shape, ctx.loc).v;
  }

 private:
  Graph& g_;
  mutable std::deque<std::vector<Handle>> kids_;
  mutable std::vector<bool> filled_;
};

struct State {
  const std::vector<Rule>& rules;
  const RewriteBudgets& budgets;
  std::vector<int> fired;
  size_t steps = 0;
  size_t cse = 0;
  bool exhausted = false;
};

// One bottom-up rebuild of g into d. origin: g's ids -> ids of the graph given to rewrite(), for
// provenance; d_origin receives the same for d.
void pass(const Graph& g, const std::vector<NodeId>& origin, State& st, std::vector<int>& pass_fired,
          Graph& d, std::vector<NodeId>& map, std::vector<NodeId>& d_origin) {
  std::vector<bool> live = live_nodes(g);
  map.assign(g.size(), NodeId{});
  GraphTerms terms(d);
  auto note_origin = [&](NodeId o) { d_origin.resize(d.size(), o); };
  for (uint32_t i = 0; i < g.size(); ++i) {
    if (!live[i]) continue;
    const NodeId id{i};
    const Node& n = g.node(id);
    std::vector<NodeId> kids;
    for (NodeId k : n.inputs) kids.push_back(map[k.v]);
    size_t before = d.size();
    NodeId built = copy_node(d, g, id, kids, n.prov);
    if (built.v < before && !is_leaf(n.op)) ++st.cse;
    note_origin(origin[i]);
    NodeId cur = built;
    while (!st.exhausted && !is_leaf(n.op)) {
      bool fired = false;
      for (size_t r = 0; r < st.rules.size() && !fired; ++r) {
        const Rule& rule = st.rules[r];
        std::optional<Match> found;
        match_all(rule.pattern, terms, cur.v, [&](const Match& m) {
          if (rule.guard && !rule.guard(terms, m)) return false;
          found = m;
          return true;
        });
        if (!found) continue;
        terms.ctx = Provenance::derived(n.prov, origin[i], rule.name);
        std::optional<Handle> res = rule.build(terms, *found);
        note_origin(origin[i]);
        if (!res || *res == cur.v) continue;
        cur = NodeId{*res};
        ++st.fired[r];
        ++pass_fired[r];
        fired = true;
        if (++st.steps >= st.budgets.max_steps) st.exhausted = true;
      }
      if (!fired) break;
    }
    // the value is unchanged, so the user's name follows it (alias never renames a node that has a name)
    if (cur != built && !n.prov.name.empty()) d.alias(cur, n.prov.name);
    map[i] = cur;
  }
  carry_names(g, map, d);
  std::vector<NodeId> outs;
  for (NodeId o : g.outputs()) outs.push_back(map[o.v]);
  d.set_outputs(outs);
  for (const auto& [wrt, grad] : g.gradients()) d.set_gradient(map[wrt.v], map[grad.v]);
}

}  // namespace

std::string busiest_rules(const std::vector<Rule>& rules, const std::vector<int>& counts) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < counts.size(); ++i)
    if (counts[i] > 0) idx.push_back(i);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return counts[a] > counts[b]; });
  std::string s;
  for (size_t k = 0; k < idx.size() && k < 4; ++k) s += (k ? ", " : "") + rules[idx[k]].name;
  return s;
}

DriverResult run_greedy(const Graph& g, const std::vector<Rule>& rules, const RewriteBudgets& budgets) {
  State st{rules, budgets, std::vector<int>(rules.size(), 0)};
  DriverResult out;
  out.map.resize(g.size());
  for (uint32_t i = 0; i < g.size(); ++i) out.map[i] = NodeId{i};
  std::vector<NodeId> origin = out.map;
  Graph cur = g;
  for (size_t p = 0;; ++p) {
    Graph d;
    std::vector<NodeId> map, d_origin;
    std::vector<int> pass_fired(rules.size(), 0);
    pass(cur, origin, st, pass_fired, d, map, d_origin);
    for (auto& m : out.map)
      if (m.valid()) m = map[m.v];
    cur = std::move(d);
    origin = std::move(d_origin);
    bool any = std::any_of(pass_fired.begin(), pass_fired.end(), [](int c) { return c > 0; });
    if (st.exhausted) {
      out.stop = "budget: steps (cycling: " + busiest_rules(rules, pass_fired) + ")";
      break;
    }
    if (!any) {
      out.stop = "fixed point";
      break;
    }
    if (p + 1 >= budgets.max_passes) {
      out.stop = "budget: passes (cycling: " + busiest_rules(rules, pass_fired) + ")";
      break;
    }
  }
  out.graph = std::move(cur);
  out.fired = std::move(st.fired);
  out.cse = st.cse;
  return out;
}

}  // namespace meganeura::rewrite
