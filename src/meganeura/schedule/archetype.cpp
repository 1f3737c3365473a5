// The archetypes' names (an op's scheduling class is its line in ir/op_list.hpp).
#include "meganeura/schedule/schedule.hpp"

namespace meganeura {

const char* archetype_name(Archetype a) {
  switch (a) {
    case Archetype::Pointwise: return "pointwise";
    case Archetype::RowReduce: return "row-reduce";
    case Archetype::MatMul: return "matmul";
    case Archetype::Conv: return "conv";
    case Archetype::Gather: return "gather";
    case Archetype::Scatter: return "scatter";
    case Archetype::Copy: return "copy";
    case Archetype::Attention: return "attention";
    case Archetype::Optimizer: return "optimizer";
    case Archetype::Counter: return "counter";
    case Archetype::Accumulate: return "accumulate";
    case Archetype::GradNorm: return "grad-norm";
    case Archetype::ClipScale: return "clip-scale";
  }
  return "?";
}

}  // namespace meganeura
