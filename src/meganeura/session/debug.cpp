// Debug entry points of a Session: reading any named value (with a structured reason when it cannot be read)
// and the NaN/Inf scan after a step.
#include <cmath>
#include <set>

#include "meganeura/session/session_impl.hpp"

namespace meganeura {

const char* read_failure_name(ReadFailure r) {
  switch (r) {
    case ReadFailure::UnknownName: return "unknown name";
    case ReadFailure::NotComputed: return "not computed";
    case ReadFailure::FusedAway: return "fused away";
    case ReadFailure::Inlined: return "inlined";
    case ReadFailure::MemoryReused: return "memory reused";
  }
  return "?";
}

namespace {

[[noreturn]] void fail(ReadFailure r, const std::string& name, const std::string& kernel,
                       const std::string& why) {
  throw NodeReadError("[Session::read_node_by_name] expected a value the step stored, got '" + name + "' (" +
                          read_failure_name(r) + "): " + why,
                      r, name, kernel);
}

const char* kDebugHint = "; build with SessionConfig::debug() to keep every value";

// The dispatch that overwrites slot `si` after its value was last needed, or npos: an activation shares bytes
// with another only when their live ranges (in levels) are disjoint, so a later one reuses the bytes.
size_t reused_by(const CompiledStep& s, size_t si) {
  const Slot& a = s.plan.slots[si];
  if (a.kind != StorageKind::Activation) return SIZE_MAX;
  for (const Slot& b : s.plan.slots) {
    if (&b == &a || !in_arena(b.kind) || b.first <= a.last) continue;
    if (b.offset < a.offset + a.bytes && a.offset < b.offset + b.bytes) {
      auto it = s.kernels.producer.find(b.node);
      if (it != s.kernels.producer.end()) return it->second;
    }
  }
  return SIZE_MAX;
}

std::string value_label(const Graph& g, NodeId n) {
  std::string l = provenance_label(g, n);
  return l.empty() ? node_label(g, n) : l;
}

}  // namespace

std::vector<float> Session::read_node_by_name(const std::string& name) {
  const CompiledStep& s = impl_->step;
  const Graph& g = s.graph;
  auto n = g.find(name);
  if (!n) fail(ReadFailure::UnknownName, name, "", "no node of the compiled graph has that name");
  NodeId st = s.kernels.storage_of(*n);
  auto slot = s.plan.slot_of.find(st);
  if (slot != s.plan.slot_of.end()) {
    size_t k = reused_by(s, slot->second);
    if (k != SIZE_MAX)
      fail(ReadFailure::MemoryReused, name, s.kernels.kernels[k].label,
           "dispatch #" + std::to_string(k) + " [" + s.kernels.kernels[k].label + "] reuses its bytes" +
               kDebugHint);
    return impl_->download_value(*n);
  }
  const Node& nd = g.node(*n);
  if (op_class(nd.op) == OpClass::Fill)
    fail(ReadFailure::Inlined, name, "", "a constant fill, written into its readers as a literal");
  for (size_t k = 0; k < s.kernels.kernels.size(); ++k) {
    const Kernel& K = s.kernels.kernels[k];
    if (K.fused(*n))
      fail(ReadFailure::FusedAway, name, K.label,
           "computed inside dispatch #" + std::to_string(k) + " [" + K.label + "] and never stored" +
               kDebugHint);
  }
  fail(ReadFailure::NotComputed, name, "", "the step does not need it (dead code or rewritten away)");
}

std::string NanReport::to_text() const {
  if (!found) return "no NaN/Inf in " + std::to_string(values_scanned) + " values";
  std::string v = std::isnan(value) ? "NaN" : value > 0 ? "+Inf" : "-Inf";
  std::string s = "first non-finite value: '" + node + "' (" + op + ", built at " + builder + ")";
  if (!kernel.empty()) s += ", written by dispatch #" + std::to_string(dispatch) + " [" + kernel + "]";
  if (!stage.empty()) s += ", " + stage;
  return s + ": element " + std::to_string(index) + " is " + v + ", " + std::to_string(non_finite) +
         " non-finite elements (the first value holding one, not necessarily the root cause)";
}

NanReport Session::step_debug() {
  const CompiledStep& s = impl_->step;
  const Graph& g = s.graph;
  const bool all = impl_->config.keep_intermediates;
  std::set<NodeId> wanted(s.outputs.begin(), s.outputs.end());
  for (auto [p, gr] : s.param_grads) wanted.insert(gr);
  NanReport r;
  auto check = [&](const std::vector<float>& v, const std::string& label, const Node& nd,
                   const std::string& op, const std::string& kernel, size_t dispatch, const char* stage) {
    ++r.values_scanned;
    if (r.found) return;
    for (size_t i = 0; i < v.size(); ++i) {
      if (std::isfinite(v[i])) continue;
      if (r.non_finite++ > 0) continue;
      r.found = true;
      r.node = label;
      r.op = op;
      r.builder = where(nd.prov.loc);
      r.kernel = kernel;
      r.dispatch = dispatch;
      r.stage = stage;
      r.index = i;
      r.value = v[i];
    }
  };
  auto scan = [&](NodeId n, const std::string& kernel, size_t dispatch, const char* stage) {
    const Node& nd = g.node(n);
    check(impl_->download_value(n), value_label(g, n), nd, op_name(nd.op), kernel, dispatch, stage);
  };
  // What the step reads first: a parameter (or optimizer moment) left non-finite by an earlier step poisons
  // everything after it, and is named as itself rather than as the first dispatch that read it.
  auto scan_state = [&](const char* stage) {
    for (NodeId p : g.parameters())
      if (g.node(p).dtype == DType::F32) scan(p, "", 0, stage);
    for (const OptimizerStateInfo& m : optimizer_state()) {
      // "optim.m/w1": the builder line is the parameter's
      const auto p = g.find(m.name.substr(m.name.find('/') + 1));
      check(read_optimizer_state(m.name), m.name, g.node(p ? *p : g.parameters().at(0)), "optimizer state",
            "", 0, stage);
    }
  };
  impl_->device->wait();
  scan_state("before the step");
  step();
  wait();
  for (NodeId in : g.inputs())
    if (g.node(in).dtype == DType::F32 && !r.found) scan(in, "", 0, "");
  for (size_t k = 0; k < s.kernels.kernels.size() && !r.found; ++k) {
    const Kernel& K = s.kernels.kernels[k];
    // Values only: the step counter, clipping and accumulation kernels write the hyper block or private
    // buffers.
    if (!K.root.valid() || (kernel_phase(g, K) == Phase::Update && K.arch != Archetype::Optimizer)) continue;
    if (K.update.valid()) continue;  // a gradient that went straight into its update has no storage
    if (!all && !wanted.count(K.root)) continue;
    if (g.node(K.root).dtype != DType::F32) continue;
    scan(K.root, K.label, k, "");
  }
  if (!r.found) scan_state("after the update");
  return r;
}

}  // namespace meganeura
