// Partitioning into kernels. Kernels grow from a root towards its producers: a producer joins the kernel
// only when every one of its consumers is already inside the same region of that kernel (so nothing is
// computed twice and no intermediate escapes) and it is not an output. Producers are visited in
// descending id order; ids are topological, so all consumers of a node are decided before the node.
#include <algorithm>
#include <functional>
#include <queue>
#include <set>
#include <sstream>

#include "meganeura/schedule/schedule.hpp"

namespace meganeura {

bool Kernel::fused(NodeId n) const {
  if (n == root || n == core || n == twin) return true;
  if (std::find(siblings.begin(), siblings.end(), n) != siblings.end()) return true;
  return std::binary_search(epilogue.begin(), epilogue.end(), n) ||
         std::binary_search(prologue.begin(), prologue.end(), n);
}

NodeId KernelGraph::storage_of(NodeId n) const {
  auto it = storage.find(n);
  return it == storage.end() ? n : it->second;
}

size_t KernelGraph::count(Archetype a) const {
  return size_t(std::count_if(kernels.begin(), kernels.end(), [&](const Kernel& k) { return k.arch == a; }));
}

std::string node_label(const Graph& g, NodeId n) {
  const Node& nd = g.node(n);
  if (!nd.prov.name.empty()) return nd.prov.name;
  return std::string(op_name(nd.op)) + "#" + std::to_string(n.v);
}

std::string provenance_label(const Graph& g, NodeId n) {
  const Provenance& p = g.node(n).prov;
  if (!p.name.empty()) return p.name;
  if (p.origin.empty()) return "";
  if (p.backward && p.origin.rfind("grad/", 0) != 0) return "grad/" + p.origin;
  return p.origin;
}

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Forward: return "forward";
    case Phase::Backward: return "backward";
    case Phase::Update: return "update";
  }
  return "?";
}

Phase kernel_phase(const Graph& g, const Kernel& k) {
  switch (k.arch) {
    case Archetype::Optimizer:
    case Archetype::Counter:
    case Archetype::Accumulate:
    case Archetype::GradNorm:
    case Archetype::ClipScale: return Phase::Update;
    default: break;
  }
  if (!k.root.valid()) return Phase::Update;
  return g.node(k.root).prov.backward ? Phase::Backward : Phase::Forward;
}

std::string KernelGraph::to_text(const Graph& g) const {
  std::ostringstream os;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const Kernel& k = kernels[i];
    os << i << " L" << k.level << " " << archetype_name(k.arch) << " [" << k.label << "] reads";
    for (NodeId r : k.reads) os << " " << node_label(g, r);
    os << "\n";
  }
  return os.str();
}

namespace {

// Kernels in level order (ties by root, so the order is deterministic), and the producer index rebuilt.
void sort_by_level(KernelGraph& kg) {
  std::stable_sort(kg.kernels.begin(), kg.kernels.end(), [](const Kernel& a, const Kernel& b) {
    return a.level != b.level ? a.level < b.level : a.root < b.root;
  });
  kg.producer.clear();
  for (size_t i = 0; i < kg.kernels.size(); ++i) {
    kg.producer[kg.kernels[i].root] = i;
    for (NodeId n : kg.kernels[i].siblings) kg.producer[n] = i;
  }
}

[[noreturn]] void unsupported(const Graph& g, NodeId n, const std::string& why) {
  const Node& nd = g.node(n);
  throw GraphError("[schedule] expected an op the GPU archetypes can run, got " +
                   std::string(op_name(nd.op)) + " at node '" + node_label(g, n) + "' (built at " +
                   where(nd.prov.loc) + "): " + why);
}

// Operands of a reduction that may take a fused prologue: float operands shaped like operand 0 (the
// prologue is evaluated in that operand's index space).
bool prologue_operand(const Graph& g, NodeId core, size_t operand) {
  const Node& c = g.node(core);
  if (c.op == Op::Sample) return false;  // reads its rows many times (codegen/sample.cpp): operands stored
  if (c.op == Op::ArgMax || c.op == Op::CrossEntropyIndex) return operand == 0 && c.op == Op::ArgMax;
  const Node& x = g.node(c.inputs[operand]);
  return x.dtype == DType::F32 && x.shape == g.node(c.inputs[0]).shape;
}

struct Builder {
  const Graph& g;
  const ScheduleOptions& opt;
  std::vector<char> needed, is_root, forced;
  std::vector<std::vector<NodeId>> consumers;  // distinct, needed consumers
  std::vector<int> owner;                      // kernel index computing the node, -1 if none
  // Movement nodes every attention kernel reading them computes itself (inline_attention_operands): no
  // owner, never stored.
  std::vector<char> inlined;
  enum Region : char { None, Epi, Pro };
  std::vector<char> region;                         // region inside its owner kernel
  std::set<std::pair<NodeId, NodeId>> state_reads;  // (write, state) whose old state other nodes read
  KernelGraph kg;

  Builder(const Graph& graph, const ScheduleOptions& o) : g(graph), opt(o) {
    size_t n = g.size();
    needed.assign(n, 0);
    is_root.assign(n, 0);
    forced.assign(n, 0);
    consumers.assign(n, {});
    owner.assign(n, -1);
    inlined.assign(n, 0);
    region.assign(n, None);
  }

