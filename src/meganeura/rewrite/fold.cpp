#include "meganeura/rewrite/fold.hpp"

#include "meganeura/ops/ops.hpp"

namespace meganeura::rewrite {

bool is_elementwise(Op op) {
  auto v = static_cast<uint16_t>(op);
  return (v >= static_cast<uint16_t>(Op::Neg) && v <= static_cast<uint16_t>(Op::RoundToFormat) &&
          op != Op::Cast) ||
         (v >= static_cast<uint16_t>(Op::Add) && v <= static_cast<uint16_t>(Op::Where));
}

std::optional<std::vector<float>> evaluate(Op op, const Attrs& attrs, const std::vector<FoldInput>& inputs) {
  try {
    const ops::OpDef& d = ops::def(op);
    if (!d.reference) return std::nullopt;
    // a throwaway graph gives the op's own shape rule and a Node to hand the reference function
    Graph t;
    std::vector<NodeId> kids;
    std::vector<HostTensor> values;
    for (const auto& in : inputs) {
      if (in.uniform) {
        kids.push_back(t.fill(*in.uniform, in.shape, in.dtype));
        values.emplace_back(in.shape, *in.uniform);
      } else if (in.data) {
        kids.push_back(t.constant(*in.data, in.shape));
        values.emplace_back(in.shape, std::vector<double>(in.data->begin(), in.data->end()));
      } else {
        return std::nullopt;
      }
    }
    NodeId id = t.make(op, kids, attrs, {});
    std::vector<const HostTensor*> ptrs;
    for (const auto& v : values) ptrs.push_back(&v);
    HostTensor r = d.reference(t.node(id), ptrs);
    if (static_cast<int64_t>(r.data.size()) != numel(t.node(id).shape)) return std::nullopt;
    return std::vector<float>(r.data.begin(), r.data.end());
  } catch (const Error&) {
    return std::nullopt;  // the reference rejected it: leave the node unfolded
  }
}

}  // namespace meganeura::rewrite
