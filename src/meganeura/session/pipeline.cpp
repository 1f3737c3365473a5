// The pass list: Graph -> one recorded GPU step. Each pass is a named function below, called in order by
// compile_step(); the device half (allocation, shader compilation, recording) is in session.cpp.
#include "meganeura/session/pipeline.hpp"
#include "meganeura/session/trace.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "meganeura/autodiff/autodiff.hpp"
#include "meganeura/rewrite/rewrite.hpp"

namespace meganeura {

namespace {

// verify: the graph has outputs and each output depends on some input or parameter.
void pass_verify(const Graph& g, const SessionConfig& config) {
  if (g.outputs().empty())
    throw GraphError("[build] expected a graph with outputs (call Graph::set_outputs), got none");
  for (NodeId o : g.outputs()) {
    std::vector<NodeId> stack{o};
    std::set<NodeId> seen;
    bool leaf = false;
    while (!stack.empty() && !leaf) {
      NodeId n = stack.back();
      stack.pop_back();
      if (!seen.insert(n).second) continue;
      const Node& nd = g.node(n);
      leaf = nd.op == Op::Input || nd.op == Op::Parameter;
      for (NodeId i : nd.inputs) stack.push_back(i);
    }
    if (!leaf) {
      const Node& nd = g.node(o);
      throw GraphError("[build] expected every output to depend on an input or parameter, got output '" +
                       node_label(g, o) + "' (" + op_name(nd.op) + ", built at " + where(nd.prov.loc) +
                       ") that depends on neither");
    }
  }
  if (config.training && g.parameters().empty() && config.optimizer.kind != OptimizerKind::None)
    throw GraphError(
        "[build_session] expected a graph with parameters to train, got none (use "
        "build_inference_session for a graph without parameters)");
}

// The update rule's settings that change the compiled step.
void pass_check_optimizer(const SessionConfig& config) {
  if (!config.training) return;
  const OptimizerConfig& o = config.optimizer;
  if (!(o.clip_grad_norm >= 0) || std::isinf(o.clip_grad_norm))
    throw ConfigError("[build_session] expected OptimizerConfig.clip_grad_norm >= 0 (0: off), got " +
                      std::to_string(o.clip_grad_norm));
  if (o.grad_accumulation < 1)
    throw ConfigError("[build_session] expected OptimizerConfig.grad_accumulation >= 1, got " +
                      std::to_string(o.grad_accumulation));
  if (o.kind == OptimizerKind::None && (o.clip_grad_norm > 0 || o.grad_accumulation > 1))
    throw ConfigError(
        "[build_session] expected an optimizer with clip_grad_norm or grad_accumulation (both are "
        "part of the update), got OptimizerKind::None");
}

// autodiff: gradients of the first output (the loss) for every parameter, found later by handle.
Graph pass_autodiff(const Graph& g) { return differentiate(g, g.outputs().at(0)); }

// rewrite: C2's rule set under the configured driver.
Graph pass_rewrite(const Graph& g, const SessionConfig& config, OptimizeReport& report) {
  RewriteResult r = rewrite::rewrite(g, config.rewrite, report);
  return std::move(r.graph);
}

std::vector<std::pair<NodeId, NodeId>> pass_collect_gradients(const Graph& g) {
  std::vector<std::pair<NodeId, NodeId>> out;
  for (NodeId p : g.parameters()) {
    auto gr = g.gradient(p);
    if (!gr)
      throw GraphError("[build_session] expected a gradient for parameter '" + node_label(g, p) +
                       "', got none");
    out.push_back({p, *gr});
  }
  return out;
}

// schedule: kernels for the outputs, gradients, and (as storage only) every parameter and input.
KernelGraph pass_schedule(const CompiledStep& s, const SessionConfig& config, const CompileOptions& options) {
  std::vector<NodeId> roots = s.outputs;
  for (auto [p, gr] : s.param_grads) roots.push_back(gr);
  for (NodeId p : s.graph.parameters()) roots.push_back(p);
  for (NodeId i : s.graph.inputs()) roots.push_back(i);
  ScheduleOptions so;
  so.fuse = options.fuse;
  so.keep_intermediates = config.keep_intermediates;
  return schedule(s.graph, roots, so);
}

bool updates(const SessionConfig& c) { return c.training && c.optimizer.kind != OptimizerKind::None; }

CodegenOptions codegen_options(const SessionConfig& config) {
  CodegenOptions co;
  co.optimizer = config.optimizer;
  return co;
}
bool needs_step(const OptimizerConfig& o) {
  return o.kind != OptimizerKind::Sgd && o.kind != OptimizerKind::None;
}

// optimizer: fused update kernels over the persistent arena, after everything else (plus the gradient
// norm for clipping, and the accumulate-only kernels for gradient accumulation).
// Updates run inside the kernels computing their gradients where they can, unless the gradients must stay
// readable (keep_gradients, debug sessions) or fusion is off.
void pass_optimizer(CompiledStep& s, const SessionConfig& config, const CompileOptions& options) {
  if (!updates(config)) return;
  const OptimizerConfig& o = config.optimizer;
  append_optimizer(
      s.kernels, s.graph, s.param_grads,
      {.needs_step = needs_step(o),
       .clip = o.clip_grad_norm > 0,
       .accumulate = o.grad_accumulation > 1,
       .fuse = options.fuse && !config.keep_gradients && !config.keep_intermediates &&
               !config.distributed.enabled()});  // distributed: gradients are averaged before updates
}

uint32_t norm_partials(const CompiledStep& s, const CodegenOptions& co) {
  for (const Kernel& k : s.kernels.kernels) {
    if (k.arch != Archetype::GradNorm) continue;
    int64_t n = 0;
    for (auto [p, gr] : k.param_grads) n += numel(s.graph.node(p).shape);
    return codegen::grad_norm_groups(n, co.workgroup);
  }
  return 0;
}

MemoryPlan pass_plan_memory(const CompiledStep& s, const SessionConfig& config,
                            const runtime::DeviceCaps& caps) {
  PlanOptions po;
  po.alias = config.alias_memory && !config.keep_intermediates;
  po.alignment = std::max<uint64_t>(caps.min_storage_buffer_offset_alignment, 16);
  po.max_buffer_bytes = runtime::bindable_bytes(caps);  // a part is a whole allocator buffer
  po.outputs = s.outputs;
  po.param_grads = s.param_grads;
  po.moments_per_parameter = updates(config) ? codegen::moments_for(config.optimizer) : 0;
  po.accumulators = updates(config) && config.optimizer.grad_accumulation > 1;
  po.hyper_bytes = updates(config) ? codegen::hyper_bytes(norm_partials(s, codegen_options(config))) : 0;
  // A kernel's scratch (and tickets) are as large as the furthest byte any of its dispatches writes.
  std::map<NodeId, uint64_t> scratch, tickets;
  for (const GeneratedKernel& k : s.code)
    for (const Binding& b : k.bindings)
      if ((b.kind == Binding::Scratch || b.kind == Binding::Tickets) && b.write) {
        uint64_t& bytes = (b.kind == Binding::Scratch ? scratch : tickets)[b.node];
        bytes = std::max(bytes, b.offset + b.bytes);
      }
  for (const auto& [root, bytes] : scratch) po.scratch.push_back({root, bytes});
  for (const auto& [root, bytes] : tickets) po.tickets.push_back({root, bytes});
  return plan_memory(s.graph, s.kernels, po);
}

std::vector<GeneratedKernel> pass_codegen(CompiledStep& s, const SessionConfig& config,
                                          const runtime::DeviceCaps& caps, const CompileOptions& options) {
  CodegenOptions co = codegen_options(config);
  co.deterministic_scatter = options.deterministic_scatter;
  co.precision = config.precision;
  if (options.matmul_best)
    co.matmul_best = *options.matmul_best;
  else if (config.matmul_tier)
    co.matmul_best = *config.matmul_tier;
  s.codegen = co;
  return generate(s.graph, s.kernels, caps, co);
}

}  // namespace

CompiledStep compile_step(const Graph& g, const SessionConfig& config, const runtime::DeviceCaps& caps,
                          const CompileOptions& options) {
  CompiledStep s;
  s.fuse = options.fuse;
  auto span = [&](const char* pass) { return std::make_unique<Trace::Scope>(options.trace, pass, "build"); };
  auto t = span("verify");
  pass_verify(g, config);
  pass_check_optimizer(config);
  t.reset();
  t = span("autodiff");
  Graph differentiated = config.training ? pass_autodiff(g) : g;
  t.reset();
  t = span("rewrite");
  s.graph = pass_rewrite(differentiated, config, s.report);
  s.outputs = s.graph.outputs();
  t.reset();
  t = span("schedule");
  if (config.training) s.param_grads = pass_collect_gradients(s.graph);
  s.kernels = pass_schedule(s, config, options);
  pass_optimizer(s, config, options);
  t.reset();
  t = span("codegen");
  s.code = pass_codegen(s, config, caps, options);
  t.reset();
  t = span("tuned variants");
  apply_tune_cache(s, config.cache_dir, caps);
  t.reset();
  t = span("plan memory");  // after codegen, which says what scratch its kernels need
  s.plan = pass_plan_memory(s, config, caps);
  t.reset();
  s.report.kernels = s.kernels.kernels.size();
  return s;
}

std::vector<size_t> step_kernels(const CompiledStep& s, bool update) {
  std::vector<size_t> out;
  // Indices into s.code, which may hold more dispatches than s.kernels has kernels (a scatter's clear).
  for (size_t i = 0; i < s.code.size(); ++i) {
    StepPart part = s.kernels.kernels[s.code[i].kernel].part;
    if (part == StepPart::Every || part == (update ? StepPart::UpdateOnly : StepPart::AccumulateOnly))
      out.push_back(i);
  }
  return out;
}

bool accumulates(const CompiledStep& s) {
  for (const Kernel& k : s.kernels.kernels)
    if (k.part == StepPart::AccumulateOnly) return true;
  return false;
}

namespace {

struct Range {
  uint64_t key, begin, end;
  bool overlaps(const Range& o) const { return key == o.key && begin < o.end && o.begin < end; }
};

Range binding_range(const CompiledStep& s, const Binding& b) {
  size_t slot = 0;
  switch (b.kind) {
    case Binding::Value: slot = s.plan.slot(s.kernels, b.node); break;
    case Binding::Moment: slot = s.plan.moments.at({b.node, b.moment}); break;
    case Binding::Accumulator: slot = s.plan.accumulators.at(b.node); break;
    case Binding::Hyper: slot = *s.plan.hyper; break;
    case Binding::Scratch: slot = s.plan.scratch.at(b.node); break;
    case Binding::Tickets: slot = s.plan.tickets.at(b.node); break;
  }
  const Slot& sl = s.plan.slots[slot];
  if (in_arena(sl.kind)) return {0, sl.offset, sl.offset + sl.bytes};
  return {slot + 1, 0, sl.bytes};
}

}  // namespace

std::vector<bool> plan_barriers(const CompiledStep& s, const std::vector<size_t>& kernels) {
  std::vector<bool> before(kernels.size(), false);
  std::vector<Range> reads, writes;
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::vector<Range> r, w;
    for (const Binding& b : s.code[kernels[i]].bindings) (b.write ? w : r).push_back(binding_range(s, b));
    bool hazard = i == 0;  // the first kernel waits for the previous step and host uploads
    for (const Range& x : r)
      for (const Range& y : writes) hazard = hazard || x.overlaps(y);
    for (const Range& x : w) {
      for (const Range& y : writes) hazard = hazard || x.overlaps(y);
      for (const Range& y : reads) hazard = hazard || x.overlaps(y);
    }
    if (hazard) {
      before[i] = true;
      reads.clear();
      writes.clear();
    }
    reads.insert(reads.end(), r.begin(), r.end());
    reads.insert(reads.end(), w.begin(), w.end());
    writes.insert(writes.end(), w.begin(), w.end());
  }
  return before;
}