  void mark_needed(const std::vector<NodeId>& roots) {
    std::vector<NodeId> stack(roots.begin(), roots.end());
    while (!stack.empty()) {
      NodeId n = stack.back();
      stack.pop_back();
      if (needed[n.v]) continue;
      needed[n.v] = 1;
      for (NodeId i : g.node(n).inputs) stack.push_back(i);
    }
    for (uint32_t v = 0; v < g.size(); ++v) {
      if (!needed[v]) continue;
      for (NodeId i : g.node(NodeId{v}).inputs) {
        auto& c = consumers[i.v];
        if (c.empty() || c.back() != NodeId{v}) c.push_back(NodeId{v});
      }
    }
  }

  void check_supported(NodeId n) {
    const Node& nd = g.node(n);
    OpClass c = op_class(nd.op);
    if (c == OpClass::Unsupported) unsupported(g, n, "no archetype implements it yet");
    if (numel(nd.shape) >= (int64_t(1) << 31)) unsupported(g, n, "more than 2^31 elements");
    if (nd.op == Op::WriteSlice) {
      // The write updates the state's bytes in place, so a reader of the old state must run before it. That
      // holds when the written value or start is computed from the reader (a sampler's token fed back into
      // the next step's embedding): allowed here, and check_state_reads verifies the kernels' levels once
      // they exist. Any other reader beside the write would race with it.
      const NodeId s = nd.inputs[0];
      for (NodeId c : consumers[s.v]) {
        const Node& cn = g.node(c);
        if (cn.op == Op::WriteSlice && cn.inputs[0] == s && cn.inputs[1] != s && cn.inputs[2] != s) continue;
        if (feeds(c, n)) {
          state_reads.insert({n, s});
          continue;
        }
        unsupported(g, n,
                    "its state '" + node_label(g, s) + "' is also read directly by " +
                        std::string(op_name(cn.op)) + " '" + node_label(g, c) +
                        "', which the written value does not depend on; read the state through the write's "
                        "result");
      }
    }
  }

  // Whether `to`'s value or start operand is computed from `from`.
  bool feeds(NodeId from, NodeId to) const {
    std::vector<char> seen(g.size(), 0);
    std::vector<NodeId> stack{g.node(to).inputs[1], g.node(to).inputs[2]};
    while (!stack.empty()) {
      const NodeId x = stack.back();
      stack.pop_back();
      if (x == from) return true;
      if (seen[x.v]) continue;
      seen[x.v] = 1;
      for (NodeId i : g.node(x).inputs) stack.push_back(i);
    }
    return false;
  }

  // Whether a node computed in K reads the state `s` as it was before this step's writes (directly or through
  // a view), other than as the state operand of a write.
  bool reads_old_state(const Kernel& K, NodeId s) const {
    auto view_of_s = [&](NodeId i) {
      while (i != s && (op_class(g.node(i).op) == OpClass::Alias || inlined[i.v])) i = g.node(i).inputs[0];
      return i == s;
    };
    auto reads = [&](NodeId m) {
      const Node& mn = g.node(m);
      for (size_t j = 0; j < mn.inputs.size(); ++j)
        if (!(mn.op == Op::WriteSlice && j == 0) && !K.fused(mn.inputs[j]) && view_of_s(mn.inputs[j]))
          return true;
      return false;
    };
    if ((K.core.valid() && reads(K.core)) || (K.twin.valid() && reads(K.twin)) || reads(K.root)) return true;
    for (const auto* list : {&K.prologue, &K.epilogue, &K.siblings})
      for (NodeId m : *list)
        if (reads(m)) return true;
    return false;
  }

  // Every kernel reading a state that a write updates in the same step runs at an earlier level than the
  // write (levels are separated by barriers), never beside it or in its kernel.
  void check_state_reads() const {
    for (const auto& [w, s] : state_reads) {
      const size_t kw = kg.producer.at(w);
      for (size_t k = 0; k < kg.kernels.size(); ++k)
        if (reads_old_state(kg.kernels[k], s) && (k == kw || kg.kernels[k].level >= kg.kernels[kw].level))
          unsupported(g, w,
                      "its state '" + node_label(g, s) + "' is read by kernel '" + kg.kernels[k].label +
                          "', which the schedule does not order before the write");
    }
  }

  // The region a producer would join: the one all its consumers share in kernel k, or None.
  Region consumer_region(NodeId p, int k) const {
    Region r = None;
    const Kernel& K = kg.kernels[size_t(k)];
    for (NodeId c : consumers[p.v]) {
      if (owner[c.v] != k) return None;
      Region rc;
      if (c == K.core) {
        const Node& core = g.node(c);
        if (op_class(core.op) != OpClass::Reduce) return None;
        for (size_t i = 0; i < core.inputs.size(); ++i)
          if (core.inputs[i] == p && !prologue_operand(g, c, i)) return None;
        rc = Pro;
      } else {
        rc = Region(region[c.v]);
      }
      if (r != None && rc != r) return None;
      r = rc;
    }
    return r;
  }

