// Pointwise DAG: 256-thread workgroups, each thread four elements a launch apart (t, t + T, t + 2T, t + 3T),
// so accesses stay coalesced and the GPU schedules a quarter of the threads and a sixteenth of the
// workgroups of one element per 64-thread workgroup (that launch reached 30 % of copy bandwidth on the
// H200: docs/performance.md). The fused nodes are one generated function.
#include "meganeura/codegen/emit.hpp"

namespace meganeura::codegen {

void emit_pointwise(Emitter& e) {
  const Shape& shape = e.g.node(e.k.root).shape;
  int64_t n = numel(shape);
  std::string fn = e.region_fn(e.k.root, e.k.epilogue, shape, NodeId{});
  // The tuner may choose other sizes (KernelVariant); the values computed are the same.
  const uint32_t wg = e.variant.workgroup ? e.variant.workgroup : 256,
                 per = e.variant.per_thread ? e.variant.per_thread : 4;
  const int64_t threads = (n + per - 1) / per;
  std::string body =
      "  uint t = " + flat_invocation() + ";\n  if (t >= " + uint_lit(threads) + ") return;\n" +
      "  for (uint q = 0u; q < " + uint_lit(per) + "; ++q) {\n    uint i = t + q * " + uint_lit(threads) +
      ";\n    if (i >= " + uint_lit(n) + ") return;\n    " + e.store(e.k.root, "i", fn + "(i)") + "\n  }\n";
  e.out.spec_constants = {wg};
  e.out.grid = element_grid(threads, wg, e.caps);
  e.finish("layout(local_size_x_id = 0) in;\n", body);
}

}  // namespace meganeura::codegen
