#pragma once
// Constant folding through the CPU reference interpreter, so a folded value is exactly what the reference
// computes for the unfolded graph.
#include <optional>
#include <vector>

#include "meganeura/ir/graph.hpp"

namespace meganeura::rewrite {

struct FoldInput {
  Shape shape;
  DType dtype;
  std::optional<double> uniform;   // every element equals this (a Fill)
  const std::vector<float>* data;  // a Constant's data, else nullptr
};

bool is_elementwise(Op op);  // unary, binary and Where: a uniform input gives a uniform output

// The value of op applied to the inputs, as row-major f32 data of `out`'s size; nullopt when the reference
// cannot evaluate it.
std::optional<std::vector<float>> evaluate(Op op, const Attrs& attrs, const std::vector<FoldInput>& inputs);

}  // namespace meganeura::rewrite
