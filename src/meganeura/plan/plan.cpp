// Liveness-based memory planning. Live ranges are measured in kernel levels (not kernel positions):
// kernels of one level run between the same pair of barriers, so two values may share bytes only when
// one is dead before the other's level begins.
#include "meganeura/plan/plan.hpp"

#include <algorithm>
#include <set>
#include <sstream>

namespace meganeura {

const char* storage_kind_name(StorageKind k) {
  switch (k) {
    case StorageKind::Parameter: return "parameter";
    case StorageKind::Gradient: return "gradient";
    case StorageKind::Accumulator: return "accumulator";
    case StorageKind::OptimizerState: return "optimizer-state";
    case StorageKind::Activation: return "activation";
    case StorageKind::Input: return "input";
    case StorageKind::Output: return "output";
    case StorageKind::Constant: return "constant";
    case StorageKind::Hyper: return "hyper";
    case StorageKind::Scratch: return "scratch";
  }
  return "?";
}

uint64_t storage_bytes(const Node& n) {
  uint64_t b = uint64_t(numel(n.shape)) * dtype_size(n.dtype);
  return std::max<uint64_t>(b, 4);
}

size_t MemoryPlan::slot(const KernelGraph& kg, NodeId n) const {
  auto it = slot_of.find(kg.storage_of(n));
  if (it == slot_of.end())
    throw SessionError("[plan] expected a planned value, got node #" + std::to_string(n.v) + " without storage");
  return it->second;
}

MemorySummary MemoryPlan::summary() const {
  MemorySummary s;
  for (const Slot& sl : slots) {
    switch (sl.kind) {
      case StorageKind::Parameter: s.parameters += sl.bytes; break;
      case StorageKind::Gradient: case StorageKind::Accumulator: s.gradients += sl.bytes; break;
      case StorageKind::OptimizerState: s.optimizer_state += sl.bytes; break;
      case StorageKind::Activation: case StorageKind::Scratch: break;  // counted once, as the arena
      case StorageKind::Output: s.outputs += sl.bytes; break;
      // Constants and the hyper-parameter block are host-provided data of the step, like inputs.
      case StorageKind::Input: case StorageKind::Constant: case StorageKind::Hyper: s.inputs += sl.bytes; break;
    }
  }
  s.activations = arena_bytes;
  return s;
}

std::string MemoryPlan::to_text(const Graph& g) const {
  std::ostringstream os;
  for (const Slot& s : slots) {
    os << storage_kind_name(s.kind) << " ";
    if (s.kind == StorageKind::Hyper) os << "lr,step,clip";
    else os << node_label(g, s.node);
    if (s.kind == StorageKind::OptimizerState) os << ".m" << s.moment;
    os << " " << s.bytes << " B";
    if (in_arena(s.kind)) os << " @" << s.offset << " levels " << s.first << ".." << s.last;
    os << "\n";
  }
  os << "activation arena " << arena_bytes << " B\n";
  return os.str();
}

namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// First fit: the lowest aligned offset that overlaps no already placed value with an intersecting range.
void place(std::vector<Slot>& slots, const std::vector<size_t>& order, uint64_t alignment, bool alias,
           uint64_t& arena) {
  std::vector<size_t> placed;
  arena = 0;
  for (size_t i : order) {
    Slot& s = slots[i];
    uint64_t size = align_up(s.bytes, alignment);
    uint64_t offset = 0;
    if (alias) {
      std::vector<std::pair<uint64_t, uint64_t>> busy;
      for (size_t j : placed) {
        const Slot& o = slots[j];
        if (o.last < s.first || s.last < o.first) continue;
        busy.push_back({o.offset, o.offset + align_up(o.bytes, alignment)});
      }
      std::sort(busy.begin(), busy.end());
      for (auto [b, e] : busy) {
        if (offset + size <= b) break;
        offset = std::max(offset, e);
      }
    } else {
      offset = arena;
    }
    s.offset = offset;
    arena = std::max(arena, offset + size);
    placed.push_back(i);
  }
}

}  // namespace

