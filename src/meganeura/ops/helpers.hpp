#pragma once
// Shared pieces for the ops/<family>.cpp files: common shape rules, gradient plumbing for broadcasting and
// reductions, and float64 loops for reference functions. Not part of the public API.
#include <string>
#include <vector>

#include "meganeura/ops/ops.hpp"

namespace meganeura::ops {

// Block-quantized values are floats too (they reach only matmul and gather, which dequantize: ir/graph.hpp).
inline bool is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || is_quantized(t);
}

// Fails unless input i has a floating dtype.
void require_float(const ShapeCtx& c, size_t i);
// Same shape and dtype as input i.
TypeInfo same_as(const ShapeCtx& c, size_t i = 0);
// numpy broadcast of every input's shape; fails naming all shapes.
Shape broadcast_all(const ShapeCtx& c);
// Common dtype of inputs [first, last): equal dtypes, except that a Fill operand adopts the others' dtype and
// floats of different widths give f32.
DType common_dtype(const ShapeCtx& c, size_t first, size_t last);

// Reduction axes: empty means all; negatives count from the end; sorted, unique. Fails on a bad axis.
std::vector<int64_t> reduce_axes(const ShapeCtx& c, const std::vector<int64_t>& axes, size_t rank);
// Same without checks, for nodes that passed their shape rule.
std::vector<int64_t> reduce_axes(const std::vector<int64_t>& axes, size_t rank);
Shape reduced_shape(const Shape& in, const std::vector<int64_t>& axes, bool keepdim);

// Sums a gradient of a broadcast result back to the shape of the operand that was broadcast.
NodeId sum_to_shape(Graph& g, NodeId grad, const Shape& target);
// Brings a reduction's gradient (shape of the reduced output) back to the input's shape.
NodeId expand_reduced(Graph& g, NodeId grad, const Shape& in, const std::vector<int64_t>& axes, bool keepdim);

// The GLSL helper functions of pointwise_glsl_prelude(): the hand-written ones (ops/table.cpp) and
// mn_round_to_format, generated from ir/number_format's table (ops/elementwise.cpp).
const char* pointwise_glsl_functions();
std::string round_to_format_glsl();

// Reference loops.
template <class F>
HostTensor map_unary(const Node& n, const HostTensor& x, F f) {
  HostTensor r(n.shape);
  for (size_t i = 0; i < r.size(); ++i) r[i] = f(x[i]);
  return r;
}

template <class F>
HostTensor map_binary(const Node& n, const HostTensor& a, const HostTensor& b, F f) {
  HostTensor r(n.shape);
  BroadcastIndex ia(a.shape, n.shape), ib(b.shape, n.shape);
  for (size_t i = 0; i < r.size(); ++i) r[i] = f(a[size_t(ia(int64_t(i)))], b[size_t(ib(int64_t(i)))]);
  return r;
}

// For each flat index of `in`, the flat index of the reduced output (keepdim or not: same order).
std::vector<int64_t> reduction_map(const Shape& in, const std::vector<int64_t>& axes);

// Rows along one axis: calls f(base, stride, length) for every 1-D line of `shape` along `axis`.
template <class F>
void for_each_line(const Shape& shape, int64_t axis, F f) {
  int64_t len = shape[size_t(axis)];
  int64_t inner = 1;
  for (size_t i = size_t(axis) + 1; i < shape.size(); ++i) inner *= shape[i];
  int64_t outer = len == 0 ? 0 : numel(shape) / (len * inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) f(o * len * inner + in, inner, len);
}

}  // namespace meganeura::ops
