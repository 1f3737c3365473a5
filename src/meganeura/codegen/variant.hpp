#pragma once
// Per-kernel code generation choices that the tuner (Session::tune_with, session/tune.cpp) searches. A
// default-constructed KernelVariant is the built-in heuristic; a field left at its zero value keeps the
// heuristic's choice for that knob. Variants change how a kernel is computed, never what it computes.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "meganeura/kernels/matmul.hpp"
#include "meganeura/schedule/schedule.hpp"

namespace meganeura {

struct CodegenOptions;

struct KernelVariant {
  uint32_t workgroup =
      0;  // threads per workgroup: pointwise, row-reduce, copy, gather, optimizer, accumulate
  uint32_t per_thread = 0;                  // pointwise: elements per thread (each a launch apart)
  std::optional<kernels::MatmulTier> tier;  // matmul: the tier, instead of kernels::choose_tier
  std::string
      tile;  // matmul: scalar "128", "64" or "16"; cooperative tiers: kernels::CoopMatTile::to_string()
  uint32_t split = 0;  // matmul: slices of K (kernels::MatmulVariant::split_k; 1: one pass)

  bool is_default() const { return workgroup == 0 && per_thread == 0 && !tier && tile.empty() && split == 0; }
  // "default", or the set knobs: "wg=128 per=2", "tier=gemv", "tier=coopmat-nv tile=64x64x32/2x4",
  // "tier=scalar tile=64 split=1".
  std::string to_string() const;
  // Inverse of to_string(); throws ConfigError naming the text.
  static KernelVariant parse(const std::string& text);
  bool operator==(const KernelVariant&) const = default;
};

// Archetypes whose kernels have candidates. Not tuned: conv and attention (their tiles are chosen from
// shared memory and shape, no alternative is generated yet), scatter (an atomic scatter is two dispatches),
// grad-norm and clip-scale (their workgroup fixes the number of partial sums, which the memory plan sizes),
// counter (one thread).
bool tunable(Archetype a);

// The search space of one kernel (the one place it is defined; docs/debugging.md "Tuning" lists it):
//   pointwise             workgroup {64, 128, 256, 512} x elements per thread {1, 2, 4, 8}
//   row-reduce            workgroup {32, 64, 128, 256, 512} (a power of two: the shared-memory tree halves
//   it) copy, gather, optimizer, accumulate
//                         workgroup {64, 128, 256, 512}
//   matmul                every tier that can run the shape (GEMV for M <= 8, scalar with each tile of {128,
//                         64, 16}, and the cooperative tier the device's self-test passed, for Mixed16), the
//                         cooperative tier with each tile of {128x128x32/2x4, 64x128x32/2x4, 128x64x32/4x2,
//                         64x64x32/2x4, 128x256x32/2x4}, all unsplit (split=1): a split needs partial
//                         products and tickets that the memory plan, built before the search, holds only for
//                         the kernels the rule split
// Candidates above the device's workgroup limits are left out; those that fail to generate (a tile that does
// not fit shared memory, a tier unavailable for the shape) are skipped by the tuner. The first candidate is
// always the default; the heuristic's own choice may appear again in explicit form.
std::vector<KernelVariant> tune_candidates(const Graph& g, const KernelGraph& kg, size_t kernel,
                                           const runtime::DeviceCaps& caps, const CodegenOptions& options);

}  // namespace meganeura
