#include "meganeura/rewrite/cost.hpp"

#include <algorithm>

namespace meganeura::rewrite {

namespace {

double bytes(const Shape& s, DType t) {
  return static_cast<double>(numel(s)) * dtype_block_bytes(t) / dtype_block_elems(t);
}

}  // namespace

double node_cost(Op op, const Attrs& attrs, const std::vector<CostInput>& inputs, const Shape& out,
                 DType out_dtype) {
  switch (op_class(op)) {
    case OpClass::Leaf:
    case OpClass::Fill: return 0;
    case OpClass::Alias: return 1;  // a view: no data moves
    default: break;
  }
  double read = 0;
  double in_elems = 0;
  for (const auto& in : inputs) {
    // a Fill is a uniform, not a buffer: cheap, but not free, so x * 1 costs more than x and -x less than x *
    // -1
    read += in.is_fill ? 4.0 : bytes(*in.shape, in.dtype);
    in_elems = std::max(in_elems, static_cast<double>(numel(*in.shape)));
  }
  double write = bytes(out, out_dtype);
  double flops = 0;
  if (op == Op::MatMul && inputs.size() == 2) {
    const Shape& a = *inputs[0].shape;
    int64_t k = a.empty() ? 1 : (attrs.flag_a ? a[a.size() >= 2 ? a.size() - 2 : 0] : a.back());
    flops = 2.0 * static_cast<double>(numel(out)) * static_cast<double>(k);
  } else {
    flops = std::max(in_elems, static_cast<double>(numel(out))) * op_flops_per_element(op);
  }
  return 1 + read + write + flops;
}

double node_cost(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  std::vector<CostInput> ins;
  for (NodeId k : n.inputs) {
    const Node& kn = g.node(k);
    ins.push_back({&kn.shape, kn.dtype, kn.op == Op::Fill});
  }
  return node_cost(n.op, n.attrs, ins, n.shape, n.dtype);
}

}  // namespace meganeura::rewrite
