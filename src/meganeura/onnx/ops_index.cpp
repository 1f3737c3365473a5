// Index-driven ONNX ops lowered to gathers, comparisons with an iota and matmuls with constant matrices:
// GatherElements, OneHot, Hardmax, CumSum, DepthToSpace/SpaceToDepth, LpNormalization, Round, ReduceProd.
#include <cmath>

#include "meganeura/onnx/lower.hpp"
#include "meganeura/onnx/tensor.hpp"

namespace meganeura::onnx {
namespace {

// [1, .., n, .., 1] with n values 0..n-1 at `axis` of a rank-r shape
HostTensor iota(int64_t n, size_t axis, size_t rank) {
  Shape s(rank, 1);
  s[axis] = n;
  HostTensor t(s);
  for (int64_t i = 0; i < n; ++i) t.data[size_t(i)] = double(i);
  return t;
}

NodeId floor_of(Graph& g, NodeId x) {
  NodeId t = g.cast(g.cast(x, DType::I32), DType::F32);
  return g.sub(t, g.gt(t, x));
}

void gather_elements(Lowering& L) {
  const Shape ds = L.shape(0), is = L.shape(1);
  const size_t r = ds.size();
  const int64_t axis = L.axis(L.attr_i("axis", 0), r);
  if (is.size() != r) L.unsupported("", "expected indices of the data's rank");
  if (numel(is) == 0) L.unsupported("", "expected non-empty indices");
  // flat source index = base (every axis but `axis`, from the index position) + index · stride(axis)
  std::vector<int64_t> stride(r, 1);
  for (size_t a = r - 1; a > 0; --a) stride[a - 1] = stride[a] * ds[a];
  HostTensor base(is);
  std::vector<int64_t> pos(r, 0);
  for (size_t k = 0; k < base.data.size(); ++k) {
    int64_t off = 0;
    for (size_t a = 0; a < r; ++a)
      if (int64_t(a) != axis) off += pos[a] * stride[a];
    base.data[k] = double(off);
    for (size_t a = r; a-- > 0;) {
      if (++pos[a] < is[a]) break;
      pos[a] = 0;
    }
  }
  NodeId idx = L.in(1);
  const double dim = double(ds[size_t(axis)]);
  idx = L.g.where(L.g.lt(idx, L.g.scalar(0)), L.g.add(idx, L.g.scalar(dim)), idx);
  NodeId flat = L.g.add(L.constant(base), L.g.mul(idx, L.g.scalar(double(stride[size_t(axis)]))));
  NodeId table = L.g.reshape(L.in(0), {numel(ds)});
  L.out(0, L.take_node(table, 0, flat));
}

void one_hot(Lowering& L) {
  const Shape is = L.shape(0);
  const int64_t depth = int64_t(L.known(1).data.at(0));
  if (depth < 1) L.unsupported("", "expected depth >= 1");
  const HostTensor& values = L.known(2);
  const size_t r = is.size() + 1;
  const int64_t axis = L.axis(L.attr_i("axis", -1), r);
  NodeId idx = L.in(0);
  idx = L.g.where(L.g.lt(idx, L.g.scalar(0)), L.g.add(idx, L.g.scalar(double(depth))), idx);
  Shape us = is;
  us.insert(us.begin() + axis, 1);
  NodeId hit = L.g.eq(L.g.reshape(idx, us), L.constant(iota(depth, size_t(axis), r)));
  L.out(0, L.g.where(hit, L.g.scalar(values.data.at(1)), L.g.scalar(values.data.at(0))), L.type(2));
}

void hardmax(Lowering& L) {
  const Shape s = L.shape(0);
  const int64_t axis = L.axis(L.attr_i("axis", -1), s.size());
  if (L.opset < 13) L.unsupported("", "expected opset >= 13 (single-axis Hardmax)");
  NodeId am = L.g.cast(L.g.argmax(L.in(0), axis, true), DType::F32);
  L.out(0, L.g.eq(am, L.constant(iota(s[size_t(axis)], size_t(axis), s.size()))));
}

void cumsum(Lowering& L) {
  const Shape s = L.shape(0);
  const int64_t axis = L.axis(int64_t(L.known(1).data.at(0)), s.size());
  const bool exclusive = L.attr_i("exclusive", 0) != 0, reverse = L.attr_i("reverse", 0) != 0;
  const int64_t n = s[size_t(axis)];
  // y[.., j] = Σ_i x[.., i] · M[i, j] with M[i, j] = 1 where i is summed into j
  HostTensor m(Shape{n, n}, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const bool in = reverse ? (exclusive ? i > j : i >= j) : (exclusive ? i < j : i <= j);
      m.data[size_t(i * n + j)] = in;
    }
  std::vector<int64_t> perm;
  for (int64_t a = 0; a < int64_t(s.size()); ++a)
    if (a != axis) perm.push_back(a);
  perm.push_back(axis);
  std::vector<int64_t> inv(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) inv[size_t(perm[k])] = int64_t(k);
  NodeId x = L.in(0);
  const bool last = axis == int64_t(s.size()) - 1;
  NodeId xt = last ? x : L.g.permute(x, perm);
  Shape ts = L.g.node(xt).shape;
  NodeId flat = L.g.reshape(xt, {numel(s) / n, n});
  NodeId y = L.g.reshape(L.g.matmul(flat, L.constant(m)), ts);
  L.out(0, last ? y : L.g.permute(y, inv));
}

void depth_space(Lowering& L, bool to_space) {
  const Shape s = L.shape(0);
  if (s.size() != 4) L.unsupported("", "expected a 4-D input");
  const int64_t b = L.attr_i("blocksize", 0);
  if (b < 1) L.unsupported("blocksize", "expected >= 1");
  const int64_t N = s[0], C = s[1], H = s[2], W = s[3];
  NodeId x = L.in(0);
  if (to_space) {
    const std::string mode = L.attr_s("mode", "DCR");
    if (C % (b * b)) L.unsupported("blocksize", "expected channels divisible by blocksize²");
    if (mode == "DCR") {
      x = L.g.reshape(x, {N, b, b, C / (b * b), H, W});
      x = L.g.permute(x, {0, 3, 4, 1, 5, 2});
    } else if (mode == "CRD") {
      x = L.g.reshape(x, {N, C / (b * b), b, b, H, W});
      x = L.g.permute(x, {0, 1, 4, 2, 5, 3});
    } else {
      L.unsupported("mode", "expected DCR or CRD, got " + mode);
    }
    L.out(0, L.g.reshape(x, {N, C / (b * b), H * b, W * b}));
  } else {
    if (H % b || W % b) L.unsupported("blocksize", "expected spatial sizes divisible by blocksize");
    const std::string mode = L.attr_s("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") L.unsupported("mode", "expected DCR or CRD, got " + mode);
    x = L.g.reshape(x, {N, C, H / b, b, W / b, b});
    // DCR: output channel (bh, bw, c); CRD: (c, bh, bw)
    x = mode == "DCR" ? L.g.permute(x, {0, 3, 5, 1, 2, 4}) : L.g.permute(x, {0, 1, 3, 5, 2, 4});
    L.out(0, L.g.reshape(x, {N, C * b * b, H / b, W / b}));
  }
}

}  // namespace

void add_index_ops(ConverterTable& t) {
  t["GatherElements"] = gather_elements;
  t["OneHot"] = one_hot;
  t["Hardmax"] = hardmax;
  t["CumSum"] = cumsum;
  t["DepthToSpace"] = [](Lowering& L) { depth_space(L, true); };
  t["SpaceToDepth"] = [](Lowering& L) { depth_space(L, false); };
  t["LpNormalization"] = [](Lowering& L) {
    const int64_t axis = L.axis(L.attr_i("axis", -1), L.shape(0).size());
    const int64_t p = L.attr_i("p", 2);
    NodeId x = L.in(0);
    NodeId norm = p == 1   ? L.g.sum(L.g.abs(x), {axis}, true)
                  : p == 2 ? L.g.sqrt(L.g.sum(L.g.square(x), {axis}, true))
                           : (L.unsupported("p", "expected 1 or 2"), x);
    L.out(0, L.g.div(x, norm));
  };
  t["Round"] = [](Lowering& L) {  // half to even
    Graph& g = L.g;
    NodeId x = L.in(0);
    NodeId f = floor_of(g, g.add(x, g.scalar(0.5)));
    NodeId tie = g.eq(g.sub(f, x), g.scalar(0.5));
    NodeId odd = g.ne(g.sub(f, g.mul(floor_of(g, g.mul(f, g.scalar(0.5))), g.scalar(2))), g.scalar(0));
    L.out(0, g.sub(f, g.mul(tie, odd)));
  };
}

}  // namespace meganeura::onnx