  void grow(int k) {
    std::priority_queue<uint32_t> heap;
    std::set<uint32_t> queued;
    auto push_inputs = [&](NodeId n) {
      for (NodeId i : g.node(n).inputs)
        if (queued.insert(i.v).second) heap.push(i.v);
    };
    Kernel& K0 = kg.kernels[size_t(k)];
    push_inputs(K0.root);
    if (K0.core.valid() && K0.core != K0.root) push_inputs(K0.core);
    while (!heap.empty()) {
      NodeId p{heap.top()};
      heap.pop();
      Kernel& K = kg.kernels[size_t(k)];
      const Node& pn = g.node(p);
      OpClass c = op_class(pn.op);
      if (movement_producer(p, k)) {
        check_supported(p);
        owner[p.v] = k;
        region[p.v] = Pro;
        K.prologue.push_back(p);
        push_inputs(p);
        continue;
      }
      if (c == OpClass::Fill || c == OpClass::Leaf || c == OpClass::Alias) continue;  // inlined or stored
      if (pn.op == Op::WriteSlice)
        continue;  // always its own kernel's root: it writes the state, not a new value
      if (owner[p.v] >= 0) continue;
      if (!opt.fuse || opt.keep_intermediates || is_root[p.v] || forced[p.v]) continue;
      check_supported(p);
      Region r = consumer_region(p, k);
      if (r == None) continue;
      if (c == OpClass::Pointwise) {
        if (r == Pro && !(K.core.valid() && op_class(g.node(K.core).op) == OpClass::Reduce)) continue;
        owner[p.v] = k;
        region[p.v] = r;
        (r == Epi ? K.epilogue : K.prologue).push_back(p);
        push_inputs(p);
      } else if (r == Epi && c == OpClass::MatMul && !K.twin.valid() && gemv_partner(K, p, true)) {
        K.twin = p;
        owner[p.v] = k;
        region[p.v] = Epi;
      } else if (r == Epi && !K.core.valid() &&
                 // a scatter stays its kernel's root: with float atomics it adds into the stored result
                 (c == OpClass::Reduce || c == OpClass::MatMul || c == OpClass::Conv || c == OpClass::Copy ||
                  c == OpClass::Gather) &&
                 pn.shape == g.node(K.root).shape) {
        K.core = p;
        owner[p.v] = k;
        region[p.v] = Epi;
        push_inputs(p);
      }
    }
    Kernel& K = kg.kernels[size_t(k)];
    std::sort(K.epilogue.begin(), K.epilogue.end());
    std::sort(K.prologue.begin(), K.prologue.end());
  }

  // Movement ops a copy kernel computes from an index of their own shape (codegen: movement_function);
  // Reshape keeps the flat index.
  static bool indexable_movement(Op op) {
    return op == Op::Permute || op == Op::Slice || op == Op::Pad || op == Op::Concat ||
           op == Op::BroadcastTo || op == Op::Rope || op == Op::Reshape;
  }

  // Whether movement op p joins copy kernel k as a prologue: everything that reads it is k's own movement
  // core or a movement op already in its prologue, so the chain (a slice of the QKV product, its reshape
  // into heads, the permute, RoPE; in the backward their transposes) is one kernel whose core reads through
  // index functions, and no intermediate is stored.
  bool movement_producer(NodeId p, int k) const {
    const Kernel& K = kg.kernels[size_t(k)];
    const Node& pn = g.node(p);
    if (!opt.fuse || opt.keep_intermediates || !indexable_movement(pn.op) || owner[p.v] >= 0 ||
        inlined[p.v] || is_root[p.v] || (pn.op != Op::Reshape && forced[p.v]) || !K.core.valid() ||
        !indexable_movement(g.node(K.core).op) || g.node(K.core).op == Op::Reshape || consumers[p.v].empty())
      return false;
    for (NodeId c : consumers[p.v]) {
      if (owner[c.v] != k) return false;
      if (c != K.core && !(region[c.v] == Pro && indexable_movement(g.node(c).op))) return false;
    }
    return true;
  }

  // Whether matmul p can join kernel K's matmul core in one GEMV pass (Kernel::twin, Kernel::siblings): both
  // x·Wᵀ over the same A of at most kGemvMaxRows rows (kernels::choose_tier's GEMV bound), 2-D weights of one
  // dtype, f32 results; a twin also has the core's shape.
  bool gemv_partner(const Kernel& K, NodeId p, bool twin) const {
    static constexpr int64_t kGemvMaxRows = 8;
    if (!K.core.valid() || K.update.valid() || p == K.core) return false;
    const Node &c = g.node(K.core), &t = g.node(p);
    if (c.op != Op::MatMul || t.op != Op::MatMul || c.inputs[0] != t.inputs[0] || c.attrs != t.attrs ||
        c.attrs.flag_a || !c.attrs.flag_b || c.dtype != DType::F32 || t.dtype != DType::F32 ||
        (twin && c.shape != t.shape))
      return false;
    const Node &a = g.node(c.inputs[0]), &b1 = g.node(c.inputs[1]), &b2 = g.node(t.inputs[1]);
    if (b1.shape.size() != 2 || b2.shape.size() != 2 || b1.dtype != b2.dtype || b1.op == Op::Fill ||
        b2.op == Op::Fill || a.op == Op::Fill)
      return false;
    const int64_t n = c.shape.back(), rows = numel(c.shape) / std::max<int64_t>(1, n);
    return rows <= kGemvMaxRows;
  }

