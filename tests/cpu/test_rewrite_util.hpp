#pragma once
// Helpers for the rewrite tests: deterministic feeds, evaluation through the CPU reference interpreter,
// and structural queries on a rewritten graph.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "meganeura/reference/interpreter.hpp"
#include "meganeura/rewrite/graph_util.hpp"
#include "meganeura/rewrite/rewrite.hpp"

namespace meganeura::test {

// Values in [lo, hi] derived from the name alone, so a graph and its rewrite see the same feeds.
inline std::vector<double> values_for(const std::string& name, int64_t n, double lo = -1.5, double hi = 1.5) {
  uint64_t s = 1469598103934665603ULL;
  for (char c : name) s = (s ^ uint8_t(c)) * 1099511628211ULL;
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x = lo + (hi - lo) * double(s % 1000003) / 1000003.0;
    x = double(float(x));  // representable in f32 like a real upload
  }
  return v;
}

inline reference::Feeds feeds_for(const Graph& g) {
  reference::Feeds f;
  for (const auto& list : {g.inputs(), g.parameters()})
    for (NodeId id : list) {
      const Node& n = g.node(id);
      f[n.prov.name] = HostTensor(n.shape, values_for(n.prov.name, numel(n.shape)));
    }
  return f;
}

inline void expect_close(const HostTensor& a, const HostTensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.shape, b.shape) << what;
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], tol * (1.0 + std::abs(a[i]))) << what << " element " << i;
}

// Outputs and gradients of `before` and `after` agree on the same feeds.
inline void expect_same_values(const Graph& before, const RewriteResult& after, double tol = 1e-6) {
  reference::Feeds f = feeds_for(before);
  auto a = reference::evaluate_outputs(before, f);
  auto b = reference::evaluate_outputs(after.graph, f);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) expect_close(a[i], b[i], tol, "output " + std::to_string(i));
  for (const auto& [wrt, grad] : before.gradients()) {
    auto ga = reference::evaluate(before, f, grad);
    auto gb = reference::evaluate(after.graph, f, *after.graph.gradient(after.map(wrt)));
    expect_close(ga, gb, tol, "gradient of %" + std::to_string(wrt.v));
  }
}

// How many live nodes of g have op `op`.
inline int count_op(const Graph& g, Op op) {
  auto live = rewrite::live_nodes(g);
  int c = 0;
  for (uint32_t i = 0; i < g.size(); ++i)
    if (live[i] && g.node(NodeId{i}).op == op) ++c;
  return c;
}

inline int live_count(const Graph& g) {
  auto live = rewrite::live_nodes(g);
  int c = 0;
  for (bool b : live) c += b;
  return c;
}

inline int fired(const OptimizeReport& r, const std::string& rule) {
  for (const auto& [name, n] : r.rules_fired)
    if (name == rule) return n;
  return 0;
}

// Every node with everything that identifies it, so two graphs compare equal as text only when they are.
inline std::string dump(const Graph& g) {
  std::ostringstream s;
  for (uint32_t i = 0; i < g.size(); ++i) {
    const Node& n = g.node(NodeId{i});
    s << '%' << i << ' ' << op_name(n.op) << ' ' << shape_str(n.shape) << ' ' << dtype_name(n.dtype) << " (";
    for (NodeId k : n.inputs) s << '%' << k.v << ' ';
    s << ") axes";
    for (auto a : n.attrs.axes) s << ' ' << a;
    s << " ints";
    for (auto a : n.attrs.ints) s << ' ' << a;
    s << " reals";
    for (auto a : n.attrs.reals) s << ' ' << a;
    s << " flags " << n.attrs.flag_a << n.attrs.flag_b << n.attrs.keepdim << " red " << int(n.attrs.reduction)
      << " name '" << n.prov.name << "' rule '" << n.prov.rule << "'";
    for (NodeId d : n.prov.derived_from) s << " <%" << d.v;
    s << '\n';
  }
  for (NodeId o : g.outputs()) s << "out %" << o.v << '\n';
  for (const auto& [w, gr] : g.gradients()) s << "grad %" << w.v << " = %" << gr.v << '\n';
  return s.str();
}

inline std::string mode_name(RewriteMode m) {
  return m == RewriteMode::Greedy ? "greedy" : m == RewriteMode::Saturate ? "saturate" : "off";
}

}  // namespace meganeura::test