namespace {

void list_text(std::ostringstream& os, const CompiledStep& s, const std::vector<size_t>& kernels,
               const char* title) {
  const std::vector<bool> barrier_before = plan_barriers(s, kernels);
  std::set<uint64_t> unique;
  size_t barriers = 0;
  for (size_t i = 0; i < kernels.size(); ++i) {
    unique.insert(s.code[kernels[i]].hash);
    barriers += barrier_before[i] ? 1 : 0;
  }
  os << title << ": " << kernels.size() << " dispatches, " << unique.size() << " distinct kernels, "
     << barriers << " barriers\n";
  auto value_name = [&](const Binding& b) -> std::string {
    switch (b.kind) {
      case Binding::Value: {
        const Node& n = s.graph.node(b.node);
        return node_label(s.graph, b.node) + " " + dtype_name(n.dtype) + shape_str(n.shape);
      }
      case Binding::Moment: return node_label(s.graph, b.node) + ".moment" + std::to_string(b.moment);
      case Binding::Accumulator: return node_label(s.graph, b.node) + ".accumulator";
      case Binding::Hyper: return "hyper(lr,step,clip)";
      case Binding::Scratch: return "scratch of " + node_label(s.graph, b.node);
      case Binding::Tickets: return "split-K tickets of " + node_label(s.graph, b.node);
    }
    return "?";
  };
  for (size_t i = 0; i < kernels.size(); ++i) {
    const GeneratedKernel& k = s.code[kernels[i]];
    if (barrier_before[i]) os << "  -- barrier --\n";
    const Kernel& kn = s.kernels.kernels[k.kernel];
    os << "  #" << kernels[i] << " " << archetype_name(k.arch) << " [" << k.label << "] grid " << k.grid[0]
       << "x" << k.grid[1] << "x" << k.grid[2] << " " << phase_name(kernel_phase(s.graph, kn));
    if (kn.root.valid()) os << " from " << where(s.graph.node(kn.root).prov.loc);
    if (!k.tuned.is_default()) os << " tuned " << k.tuned.to_string();
    os << "\n";
    for (const Binding& b : k.bindings)
      os << "      " << (b.write ? "out " : "in  ") << value_name(b) << " (" << b.bytes << " B)\n";
  }
}

}  // namespace

std::string plan_text(const CompiledStep& s) {
  std::ostringstream os;
  list_text(os, s, step_kernels(s, true), "meganeura plan");
  if (accumulates(s)) list_text(os, s, step_kernels(s, false), "accumulate-only step");
  MemorySummary m = s.plan.summary();
  os << "memory: parameters " << m.parameters << " B, gradients " << m.gradients << " B, optimizer state "
     << m.optimizer_state << " B, activations " << m.activations << " B, inputs " << m.inputs
     << " B, outputs " << m.outputs << " B\n";
  return os.str();
}

}  // namespace meganeura