  // Further products of a GEMV core's A (Q, K and V of one normalised row) join its kernel as stored
  // siblings, at most two (registers: one accumulator set each).
  void group_gemv(int k) {
    Kernel& K = kg.kernels[size_t(k)];
    if (!opt.fuse || opt.keep_intermediates || !K.core.valid() || g.node(K.core).op != Op::MatMul) return;
    const NodeId a = g.node(K.core).inputs[0];
    for (NodeId c : consumers[a.v]) {
      if (K.siblings.size() + (K.twin.valid() ? 1 : 0) >= 2) break;
      if (owner[c.v] >= 0 || g.node(c).inputs[0] != a || !gemv_partner(K, c, false)) continue;
      check_supported(c);
      owner[c.v] = k;
      region[c.v] = Epi;
      K.siblings.push_back(c);
    }
  }

  // The RMSNorm producing the A of a GEMV pass of several products (twin or siblings: the Q/K/V and gate/up
  // passes), when nothing else reads it, joins that kernel's prologue: each workgroup sums the squares of the
  // rows it reads anyway, so the normalised rows are never stored (glsl::gemv_multi's A_RMSNORM).
  void fuse_norm_prologue(int k) {
    Kernel& K = kg.kernels[size_t(k)];
    if (!opt.fuse || opt.keep_intermediates || !K.core.valid() || g.node(K.core).op != Op::MatMul ||
        (!K.twin.valid() && K.siblings.empty()))
      return;
    const NodeId a = g.node(K.core).inputs[0];
    const Node& an = g.node(a);
    if (an.op != Op::RmsNorm || is_root[a.v] || forced[a.v] || owner[a.v] >= 0 || an.dtype != DType::F32 ||
        g.node(an.inputs[0]).dtype != DType::F32 || g.node(an.inputs[0]).op == Op::Fill)
      return;
    for (NodeId c : consumers[a.v])
      if (owner[c.v] != k || g.node(c).op != Op::MatMul || g.node(c).inputs[1] == a) return;
    check_supported(a);
    owner[a.v] = k;
    region[a.v] = Pro;
    K.prologue.push_back(a);
    std::sort(K.prologue.begin(), K.prologue.end());
  }

  // Operands of attention op `c` that may be read through a movement chain: Q, K, V, and a gradient's dO.
  size_t attention_chain_operands(NodeId c) const {
    const Op op = g.node(c).op;
    return op == Op::Attention || op == Op::AttentionLse ? 3 : 4;
  }

  // Whether movement node x (a slice, reshape, permute or RoPE of its first input) is read only by attention
  // ops, as Q, K, V or dO, directly or through further such nodes.
  bool attention_chain(NodeId x) const {
    const Node& xn = g.node(x);
    const bool movement =
        xn.op == Op::Slice || xn.op == Op::Reshape || xn.op == Op::Permute || xn.op == Op::Rope;
    if (!movement || !needed[x.v] || is_root[x.v] || forced[x.v] || owner[x.v] >= 0 ||
        consumers[x.v].empty() || numel(xn.shape) >= (int64_t(1) << 31))
      return false;
    for (NodeId c : consumers[x.v]) {
      const Node& cn = g.node(c);
      if (op_class(cn.op) == OpClass::Attention) {
        for (size_t i = attention_chain_operands(c); i < cn.inputs.size(); ++i)
          if (cn.inputs[i] == x) return false;  // the forward's output, its log-sum-exp or a mask
        continue;
      }
      if (cn.inputs[0] != x || std::count(cn.inputs.begin(), cn.inputs.end(), x) != 1 || !attention_chain(c))
        return false;
    }
    return true;
  }

  // Movement chains between a stored value and an attention kernel's Q, K, V or dO (the heads of the fused
  // QKV product: slice, reshape, permute, RoPE; the gradient's heads) that only attention kernels read are
  // computed inside each of them, through index functions (codegen: movement_function), instead of stored by
  // a copy kernel: in a training step the forward and both backward kernels read the same chains, so a copy
  // dispatch and its barrier go, for the price of recomputing a rotation per element loaded.
  void inline_attention_operands(int k) {
    if (!opt.fuse || opt.keep_intermediates) return;
    Kernel& K = kg.kernels[size_t(k)];
    std::vector<NodeId> ops{K.core};
    ops.insert(ops.end(), K.siblings.begin(), K.siblings.end());
    for (NodeId n : ops) {
      const Node& nd = g.node(n);
      if (op_class(nd.op) != OpClass::Attention) continue;
      for (size_t i = 0; i < std::min(attention_chain_operands(n), nd.inputs.size()); ++i) {
        for (NodeId x = nd.inputs[i]; inlined[x.v] || attention_chain(x); x = g.node(x).inputs[0]) {
          check_supported(x);
          inlined[x.v] = 1;
          if (!std::binary_search(K.prologue.begin(), K.prologue.end(), x))
            K.prologue.insert(std::upper_bound(K.prologue.begin(), K.prologue.end(), x), x);
        }
      }
    }
  }

  // Whether Permute p may hold its input's elements (KernelGraph::permuted_into): its input is a forward
  // attention's output that nothing else reads but the backward's attention ops, as their `out`. The heads'
  // merge of nn::MultiHeadAttention (out [B, H, S, D] to [B, S, H, D]) then costs no copy kernel: the forward
  // kernel stores each element at its merged place.
  bool stores_attention_output(NodeId p) const {
    const Node& pn = g.node(p);
    if (!opt.fuse || opt.keep_intermediates || pn.op != Op::Permute || is_root[p.v] || owner[p.v] >= 0 ||
        inlined[p.v])
      return false;
    const NodeId o = pn.inputs[0];
    // Its kernel may exist already: a training step's log-sum-exp (made by autodiff, a higher id) opens it.
    if (g.node(o).op != Op::Attention || is_root[o.v] || forced[o.v] ||
        (owner[o.v] >= 0 && kg.kernels[size_t(owner[o.v])].core != o))
      return false;
    for (NodeId c : consumers[o.v]) {
      if (c == p) continue;
      const Node& cn = g.node(c);
      if (cn.op != Op::AttentionGradQ && cn.op != Op::AttentionGradK && cn.op != Op::AttentionGradV)
        return false;
      for (size_t i = 0; i < cn.inputs.size(); ++i)
        if (cn.inputs[i] == o && i != 4) return false;  // read as anything but `out`
    }
    return true;
  }