MemoryPlan plan_memory(const Graph& g, const KernelGraph& kg, const PlanOptions& options) {
  MemoryPlan plan;
  std::set<NodeId> outputs, grads;
  for (NodeId o : options.outputs) outputs.insert(kg.storage_of(o));
  for (auto [p, gr] : options.param_grads) grads.insert(kg.storage_of(gr));

  auto add = [&](Slot s) {
    plan.slots.push_back(s);
    return plan.slots.size() - 1;
  };
  std::vector<size_t> activations;
  for (NodeId n : kg.materialised) {
    const Node& nd = g.node(n);
    Slot s;
    s.node = n;
    s.bytes = storage_bytes(nd);
    if (nd.op == Op::Parameter) s.kind = StorageKind::Parameter;
    else if (nd.op == Op::Input) s.kind = StorageKind::Input;
    else if (nd.op == Op::Constant) s.kind = StorageKind::Constant;
    else if (grads.count(n)) s.kind = StorageKind::Gradient;
    else if (outputs.count(n)) s.kind = StorageKind::Output;
    else s.kind = StorageKind::Activation;
    size_t idx = add(s);
    plan.slot_of[n] = idx;
    if (s.kind == StorageKind::Activation) activations.push_back(idx);
  }
  // Live ranges of activations.
  for (size_t i : activations) {
    Slot& s = plan.slots[i];
    auto it = kg.producer.find(s.node);
    s.first = s.last = it == kg.producer.end() ? 0 : kg.kernels[it->second].level;
  }
  for (const Kernel& k : kg.kernels) {
    for (NodeId r : k.reads) {
      auto it = plan.slot_of.find(kg.storage_of(r));
      if (it == plan.slot_of.end()) continue;
      Slot& s = plan.slots[it->second];
      if (s.kind == StorageKind::Activation) s.last = std::max(s.last, k.level);
    }
  }
  // Scratch lives for its kernel's level only.
  for (const PlanOptions::ScratchRequest& r : options.scratch) {
    Slot s;
    s.kind = StorageKind::Scratch;
    s.node = r.root;
    s.bytes = std::max<uint64_t>(r.bytes, 4);
    auto it = kg.producer.find(kg.storage_of(r.root));
    if (it == kg.producer.end())
      throw SessionError("[plan] expected scratch for a kernel's root, got node #" + std::to_string(r.root.v));
    s.first = s.last = kg.kernels[it->second].level;
    const size_t idx = add(s);
    plan.scratch[r.root] = idx;
    activations.push_back(idx);
  }
  // Larger values first packs tighter; ties by kind (scratch after the value of the same node) then node id keep
  // the plan deterministic.
  std::stable_sort(activations.begin(), activations.end(), [&](size_t a, size_t b) {
    const Slot& x = plan.slots[a];
    const Slot& y = plan.slots[b];
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    return x.node != y.node ? x.node < y.node : x.kind < y.kind;
  });
  place(plan.slots, activations, std::max<uint64_t>(options.alignment, 4), options.alias, plan.arena_bytes);

  for (auto [p, gr] : options.param_grads) {
    for (uint32_t m = 0; m < options.moments_per_parameter; ++m) {
      Slot s;
      s.kind = StorageKind::OptimizerState;
      s.node = p;
      s.moment = m;
      s.bytes = storage_bytes(g.node(p));
      plan.moments[{p, m}] = add(s);
    }
  }
  if (options.accumulators) {
    for (auto [p, gr] : options.param_grads) {
      Slot s;
      s.kind = StorageKind::Accumulator;
      s.node = p;
      s.bytes = storage_bytes(g.node(p));
      plan.accumulators[p] = add(s);
    }
  }
  if (options.hyper_bytes > 0) {
    Slot s;
    s.kind = StorageKind::Hyper;
    s.bytes = options.hyper_bytes;
    plan.hyper = add(s);
  }
  return plan;
}

}  // namespace meganeura
