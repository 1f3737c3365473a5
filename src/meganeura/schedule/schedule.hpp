#pragma once
// The scheduler: partitions a Graph into kernels of a few archetypes (a KernelGraph). Device-free; the
// memory planner and the code generator consume its result.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "meganeura/ir/graph.hpp"

namespace meganeura {

enum class Archetype : uint8_t {
  Pointwise,  // an elementwise DAG with broadcasting, one thread per output element
  RowReduce,  // a workgroup per output row: reductions, softmax, losses, norms (prologue and epilogue fused)
  MatMul,     // tiled through shared memory, GEMV for small M; transposes by attribute; batched
  Conv,       // conv2d and both gradients as implicit GEMMs tiled through shared memory, one GEMM per group
  Gather,     // rows of a table by index
  Scatter,    // scatter-add of rows by index: float atomics where the device has them, else a workgroup per
              // output row scans the indices (deterministic); always its kernel's root (no epilogue)
  Copy,       // permute, slice, concat, pad, broadcast, rope, dropout, pooling windows (and their gradients),
              // nearest upsampling: one thread per output element
  Attention,  // flash attention: forward (+ log-sum-exp), dQ, and dK with dV; K/V or Q tiles streamed
  Optimizer,  // the fused parameter update over the persistent arena
  Counter,    // bumps the step counter and bias corrections of the hyper-parameter block, first in the step
  Accumulate,  // adds a gradient into its accumulation buffer (gradient accumulation)
  GradNorm,    // partial sums of squares of every gradient, one per workgroup (clipping)
  ClipScale,   // sums the partials and writes the clipping factor into the hyper-parameter block
};
const char* archetype_name(Archetype a);

// Which recorded command list runs a kernel. With gradient accumulation a session records two: one that
// only accumulates and one that updates; without it, only the update list exists.
enum class StepPart : uint8_t { Every, AccumulateOnly, UpdateOnly };

struct Kernel {
  Archetype arch = Archetype::Pointwise;
  StepPart part = StepPart::Every;
  NodeId root;                   // the value this kernel writes (the parameter for Optimizer kernels)
  NodeId core;                   // matmul / reduction / movement node; invalid for a pointwise DAG
  std::vector<NodeId> epilogue;  // fused pointwise nodes evaluated at the root's index, ascending ids
  std::vector<NodeId> prologue;  // fused pointwise nodes evaluated at the core input's index, ascending
  std::vector<NodeId> reads;     // materialised values read (possibly Reshape aliases), ascending ids
  // Further values the kernel writes, computed from the same inputs as the core: an Attention kernel's
  // AttentionLse, a dK kernel's dV, a GEMV's further products of the same A (Q, K and V of one row: x·Wᵀ
  // each, no epilogue). Never fused into by other nodes; empty for every other archetype.
  std::vector<NodeId> siblings;
  // MatMul at GEMV sizes: a second product of the same A (same shape and flags, its own 2-D weight) that only
  // the epilogue reads, computed in the same pass over A and never stored (SwiGLU's gate beside its up).
  // Codegen: kernels::MatmulEpilogue::products.
  NodeId twin;
  NodeId grad;  // Optimizer, Accumulate: the gradient read
  // MatMul / RowReduce: the parameter this kernel updates with its root as the gradient (append_optimizer's
  // fused updates). The root is then not stored: each output element goes straight into the update.
  NodeId update;
  std::vector<std::pair<NodeId, NodeId>> param_grads;  // GradNorm: every (parameter, gradient)
  int level = 0;      // dependency depth; kernels of one level are mutually independent
  std::string label;  // names of the nodes it computes, for plans, errors and profiles

  bool fused(NodeId n) const;  // n is computed inside this kernel (root, core, sibling, prologue or epilogue)
};

struct KernelGraph {
  std::vector<Kernel> kernels;        // execution order (sorted by level, stable)
  std::vector<NodeId> roots;          // values the caller asked for (outputs, gradients), in order
  std::vector<NodeId> materialised;   // every value with storage that kernels read or write, ascending
  std::map<NodeId, NodeId> storage;   // node -> node owning its storage (Reshape chains resolve to source)
  std::map<NodeId, size_t> producer;  // materialised node -> index of the kernel writing it
  // Values never stored themselves: their elements live in the storage of a Permute of them, at the permuted
  // places (a forward attention's output, stored merged into [B, S, H, D] by its kernel; the backward reads
  // it back through the same map). Value -> the Permute. Codegen's load and store follow it.
  std::map<NodeId, NodeId> permuted_into;

  NodeId storage_of(NodeId n) const;
  size_t count(Archetype a) const;
  std::string to_text(const Graph& g) const;
};

// Query rows up to which a forward attention takes in its cache writes (Builder::fold_cache_writes).
constexpr int64_t kFoldedWriteMaxQueries = 8;

struct ScheduleOptions {
  bool fuse = true;                 // off: every non-leaf node is its own kernel (parity tests)
  bool keep_intermediates = false;  // debug: every node materialised and readable
};

// Partitions the nodes that `roots` depend on. Throws GraphError naming the op, node and builder line
// for an op no archetype can run yet.
KernelGraph schedule(const Graph& g, const std::vector<NodeId>& roots, const ScheduleOptions& options = {});

struct UpdatePlan {
  bool needs_step = false;  // bias-corrected optimizers read the step count on the GPU
  bool clip = false;        // clipping by global gradient norm
  bool accumulate = false;  // gradient accumulation over several steps
  bool fuse = false;        // updates into the kernels computing their gradients, where possible
};

// Appends, after every other kernel: with accumulation, one AccumulateOnly kernel per parameter; with
// clipping, GradNorm then ClipScale; one Optimizer kernel per (parameter, gradient) pair. A Counter, when
// needed, goes first, at level 0. Everything but the accumulate kernels is UpdateOnly.
// With `fuse` (and neither clipping nor accumulation) a parameter whose gradient is the root of a kernel that
// writes each element once from one thread (a matmul; a Sum / Mean row reduction) and that nothing else reads
// gets no Optimizer kernel: that kernel updates it (Kernel::update), moved after every kernel reading the
// parameter, and the gradient is not stored.
void append_optimizer(KernelGraph& kg, const Graph& g,
                      const std::vector<std::pair<NodeId, NodeId>>& param_grads, const UpdatePlan& plan);

// "name" of a node for labels: its user name, else op#id.
std::string node_label(const Graph& g, NodeId n);

// The user-visible provenance of a value for dispatch labels and profiles: its name; else, for a node derived
// by autodiff or a rewrite, the name of the value it came from ("grad/<name>" when autodiff made it); else
// "".
std::string provenance_label(const Graph& g, NodeId n);

// Which part of a training step a kernel belongs to: the forward pass, autodiff's backward pass, or the
// optimizer update (optimizer, counter, gradient accumulation and clipping kernels).
enum class Phase : uint8_t { Forward, Backward, Update };
const char* phase_name(Phase p);
Phase kernel_phase(const Graph& g, const Kernel& k);

}  // namespace meganeura
