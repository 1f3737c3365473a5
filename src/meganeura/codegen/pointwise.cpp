// Pointwise DAG: one thread per element of the root; the fused nodes are one generated function.
#include "meganeura/codegen/emit.hpp"

namespace meganeura::codegen {

void emit_pointwise(Emitter& e) {
  const Shape& shape = e.g.node(e.k.root).shape;
  int64_t n = numel(shape);
  std::string fn = e.region_fn(e.k.root, e.k.epilogue, shape, NodeId{});
  std::string body = "  uint i = " + flat_invocation() + ";\n  if (i >= " + uint_lit(n) + ") return;\n  " +
                     e.store(e.k.root, "i", fn + "(i)") + "\n";
  e.out.spec_constants = {e.opt.workgroup};
  e.out.grid = element_grid(n, e.opt.workgroup, e.caps);
  e.finish("layout(local_size_x_id = 0) in;\n", body);
}

}  // namespace meganeura::codegen
