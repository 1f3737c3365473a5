#pragma once
// Internal helpers shared by the archetype templates: buffer bindings, index arithmetic with baked
// shapes, and fused pointwise regions emitted as GLSL functions.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "meganeura/codegen/codegen.hpp"
#include "meganeura/ops/ops.hpp"

namespace meganeura::codegen {

using ops::float_lit;  // the one GLSL float-literal printer (ops/ops.hpp)
std::string uint_lit(int64_t v);
// A Fill's value as a literal, rounded to the fill's dtype.
std::string fill_lit(const Node& fill);
// Float expression `v` rounded to dtype t where t is a 16-bit float (mn_round_f16/bf16), else `v`.
std::string round_to(DType t, const std::string& v);
// GLSL of the 16-bit storage conversions every kernel may call: mn_f16_bits, mn_f16_value, mn_bf16_bits,
// mn_round_f16, mn_round_bf16.
const char* storage_glsl();
// The GLSL element type of a buffer of dtype t ("float", "int", "uint", "uint16_t").
const char* glsl_storage_type(DType t);
std::vector<int64_t> contiguous_strides(const Shape& s);

// One kernel being generated: its bindings and the declarations that go before main().
struct Emitter {
  const Graph& g;
  const KernelGraph& kg;
  const Kernel& k;
  const runtime::DeviceCaps& caps;
  const CodegenOptions& opt;
  GeneratedKernel out;
  std::vector<GeneratedKernel>
      before;              // dispatches of the same kernel that run before `out` (split-K's product)
  std::string decls;       // functions and buffers, in order of emission
  std::string extensions;  // #extension lines
  int fn_counter = 0;
  uint32_t dedup_from = 0;  // bind_value shares bindings from this index on (the matmul keeps 0..2 its own)
  bool update_emitted = false;  // store() of a fused update's root has declared mn_update
  KernelVariant variant;        // the tuner's choices for this kernel (default: the heuristic)
  // Values the kernel computes itself and hands to its epilogue by name (a matmul's twin product, see
  // Kernel::twin): load() returns the expression instead of reading storage. Same index space as the root.
  std::map<NodeId, std::string> computed;
  // Movement ops a copy kernel computes through index functions (its prologue, schedule.cpp
  // movement_producer): load() calls `name(offset)` instead of reading storage.
  std::map<NodeId, std::string> moved;

  // Threads per workgroup: the variant's, else CodegenOptions::workgroup.
  uint32_t wg() const { return variant.workgroup ? variant.workgroup : opt.workgroup; }

  Emitter(const Graph& g, const KernelGraph& kg, const Kernel& k, const runtime::DeviceCaps& caps,
          const CodegenOptions& opt);

  // Binding index of a value's storage (shared between a value and its Reshape aliases).
  uint32_t bind_value(NodeId n, bool write);
  uint32_t bind_moment(NodeId param, uint32_t m);
  uint32_t bind_accumulator(NodeId param, bool write);
  uint32_t bind_hyper(bool write = false);
  // The kernel's scratch (Binding::Scratch, floats): bytes its dispatches pass between them.
  uint32_t bind_scratch(uint64_t bytes, bool write);
  // The kernel's tickets (Binding::Tickets, uint counters a fix-up takes; persistent, zero between
  // dispatches).
  uint32_t bind_tickets(uint64_t bytes);
  // A binding of its own for a value, never shared (the matmul's A, B and C).
  uint32_t bind_value_unshared(NodeId n, bool write);
  // Whether a value binding is of a 16-bit dtype (the kernel then needs 16-bit storage).
  bool uses_16bit() const;
  // Declarations `layout(...) buffer BufI { T d[]; } bI;` of bindings from..end.
  std::string buffer_decls(size_t from) const;
  // "b3.d[<offset>]" as a float expression, for a materialised value.
  std::string load(NodeId n, const std::string& offset);
  // Where element `offset` of a value held in its permute's storage (KernelGraph::permuted_into) lies there:
  // a call of a function it declares once.
  std::string permuted_offset(NodeId n, const std::string& offset);
  // Assignment statement storing float expression `v` into the root at `offset`, converting the dtype; for
  // the root of a kernel with a fused update, the update of that element instead (mn_update). A value held in
  // its permute's storage (KernelGraph::permuted_into) is stored at its place there.
  std::string store(NodeId n, const std::string& offset, const std::string& v);

  // Emits `float <name>(uint flat[, float core])` computing `top` at index `flat` of `space`, where the
  // fused nodes in `region` are computed inline, `core` (if valid) is the parameter, Fill is a literal and
  // everything else is loaded with broadcasting from its buffer. Returns the function's name.
  std::string region_fn(NodeId top, const std::vector<NodeId>& region, const Shape& space, NodeId core);
  // The expression reading operand `operand` of the core at flat index `flat` of the operand's shape:
  // its prologue function when fused, else a load.
  std::string operand_fn(size_t operand);

  // The complete source: header, prelude, buffer declarations, functions, then `main_body`.
  std::string finish(const std::string& local_size_decl, const std::string& main_body);
};

// The per-element index of a one-dimensional launch spread over x and y (x is capped by the device).
std::string flat_invocation();
std::array<uint32_t, 3> element_grid(int64_t elements, uint32_t wg, const runtime::DeviceCaps& caps);
// GLSL wg_sum / wg_max / wg_min / wg_argmax over one workgroup (shared-memory trees in a fixed order).
const char* workgroup_reductions_glsl();

// Archetype templates; each fills e.out (glsl, grid, spec constants).
void emit_pointwise(Emitter& e);
void emit_matmul(Emitter& e);
void emit_conv(Emitter& e);  // conv.cpp: Conv2d, Conv2dGradInput, Conv2dGradWeight
void emit_reduce(Emitter& e);
void emit_sample(Emitter& e);    // sample.cpp: Op::Sample, a RowReduce kernel of its own
void emit_movement(Emitter& e);  // Copy, Gather, Scatter
// Declares `float mn_move<id>(uint ix)` for every movement node in the kernel's prologue (a copy kernel's
// producers; an attention kernel's operand chains) and enters it in Emitter::moved, so that load() of such a
// node computes it (movement.cpp).
void define_moved(Emitter& e);
// window.cpp: the body of movement's core_at for pooling, its gradients and nearest upsampling, given the
// output coordinates c0..c3 of node `c`.
std::string window_core(Emitter& e, const Node& c);
// Whether this Scatter kernel adds with float atomics (device support, not forced deterministic); it then
// needs emit_clear's dispatch (zeroes the root) before it.
bool scatter_atomic(const Emitter& e);
void emit_clear(Emitter& e);
void emit_attention(Emitter& e);  // attention.cpp: forward (+ log-sum-exp), dQ, dK/dV
void emit_optimizer(Emitter& e);
// `void mn_update(uint i, float g)`: the update of element i of e.k.update (a kernel with a fused update)
// with gradient g; `param_at_i` is the parameter element's lvalue. Binds the moments and the hyper block.
std::string fused_update_fn(Emitter& e, const std::string& param_at_i);
void emit_counter(Emitter& e);
void emit_accumulate(Emitter& e);
void emit_grad_norm(Emitter& e);
void emit_clip_scale(Emitter& e);

}  // namespace meganeura::codegen