  // A Rope that only kernel k reads (a forward attention's queries, a cache write's keys) is computed inside
  // it, so a decode step never stores rotated queries or keys (codegen: define_moved).
  void fuse_rope_operand(int k, NodeId operand) {
    const Node& pn = g.node(operand);
    if (!opt.fuse || opt.keep_intermediates || pn.op != Op::Rope || is_root[operand.v] || forced[operand.v] ||
        owner[operand.v] >= 0 || inlined[operand.v])
      return;
    for (NodeId c : consumers[operand.v])
      if (owner[c.v] != k) return;
    check_supported(operand);
    owner[operand.v] = k;
    region[operand.v] = Pro;
    Kernel& K = kg.kernels[size_t(k)];
    K.prologue.push_back(operand);
    std::sort(K.prologue.begin(), K.prologue.end());
  }

  // Whether `a` is computed from `b` (ids are topological: only ids above b's can be).
  bool depends_on(NodeId a, NodeId b) const {
    std::vector<NodeId> stack{a};
    std::set<uint32_t> seen;
    while (!stack.empty()) {
      NodeId n = stack.back();
      stack.pop_back();
      if (n == b) return true;
      if (n.v < b.v || !seen.insert(n.v).second) continue;
      for (NodeId i : g.node(n).inputs) stack.push_back(i);
    }
    return false;
  }

  // Another state write at the same start with a value of the same shape (a decode step's V cache write
  // beside its K cache write) joins WriteSlice kernel k as a sibling: one thread per value element stores
  // into both states, one dispatch instead of two. Neither write may be computed from the other.
  void group_write_slices(int k) {
    if (!opt.fuse || opt.keep_intermediates) return;
    const NodeId w = kg.kernels[size_t(k)].core;
    const Node& wn = g.node(w);
    for (NodeId c : consumers[wn.inputs[2].v]) {
      if (kg.kernels[size_t(k)].siblings.size() >= 3) break;
      const Node& cn = g.node(c);
      if (c == w || owner[c.v] >= 0 || cn.op != Op::WriteSlice || cn.inputs[2] != wn.inputs[2] ||
          cn.attrs != wn.attrs || cn.shape != wn.shape || cn.inputs[0] == wn.inputs[0] ||
          g.node(cn.inputs[1]).shape != g.node(wn.inputs[1]).shape || depends_on(c, w) || depends_on(w, c))
        continue;
      bool clash = false;  // a state written by the kernel already: the writes would race
      for (NodeId s : kg.kernels[size_t(k)].siblings) clash = clash || g.node(s).inputs[0] == cn.inputs[0];
      if (clash) continue;
      check_supported(c);
      owner[c.v] = k;
      region[c.v] = Epi;
      kg.kernels[size_t(k)].siblings.push_back(c);
      fuse_rope_operand(k, cn.inputs[1]);
    }
  }

  // A forward attention of at most kFoldedWriteMaxQueries query rows (a decode step) whose K or V operand is
  // a cache write (WriteSlice on the key axis of a [B, KV heads, T, D] state) that only it reads takes the
  // write in as a sibling: the kernel reads the new rows from the write's value (the keys' RoPE computed in
  // it, fuse_rope_operand) and one workgroup per batch·KV head stores them into the state (codegen:
  // attention.cpp). A decode step then has no copy dispatch, and no barrier, between its QKV product and its
  // attention. Longer query blocks keep the copy kernel: each reader would rotate the new keys itself, once
  // per query tile of a prefill.
  void fold_cache_writes(int k) {
    if (!opt.fuse || opt.keep_intermediates) return;
    const NodeId core = kg.kernels[size_t(k)].core;
    const Node& cn = g.node(core);
    if (g.node(cn.inputs[0]).shape.at(2) > kFoldedWriteMaxQueries) return;
    for (size_t i : {size_t(1), size_t(2)}) {
      const NodeId w = cn.inputs[i];
      const Node& wn = g.node(w);
      if (wn.op != Op::WriteSlice || owner[w.v] >= 0) continue;
      const Shape &ss = wn.shape, &vs = g.node(wn.inputs[1]).shape, &st = g.node(wn.inputs[2]).shape;
      if (ss.size() != 4 || (wn.attrs.axes.at(0) + 4) % 4 != 2 || vs.size() != 4 || vs[0] != ss[0] ||
          vs[1] != ss[1] || vs[3] != ss[3] || !(st.empty() || st == Shape{ss[0]}))
        continue;
      const bool only_reader =
          std::all_of(consumers[w.v].begin(), consumers[w.v].end(), [&](NodeId c) { return c == core; });
      if (!only_reader || (i == 2 && g.node(cn.inputs[1]).op == Op::WriteSlice &&
                           g.node(cn.inputs[1]).inputs[0] == wn.inputs[0]))
        continue;  // one state written twice: the two writes would race
      check_supported(w);
      owner[w.v] = k;
      region[w.v] = Epi;
      kg.kernels[size_t(k)].siblings.push_back(w);
      fuse_rope_operand(k, wn.inputs[1]);
    }
  }

