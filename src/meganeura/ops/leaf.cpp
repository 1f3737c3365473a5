// Leaves: inputs, parameters and constants are fed by whoever runs the graph; Fill is a scalar broadcast to a
// shape and is never materialised by a kernel (its GLSL expression is the literal).
#include "meganeura/ops/helpers.hpp"

namespace meganeura::ops {

namespace {

TypeInfo leaf_rule(const ShapeCtx& c) {
  for (int64_t d : c.attrs.ints)
    if (d < 0) c.fail("non-negative dimensions", shape_str(c.attrs.ints));
  return {c.attrs.ints, c.op == Op::Constant ? DType::F32 : c.attrs.dtype};
}

TypeInfo fill_rule(const ShapeCtx& c) {
  if (c.attrs.reals.size() != 1) c.fail("one fill value", std::to_string(c.attrs.reals.size()) + " values");
  return leaf_rule(c);
}

HostTensor ref_fill(const Node& n, const std::vector<const HostTensor*>&) {
  return HostTensor(n.shape, n.attrs.reals[0]);
}

}  // namespace

void register_leaf(OpTable& t) {
  t.add({Op::Input, 0, leaf_rule, nullptr, nullptr, nullptr});
  t.add({Op::Parameter, 0, leaf_rule, nullptr, nullptr, nullptr});
  t.add({Op::Constant, 0, leaf_rule, nullptr, nullptr, nullptr});
  t.add({Op::Fill, 0, fill_rule, nullptr, ref_fill, "$r0"});
}

}  // namespace meganeura::ops
