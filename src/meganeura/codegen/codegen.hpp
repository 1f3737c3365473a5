#pragma once
// GLSL generation: one compute shader per kernel of a KernelGraph, from an archetype template plus
// expression bodies generated from the fused nodes. Device facts arrive as #defines, tile and workgroup
// sizes as specialization constants; shapes are baked into the source, so equal kernels dedupe by hash.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "meganeura/codegen/variant.hpp"
#include "meganeura/config/config.hpp"
#include "meganeura/kernels/matmul.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/schedule/schedule.hpp"

namespace meganeura {

// What a shader binding refers to; the session maps it to a buffer of the memory plan.
struct Binding {
  // Scratch: bytes only this kernel's dispatches use (split-K's partial products, Mixed16's f16 copy),
  // planned in the activation arena for the kernel's level (MemoryPlan::scratch). Tickets: split-K's
  // counters, one a tile, persistent and zeroed once (MemoryPlan::tickets); the kernel leaves them zero.
  enum Kind : uint8_t { Value, Moment, Accumulator, Hyper, Scratch, Tickets } kind = Value;
  NodeId node;  // Value: the storage node; Moment, Accumulator: the parameter; Scratch, Tickets: the kernel's
                // root
  uint32_t moment = 0;
  bool write = false;
  uint64_t bytes = 0;   // bytes the kernel may touch (for plan dumps)
  uint64_t offset = 0;  // Scratch: where this binding starts inside the kernel's scratch (Mixed16's f16 copy
                        // and split-K's partials share one)
  bool coherent = false;  // written by one workgroup and read by another in the same dispatch (a fix-up)
};

struct GeneratedKernel {
  std::string label;
  Archetype arch = Archetype::Pointwise;
  size_t kernel = 0;  // the KernelGraph kernel this dispatch computes (a scatter's clear shares its
                      // scatter's, so does a Mixed16 matmul's f16 copy); dispatch and kernel indices differ
                      // once a kernel needs two dispatches
  std::string glsl;
  std::vector<uint32_t> spec_constants;
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::vector<Binding> bindings;               // binding i = bindings[i]
  std::array<uint32_t, 3> workgroup{1, 1, 1};  // local size after specialization (profiles)
  std::string variant;         // the template variant, e.g. "matmul.gemv" (profiles); archetype by default
  std::vector<uint32_t> push;  // push-constant words (matmul: kernels::MatmulPush)
  uint32_t required_subgroup_size = 0;
  bool rewrite_to_khr = false;  // compile, then rewrite NV cooperative matrices to KHR (kernels/matmul.hpp)
  uint64_t hash = 0;            // of everything that changes the compiled shader
  KernelVariant tuned;          // the per-kernel choices it was generated with (default: the heuristic)
  uint64_t base_hash = 0;       // the tuning key: hash of the default variant's shader and push constants
                                // (shapes), equal for every variant of one kernel
};

struct CodegenOptions {
  OptimizerConfig optimizer;
  uint32_t workgroup = 64;             // threads of pointwise and reduction kernels (power of two)
  bool deterministic_scatter = false;  // scatter-add by scanning the indices even where float atomics exist
  // Matmuls go through the tier family (kernels/matmul.hpp): kernels::choose_tier with this as the best
  // tier the device passed its self-test with (the session probes; device-free callers get scalar).
  kernels::MatmulTier matmul_best = kernels::MatmulTier::Scalar;
  Precision precision = Precision::F32;  // Mixed16: matmul operands rounded to f16 on load, f32 accumulation
};

std::vector<GeneratedKernel> generate(const Graph& g, const KernelGraph& kg, const runtime::DeviceCaps& caps,
                                      const CodegenOptions& options);
// The dispatches of kernel `kernel` (one, or two for an atomic scatter) generated with `variant`. Throws
// ConfigError or GraphError when the variant cannot run this kernel.
std::vector<GeneratedKernel> generate_kernel(const Graph& g, const KernelGraph& kg, size_t kernel,
                                             const runtime::DeviceCaps& caps, const CodegenOptions& options,
                                             const KernelVariant& variant = {});

namespace codegen {
// Moment buffers per parameter the optimizer needs: none for plain SGD, one for momentum, two for
// Adam-family.
uint32_t moments_for(const OptimizerConfig& o);
// The hyper-parameter block, written by the host and the update kernels (GLSL in emit.cpp):
//   float lr; uint step; float clip_scale; float c1, c2; 3 floats unused; float partial[partials]
// with c1 = 1 - beta1^step and c2 = 1 - beta2^step kept by recurrence (no cancellation in 1 - pow).
constexpr uint64_t kHyperHead = 32;
inline uint64_t hyper_bytes(uint32_t partials) { return kHyperHead + 4 * uint64_t(partials); }
// Workgroups of the GradNorm kernel over `elements` gradient values: one partial sum each, stored after
// the hyper-parameter block's head.
uint32_t grad_norm_groups(int64_t elements, uint32_t workgroup);
// The kernels::MatmulShape codegen gives matmul node `mm` (for searching its variants:
// kernels::matmul_candidates with matmul_best_tier as `best`).
kernels::MatmulShape matmul_shape(const Graph& g, NodeId mm, Precision precision);
kernels::MatmulTier matmul_best_tier(const Graph& g, NodeId mm, const CodegenOptions& options);
}  // namespace codegen

// FNV-1a over the bytes; stable across runs and platforms (no pointer or container order involved).
uint64_t content_hash(const std::string& text, const std::vector<uint32_t>& spec);

}  // namespace meganeura