  static Archetype archetype_of(OpClass c) {
    switch (c) {
      case OpClass::Reduce: return Archetype::RowReduce;
      case OpClass::MatMul: return Archetype::MatMul;
      case OpClass::Conv: return Archetype::Conv;
      case OpClass::Gather: return Archetype::Gather;
      case OpClass::Scatter: return Archetype::Scatter;
      case OpClass::Copy: return Archetype::Copy;
      case OpClass::Attention: return Archetype::Attention;
      default: return Archetype::Pointwise;
    }
  }

  // Unclaimed values one attention kernel computes along with n: the forward's output and its
  // log-sum-exp, or dK and dV (the same inputs and attributes, the partner op).
  std::vector<NodeId> attention_siblings(NodeId n) {
    const Node& nd = g.node(n);
    Op partner = Op::Count_;
    switch (nd.op) {
      case Op::Attention: partner = Op::AttentionLse; break;
      case Op::AttentionLse: partner = Op::Attention; break;
      case Op::AttentionGradK: partner = Op::AttentionGradV; break;
      case Op::AttentionGradV: partner = Op::AttentionGradK; break;
      default: break;
    }
    std::vector<NodeId> out;
    if (!opt.fuse || opt.keep_intermediates || partner == Op::Count_) return out;
    for (NodeId c : consumers[nd.inputs[0].v]) {
      const Node& cn = g.node(c);
      if (cn.op == partner && owner[c.v] < 0 && cn.inputs == nd.inputs && cn.attrs == nd.attrs) {
        check_supported(c);
        out.push_back(c);
        break;
      }
    }
    return out;
  }

  void partition() {
    for (uint32_t v = uint32_t(g.size()); v-- > 0;) {
      NodeId n{v};
      if (!needed[v]) continue;
      const Node& nd = g.node(n);
      OpClass c = op_class(nd.op);
      if (c == OpClass::Leaf || inlined[v]) continue;
      if (owner[v] >= 0) continue;  // fused into a kernel already (a Reshape too: movement_producer)
      if (c == OpClass::Alias) {
        // Storage is shared with the source, so the source must exist as a buffer of the same layout.
        forced[nd.inputs[0].v] = 1;
        continue;
      }
      if (c == OpClass::Fill && !is_root[v] && !forced[v]) continue;
      if (owner[v] >= 0) continue;
      check_supported(n);
      if (stores_attention_output(n)) {  // its attention kernel writes it (now, or at the attention's turn)
        const NodeId o = nd.inputs[0];
        kg.permuted_into[o] = n;
        if (owner[o.v] >= 0) {
          owner[v] = owner[o.v];
          region[v] = Epi;
          kg.kernels[size_t(owner[o.v])].root = n;
        }
        continue;
      }
      Kernel k;
      k.root = n;
      if (c == OpClass::Pointwise || c == OpClass::Fill) {
        k.arch = Archetype::Pointwise;
        k.epilogue.push_back(n);
        region[v] = Epi;
      } else {
        k.arch = archetype_of(c);
        k.core = n;
        region[v] = Epi;
      }
      owner[v] = int(kg.kernels.size());
      if (c == OpClass::Attention) {
        // No prologue or epilogue; values computed from the same inputs share the kernel (when fusing).
        for (NodeId sib : attention_siblings(n)) {
          owner[sib.v] = owner[v];
          region[sib.v] = Epi;
          k.siblings.push_back(sib);
        }
        // The lowest id is the root: the forward value (not its log-sum-exp, which autodiff made), so the
        // kernel's phase and label follow the forward op.
        for (NodeId& sib : k.siblings)
          if (sib < k.root) std::swap(sib, k.root);
        k.core = k.root;
        const Op forward = g.node(k.root).op;
        const NodeId query = g.node(k.root).inputs[0];
        if (auto it = kg.permuted_into.find(k.core); it != kg.permuted_into.end()) {
          owner[it->second.v] = int(kg.kernels.size());
          region[it->second.v] = Epi;
          k.root = it->second;  // the kernel's stored value: the attention's output, merged
        }
        kg.kernels.push_back(std::move(k));
        inline_attention_operands(int(kg.kernels.size()) - 1);
        if (forward == Op::Attention || forward == Op::AttentionLse) {
          fuse_rope_operand(int(kg.kernels.size()) - 1, query);
          fold_cache_writes(int(kg.kernels.size()) - 1);
        }
        continue;
      }
      kg.kernels.push_back(std::move(k));
      grow(int(kg.kernels.size()) - 1);
      if (nd.op == Op::WriteSlice) {
        fuse_rope_operand(int(kg.kernels.size()) - 1, nd.inputs[1]);
        group_write_slices(int(kg.kernels.size()) - 1);
      }
      group_gemv(int(kg.kernels.size()) - 1);
      fuse_norm_prologue(int(kg.kernels.size()) - 1);
      Kernel& K = kg.kernels.back();
      if (K.core.valid()) K.arch = archetype_of(op_class(g.node(K.core).op));
    }
  }

