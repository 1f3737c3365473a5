// op_name, op_class and op_flops_per_element: the columns of ir/op_list.hpp.
#include "meganeura/ir/graph.hpp"

namespace meganeura {
namespace {

struct OpInfo {
  const char* name;
  OpClass cls;
  double flops;
};

constexpr OpInfo kOps[] = {
#define MEGANEURA_OP_INFO(e, name, cls, flops) {name, OpClass::cls, flops},
    MEGANEURA_OPS(MEGANEURA_OP_INFO)
#undef MEGANEURA_OP_INFO
};
static_assert(sizeof(kOps) / sizeof(kOps[0]) == size_t(Op::Count_));

}  // namespace

const char* op_name(Op op) { return size_t(op) < size_t(Op::Count_) ? kOps[size_t(op)].name : "?"; }
OpClass op_class(Op op) {
  return size_t(op) < size_t(Op::Count_) ? kOps[size_t(op)].cls : OpClass::Unsupported;
}
double op_flops_per_element(Op op) { return size_t(op) < size_t(Op::Count_) ? kOps[size_t(op)].flops : 1; }

}  // namespace meganeura
