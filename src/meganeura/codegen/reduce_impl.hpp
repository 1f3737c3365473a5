#pragma once
// Internal to the row-reduction template (reduce.cpp, reduce_split.cpp).
#include "meganeura/codegen/emit.hpp"

namespace meganeura::codegen {

// A reduction kernel's rows: operand 0 seen as `vs` (a view for group norm), rows over the `kept` axes, each
// of C elements over `red_axes`.
struct RowGeometry {
  Op op;
  Shape vs;
  std::vector<int64_t> red_axes, kept;
  int64_t C = 1, R = 1;
  bool reduce_rows = false;     // a loss reduced over its rows into one value
  bool row_per_thread = false;  // ... with short rows: one thread walks each row
};

// A norm's output for element f with `mu` and `rstd` in scope: (x(f) − mu)·rstd·scale(ch) [+ shift(ch)], ch
// the affine channel of f (the row `o` for batch norm, the group's channel for group norm, else the position
// `r`).
std::string norm_affine(Emitter& e, const Node& core, const std::string& X);

// Emits `uint <name>(uint i)`: decomposes i over dims `dims` of `shape` (last fastest) into an offset.
std::string offset_fn(const std::string& name, const Shape& shape, const std::vector<int64_t>& dims);

// Chunks per row of the two-pass form, 0 for the one-pass kernel. Rows longer than kMaxRowChunk on fewer rows
// than the device has compute units, and batch-reduced losses that are not short rows, are split so that at
// least one workgroup per compute unit works (chunks of kMinRowChunk..kMaxRowChunk elements).
constexpr int64_t kMaxRowChunk = 4096, kMinRowChunk = 512;
int64_t reduce_chunks(const RowGeometry& r, const Node& core, const runtime::DeviceCaps& caps);

// Two dispatches: per (row, chunk) partial statistics into the kernel's scratch, then the statistics combined
// in chunk order (deterministic) and the result written: per (row, chunk) for elementwise results (softmax,
// norms), per row for one value a row, one workgroup over the rows for a batch-reduced loss.
void emit_reduce_split(Emitter& e, const RowGeometry& r, int64_t chunks);

}  // namespace meganeura::codegen