  void resolve_storage() {
    for (uint32_t v = 0; v < g.size(); ++v) {
      if (!needed[v]) continue;
      const Node& nd = g.node(NodeId{v});
      if (op_class(nd.op) == OpClass::Alias || nd.op == Op::WriteSlice)
        kg.storage[NodeId{v}] = kg.storage_of(nd.inputs[0]);
    }
  }

  void collect_reads() {
    std::set<NodeId> mat;
    for (size_t ki = 0; ki < kg.kernels.size(); ++ki) {
      Kernel& K = kg.kernels[ki];
      std::set<NodeId> reads;
      auto scan = [&](NodeId n) {
        for (NodeId i : g.node(n).inputs) {
          if (K.fused(i)) continue;
          if (op_class(g.node(i).op) == OpClass::Fill) continue;  // inlined as a literal
          auto held = kg.permuted_into.find(i);
          reads.insert(held == kg.permuted_into.end() ? i : held->second);  // read where it is stored
        }
      };
      if (K.core.valid()) scan(K.core);
      if (K.twin.valid()) scan(K.twin);
      for (NodeId n : K.epilogue) scan(n);
      for (NodeId n : K.prologue) scan(n);
      for (NodeId n : K.siblings) scan(n);
      K.reads.assign(reads.begin(), reads.end());
      for (NodeId r : K.reads) mat.insert(kg.storage_of(r));
      mat.insert(kg.storage_of(K.root));
      kg.producer[K.root] = ki;
      for (NodeId n : K.siblings) {
        mat.insert(kg.storage_of(n));  // a state write's sibling stores into its state
        kg.producer[n] = ki;
      }
    }
    for (NodeId r : kg.roots) mat.insert(kg.storage_of(r));
    kg.materialised.assign(mat.begin(), mat.end());
  }

  void label_kernels() {
    for (Kernel& K : kg.kernels) {
      std::vector<NodeId> nodes(K.prologue);
      if (K.core.valid()) nodes.push_back(K.core);
      if (K.twin.valid()) nodes.push_back(K.twin);
      nodes.insert(nodes.end(), K.epilogue.begin(), K.epilogue.end());
      nodes.insert(nodes.end(), K.siblings.begin(), K.siblings.end());
      std::sort(nodes.begin(), nodes.end());
      nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
      // The distinct provenance labels of the nodes computed; op#id only when none has any.
      std::vector<std::string> labels;
      for (NodeId n : nodes) {
        std::string l = provenance_label(g, n);
        if (!l.empty() && std::find(labels.begin(), labels.end(), l) == labels.end()) labels.push_back(l);
      }
      if (labels.empty())
        for (NodeId n : nodes) labels.push_back(node_label(g, n));
      std::string s;
      for (const std::string& l : labels) s += (s.empty() ? "" : ",") + l;
      K.label = s;
    }
  }

  // Levels: 1 + the deepest producer. Kernels of one level only read earlier levels, so a single
  // barrier between levels suffices (the memory plan keeps aliasing consistent with levels).
  void order() {
    std::vector<int> level(kg.kernels.size(), 0);
    // Kernels were created in descending root order, so producers mostly come later in the vector; a
    // kernel's siblings (attention) can have lower ids than its root, so relax until nothing changes
    // (the kernel graph is acyclic: at most one pass per level).
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = kg.kernels.size(); i-- > 0;) {
        int lv = 0;
        for (NodeId r : kg.kernels[i].reads) {
          // A view (Reshape) is produced by the kernel writing its source; a state write's result is stored
          // in the state, so its producer is found by the write's own id, not by the storage.
          NodeId src = r;
          auto it = kg.producer.find(src);
          while (it == kg.producer.end() && op_class(g.node(src).op) == OpClass::Alias) {
            src = g.node(src).inputs[0];
            it = kg.producer.find(src);
          }
          if (it == kg.producer.end()) it = kg.producer.find(kg.storage_of(r));
          if (it != kg.producer.end()) lv = std::max(lv, level[it->second] + 1);
        }
        changed = changed || lv != level[i];
        level[i] = lv;
      }
    }
    for (size_t i = 0; i < kg.kernels.size(); ++i) kg.kernels[i].level = level[i];
    sort_by_level(kg);
  }
};

}  // namespace

KernelGraph schedule(const Graph& g, const std::vector<NodeId>& roots, const ScheduleOptions& options) {
  Builder b(g, options);
  for (NodeId r : roots) {
    if (!r.valid() || r.v >= g.size())
      throw GraphError("[schedule] expected a node of the graph, got id " + std::to_string(r.v));
    b.is_root[r.v] = 1;
  }
  b.kg.roots = roots;
  b.mark_needed(roots);
  if (options.keep_intermediates)
    for (uint32_t v = 0; v < g.size(); ++v)
      if (b.needed[v] && op_class(g.node(NodeId{v}).op) != OpClass::Leaf) b.is_root[v] = 1;
  b.partition();
  b.resolve_storage();
  b.collect_reads();
  b.label_kernels();
  b.order();
  b.check_state_reads();
  return std::move(b.kg);
}

