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
    case StorageKind::State: return "state";
    case StorageKind::Gradient: return "gradient";
    case StorageKind::Accumulator: return "accumulator";
    case StorageKind::OptimizerState: return "optimizer-state";
    case StorageKind::Activation: return "activation";
    case StorageKind::Input: return "input";
    case StorageKind::Output: return "output";
    case StorageKind::Constant: return "constant";
    case StorageKind::Hyper: return "hyper";
    case StorageKind::Scratch: return "scratch";
    case StorageKind::Tickets: return "tickets";
  }
  return "?";
}

uint64_t storage_bytes(const Node& n) {
  // Whole 32-bit words: kernels read block-quantized storage (rows of 18-, 34-, 210-byte blocks ..) as words.
  const uint64_t b = meganeura::storage_bytes(n.dtype, numel(n.shape));
  return std::max<uint64_t>((b + 3) / 4 * 4, 4);
}

size_t MemoryPlan::slot(const KernelGraph& kg, NodeId n) const {
  auto it = slot_of.find(kg.storage_of(n));
  if (it == slot_of.end())
    throw SessionError("[plan] expected a planned value, got node #" + std::to_string(n.v) +
                       " without storage");
  return it->second;
}

MemorySummary MemoryPlan::summary() const {
  MemorySummary s;
  for (const Slot& sl : slots) {
    switch (sl.kind) {
      case StorageKind::Parameter: s.parameters += sl.bytes; break;
      case StorageKind::State: s.state += sl.bytes; break;
      case StorageKind::Gradient:
      case StorageKind::Accumulator: s.gradients += sl.bytes; break;
      case StorageKind::OptimizerState: s.optimizer_state += sl.bytes; break;
      case StorageKind::Activation:
      case StorageKind::Scratch: break;                             // counted once, as the arena
      case StorageKind::Tickets: s.activations += sl.bytes; break;  // kernel bookkeeping, beside scratch
      case StorageKind::Output: s.outputs += sl.bytes; break;
      // Constants and the hyper-parameter block are host-provided data of the step, like inputs.
      case StorageKind::Input:
      case StorageKind::Constant:
      case StorageKind::Hyper: s.inputs += sl.bytes; break;
    }
  }
  s.activations += arena_bytes;
  return s;
}

std::string MemoryPlan::to_text(const Graph& g) const {
  std::ostringstream os;
  for (const Slot& s : slots) {
    os << storage_kind_name(s.kind) << " ";
    if (s.kind == StorageKind::Hyper)
      os << "lr,step,clip";
    else
      os << node_label(g, s.node);
    if (s.kind == StorageKind::OptimizerState) os << ".m" << s.moment;
    os << " " << s.bytes << " B";
    if (in_arena(s.kind)) os << " @" << s.offset << " levels " << s.first << ".." << s.last;
    os << "\n";
  }
  os << "activation arena " << arena_bytes << " B\n";
  if (parts(arena_bytes, part_bytes) > 1 || parts(persistent_bytes, part_bytes) > 1)
    os << "split into buffers of " << part_bytes << " B: persistent " << parts(persistent_bytes, part_bytes)
       << ", activation " << parts(arena_bytes, part_bytes) << "\n";
  return os.str();
}

namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// The lowest offset from `offset` on where `size` bytes stay inside one part of `part` bytes (0: no parts).
uint64_t within_part(uint64_t offset, uint64_t size, uint64_t part) {
  if (part == 0 || offset / part == (offset + size - 1) / part) return offset;
  return (offset / part + 1) * part;
}

// First fit: the lowest aligned offset that overlaps no already placed value with an intersecting range and
// crosses no part boundary.
void place(std::vector<Slot>& slots, const std::vector<size_t>& order, uint64_t alignment, bool alias,
           uint64_t part, uint64_t& arena) {
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
      offset = within_part(0, size, part);
      for (auto [b, e] : busy) {
        if (offset + size <= b) break;
        if (e > offset) offset = within_part(e, size, part);
      }
    } else {
      offset = within_part(arena, size, part);
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
    if (nd.op == Op::Parameter)
      s.kind = nd.attrs.flag_a ? StorageKind::State : StorageKind::Parameter;
    else if (nd.op == Op::Input)
      s.kind = StorageKind::Input;
    else if (nd.op == Op::Constant)
      s.kind = StorageKind::Constant;
    else if (grads.count(n))
      s.kind = StorageKind::Gradient;
    else if (outputs.count(n))
      s.kind = StorageKind::Output;
    else
      s.kind = StorageKind::Activation;
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
      throw SessionError("[plan] expected scratch for a kernel's root, got node #" +
                         std::to_string(r.root.v));
    s.first = s.last = kg.kernels[it->second].level;
    const size_t idx = add(s);
    plan.scratch[r.root] = idx;
    activations.push_back(idx);
  }
  // Larger values first packs tighter; ties by kind (scratch after the value of the same node) then node id
  // keep the plan deterministic.
  std::stable_sort(activations.begin(), activations.end(), [&](size_t a, size_t b) {
    const Slot& x = plan.slots[a];
    const Slot& y = plan.slots[b];
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    return x.node != y.node ? x.node < y.node : x.kind < y.kind;
  });
  const uint64_t alignment = std::max<uint64_t>(options.alignment, 4);
  if (options.max_buffer_bytes) {
    plan.part_bytes = options.max_buffer_bytes / alignment * alignment;
    if (plan.part_bytes == 0)
      throw SessionError("[plan] expected a maximum buffer size of at least the alignment " +
                         std::to_string(alignment) + " bytes, got " +
                         std::to_string(options.max_buffer_bytes));
  }
  place(plan.slots, activations, alignment, options.alias, plan.part_bytes, plan.arena_bytes);

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
  for (const PlanOptions::ScratchRequest& r : options.tickets) {
    Slot s;
    s.kind = StorageKind::Tickets;
    s.node = r.root;
    s.bytes = std::max<uint64_t>(r.bytes, 4);
    plan.tickets[r.root] = add(s);
  }
  if (options.hyper_bytes > 0) {
    Slot s;
    s.kind = StorageKind::Hyper;
    s.bytes = options.hyper_bytes;
    plan.hyper = add(s);
  }
  // The persistent arena in slot order; the arena is zeroed once, so parameters start at zero.
  for (Slot& s : plan.slots) {
    if (in_arena(s.kind)) continue;
    const uint64_t size = align_up(s.bytes, alignment);
    s.offset = within_part(plan.persistent_bytes, size, plan.part_bytes);
    plan.persistent_bytes = s.offset + size;
  }
  if (plan.part_bytes)
    for (const Slot& s : plan.slots)
      if (s.bytes > plan.part_bytes)
        throw SessionError(
            "[plan] expected every value to fit one storage buffer of " + std::to_string(plan.part_bytes) +
            " bytes (the device's maxStorageBufferRange), got " + storage_kind_name(s.kind) + " '" +
            (s.kind == StorageKind::Hyper ? std::string("hyper") : node_label(g, s.node)) + "' of " +
            std::to_string(s.bytes) + " bytes");
  return plan;
}

}  // namespace meganeura
