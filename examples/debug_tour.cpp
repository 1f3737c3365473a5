// The debugging tools on one small model, in the order docs/debugging.md walks through them:
//   1. provenance: dispatch labels carry the names given while building (grad/<name> for the backward pass);
//   2. a debug session reads any named value, gradients included, after step() + wait();
//   3. step_debug() names the first value holding a NaN/Inf, with its builder line;
//   4. eager evaluation of a graph still being built, on the kernels a session would run.
// Run with MEGANEURA_TRACE=trace.json to get a CPU/GPU timeline of it as well.
#include <cmath>
#include <cstdio>
#include <vector>

#include "flags.hpp"
#include "meganeura/eager/eager.hpp"
#include "meganeura/meganeura.hpp"
#include "meganeura/nn/nn.hpp"

using namespace meganeura;

namespace {

void print(const char* what, const std::vector<float>& v, size_t n = 4) {
  std::printf("  %-16s", what);
  for (size_t i = 0; i < n && i < v.size(); ++i) std::printf(" %9.5f", v[i]);
  std::printf("%s\n", v.size() > n ? " ..." : "");
}

}  // namespace

int main(int argc, char** argv) {
  cli::Flags flags("debug_tour",
                   "A guided tour of the debugging tools on a tiny model: names, a debug session's "
                   "reads,\nstep_debug's NaN report and eager evaluation (docs/debugging.md).");
  try {
    if (!flags.parse(argc, argv)) return 0;
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "%s\n\n%s", e.what(), flags.usage().c_str());
    return 2;
  }
  try {
    Graph g;
    nn::Context ctx(g, 3);
    NodeId x = g.input("x", {4, 8});
    NodeId target = g.input("target", {4, 2});
    NodeId qkv;
    {
      auto s = ctx.scope("blk3");
      nn::Linear proj(ctx, "qkv", 8, 16);  // its output is named "blk3.qkv"
      qkv = proj(x);
    }
    nn::Linear head(ctx, "head", 16, 2);
    NodeId y = head(g.tanh(qkv));
    g.set_outputs({g.named(g.mse_loss(y, target), "loss")});
    std::vector<float> xv(32), tv(8, 0.25f);
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(float(i));

    std::printf(
        "1. provenance: names in the compiled graph (MEGANEURA_DUMP_PLAN=1 prints every dispatch's label)\n");
    Session s = build(g, SessionConfig::debug());
    for (const auto& [name, w] : ctx.weights()) s.set_parameter(name, w);
    s.set_input("x", xv);
    s.set_input("target", tv);
    for (const char* name : {"blk3.qkv", "grad/blk3.qkv", "grad/blk3.qkv.weight"}) {
      const Node& n = s.graph().node(*s.graph().find(name));
      std::printf("  %-22s %-8s %s, made by %s at %s\n", name, op_name(n.op),
                  n.prov.backward ? "backward" : "forward",
                  n.prov.rule.empty() ? "the user" : n.prov.rule.c_str(), where(n.prov.loc).c_str());
    }

    std::printf("2. debug session: values after step() + wait()\n");
    s.step();
    s.wait();
    print("blk3.qkv", s.read_node_by_name("blk3.qkv"));
    print("grad/blk3.qkv", s.read_node_by_name("grad/blk3.qkv"));
    print("loss", s.read_node_by_name("loss"), 1);

    std::printf("3. step_debug() with a NaN in the input\n");
    xv[5] = std::nanf("");
    s.set_input("x", xv);
    std::printf("  %s\n", s.step_debug().to_text().c_str());
    xv[5] = std::sin(5.0f);

    std::printf("4. eager: values of a graph still being built (blk3.qkv as in 2, before the update)\n");
    eager::Eager ev;
    ev.set("x", xv);
    for (const auto& [name, w] : ctx.weights()) ev.set(name, w);
    print("blk3.qkv", ev.eval(g, qkv));
    NodeId extra = g.softmax(y);  // the graph keeps growing after eval
    print("softmax(head)", ev.eval(g, extra), 2);
    std::printf("  %zu subgraphs compiled\n", ev.compiled());
  } catch (const Error& e) {
    std::fprintf(stderr, "debug_tour: %s\n", e.what());
    return 1;
  }
  return 0;
}