namespace {

// Fuses each update it can into the kernel computing the gradient (see append_optimizer); returns the
// parameters left for Optimizer kernels.
std::vector<std::pair<NodeId, NodeId>> fuse_updates(KernelGraph& kg, const Graph& g,
                                                    const std::vector<std::pair<NodeId, NodeId>>& param_grads,
                                                    bool needs_step) {
  std::set<NodeId> params, outputs(g.outputs().begin(), g.outputs().end());
  std::map<NodeId, int> grad_uses, readers;  // gradient -> parameters it is the gradient of; reads by kernel
  for (auto [p, gr] : param_grads) {
    params.insert(p);
    ++grad_uses[gr];
  }
  for (const Kernel& k : kg.kernels)
    for (NodeId r : k.reads) ++readers[kg.storage_of(r)];
  auto reads_parameter = [&](const Kernel& k) {
    for (NodeId r : k.reads)
      if (params.count(kg.storage_of(r))) return true;
    return false;
  };
  // The gradient may be a Reshape of the kernel's root (a bias gradient summed with keepdim): same elements
  // in the same order.
  auto fusable = [&](NodeId p, NodeId gr) -> Kernel* {
    const NodeId gs = kg.storage_of(gr);
    auto it = kg.producer.find(gs);
    if (it == kg.producer.end() || grad_uses[gr] != 1 || readers.count(gs) || outputs.count(gr) ||
        outputs.count(gs) || g.node(p).dtype != DType::F32 || g.node(gs).dtype != DType::F32 ||
        numel(g.node(gs).shape) != numel(g.node(p).shape))
      return nullptr;
    for (const auto& [alias, storage] : kg.storage)  // no other view of the gradient is read or returned
      if (storage == gs && alias != gr && (readers.count(alias) || outputs.count(alias))) return nullptr;
    Kernel& k = kg.kernels[it->second];
    if (k.root != gs || !k.siblings.empty() || k.update.valid() || k.twin.valid() || reads_parameter(k))
      return nullptr;
    const Op core = k.core.valid() ? g.node(k.core).op : Op::Count_;
    // one thread writes each element once, after everything the kernel reads
    if (k.arch == Archetype::MatMul ||
        (k.arch == Archetype::RowReduce && (core == Op::Sum || core == Op::Mean)))
      return &k;
    return nullptr;
  };
  std::vector<std::pair<NodeId, NodeId>> rest;
  bool moved = false;
  for (auto [p, gr] : param_grads) {
    Kernel* k = fusable(p, gr);
    if (!k) {
      rest.push_back({p, gr});
      continue;
    }
    // After every kernel reading the parameter (none of them is fused: a fused kernel reads no parameter),
    // and after the step counter when the update reads the bias corrections.
    int level = std::max(k->level, needs_step ? 1 : 0);
    for (const Kernel& o : kg.kernels)
      for (NodeId r : o.reads)
        if (kg.storage_of(r) == p) level = std::max(level, o.level + 1);
    moved = moved || level != k->level;
    k->level = level;
    k->update = p;
    k->label += ",update " + node_label(g, p);
    kg.materialised.erase(std::remove(kg.materialised.begin(), kg.materialised.end(), k->root),
                          kg.materialised.end());
  }
  if (moved) {
    sort_by_level(kg);
  }
  return rest;
}

}  // namespace

void append_optimizer(KernelGraph& kg, const Graph& g,
                      const std::vector<std::pair<NodeId, NodeId>>& all_param_grads, const UpdatePlan& plan) {
  if (all_param_grads.empty()) return;
  const std::vector<std::pair<NodeId, NodeId>> param_grads =
      plan.fuse && !plan.clip && !plan.accumulate ? fuse_updates(kg, g, all_param_grads, plan.needs_step)
                                                  : all_param_grads;
  int top = 0;
  for (const Kernel& k : kg.kernels) top = std::max(top, k.level);
  // After every kernel: a parameter may be read by a kernel its gradient does not depend on.
  auto add = [&](Archetype arch, StepPart part, int level, std::string label) -> Kernel& {
    Kernel k;
    k.arch = arch;
    k.part = part;
    k.level = level;
    k.label = std::move(label);
    kg.kernels.push_back(std::move(k));
    return kg.kernels.back();
  };
  if (plan.accumulate) {
    for (auto [p, gr] : param_grads) {
      Kernel& k =
          add(Archetype::Accumulate, StepPart::AccumulateOnly, top + 1, "accumulate " + node_label(g, p));
      k.root = p;
      k.grad = gr;
      k.reads = {gr};
    }
  }
  int level = top + 1;
  if (plan.clip) {
    Kernel& k = add(Archetype::GradNorm, StepPart::UpdateOnly, level++, "gradient norm");
    k.param_grads = param_grads;
    for (auto [p, gr] : param_grads) k.reads.push_back(gr);
    std::sort(k.reads.begin(), k.reads.end());
    add(Archetype::ClipScale, StepPart::UpdateOnly, level++, "clip scale");
  }
  for (auto [p, gr] : param_grads) {
    Kernel& k = add(Archetype::Optimizer, StepPart::UpdateOnly, level, "update " + node_label(g, p));
    k.root = p;
    k.grad = gr;
    k.reads = {gr};
  }
  if (plan.needs_step) {
    // First, beside the first level's kernels, so it costs no level of its own: this step's updates read
    // the bias corrections it writes, and the barrier opening every step orders it after the previous
    // step's updates.
    Kernel k;
    k.arch = Archetype::Counter;
    k.part = StepPart::UpdateOnly;
    k.label = "step counter";
    kg.kernels.insert(kg.kernels.begin(), std::move(k));
    for (auto& [node, index] : kg.producer) ++index;
  }
}

}  // namespace meganeura
