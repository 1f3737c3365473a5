// Network ONNX ops: MatMul/Gemm, Conv/ConvTranspose (1-D and 2-D), pooling, the normalisations (as
// compositions of mean/variance, so every axis and layout ONNX allows works), Softmax family, reductions,
// ArgMax/ArgMin, Dropout (inference).
#include <algorithm>
#include <cmath>
#include <limits>

#include "meganeura/onnx/lower.hpp"
#include "meganeura/onnx/tensor.hpp"

namespace meganeura::onnx {
namespace {

constexpr int32_t kInt64 = int32_t(ElemType::Int64);

NodeId fresh(Lowering& L, NodeId x) { return L.g.reshape(x, L.g.node(x).shape); }

// A 1-D window op runs as 2-D with H = 1; 3-D and higher are refused.
struct Window {
  size_t dims = 2;
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end;
};

Window window_attrs(Lowering& L, const Shape& x, std::vector<int64_t> kernel, bool pooling) {
  Window w;
  w.dims = x.size() < 3 ? 0 : x.size() - 2;
  if (w.dims != 1 && w.dims != 2)
    L.unsupported("", "expected a 1-D or 2-D window (input rank 3 or 4), got input " + shape_str(x));
  if (kernel.empty())
    kernel = L.attr_ints("kernel_shape");
  else if (L.has("kernel_shape"))
    kernel = L.attr_ints("kernel_shape");
  if (kernel.size() != w.dims)
    L.unsupported("kernel_shape", "expected " + std::to_string(w.dims) + " values");
  w.kernel = kernel;
  w.strides = L.attr_ints("strides", std::vector<int64_t>(w.dims, 1));
  w.dilations = L.attr_ints("dilations", std::vector<int64_t>(w.dims, 1));
  std::vector<int64_t> pads = L.attr_ints("pads", std::vector<int64_t>(2 * w.dims, 0));
  if (w.strides.size() != w.dims || w.dilations.size() != w.dims || pads.size() != 2 * w.dims)
    L.unsupported("", "expected strides, dilations and pads of the kernel's rank");
  w.pads_begin.assign(pads.begin(), pads.begin() + long(w.dims));
  w.pads_end.assign(pads.begin() + long(w.dims), pads.end());
  const std::string auto_pad = L.attr_s("auto_pad", "NOTSET");
  const bool ceil_mode = pooling && L.attr_i("ceil_mode", 0) != 0;
  for (size_t i = 0; i < w.dims; ++i) {
    const int64_t in = x[2 + i], k = (w.kernel[i] - 1) * w.dilations[i] + 1, s = w.strides[i];
    if (s < 1 || w.kernel[i] < 1 || w.dilations[i] < 1)
      L.unsupported("", "expected positive kernel, strides, dilations");
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + k - in);
      w.pads_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pads_end[i] = total - w.pads_begin[i];
    } else if (auto_pad == "VALID") {
      w.pads_begin[i] = w.pads_end[i] = 0;
    } else if (auto_pad != "NOTSET") {
      L.unsupported("auto_pad", "expected NOTSET, SAME_UPPER, SAME_LOWER or VALID, got " + auto_pad);
    }
    if (ceil_mode) {  // extra cells at the end so the last partial window counts (if it starts inside)
      const int64_t span = in + w.pads_begin[i] + w.pads_end[i] - k;
      int64_t out = (span + s - 1) / s + 1;
      if ((out - 1) * s >= in + w.pads_begin[i]) --out;
      w.pads_end[i] += std::max<int64_t>(0, (out - 1) * s + k - (in + w.pads_begin[i] + w.pads_end[i]));
    }
  }
  if (w.dims == 1) {  // as 2-D with a unit first spatial axis
    w.kernel.insert(w.kernel.begin(), 1);
    w.strides.insert(w.strides.begin(), 1);
    w.dilations.insert(w.dilations.begin(), 1);
    w.pads_begin.insert(w.pads_begin.begin(), 0);
    w.pads_end.insert(w.pads_end.begin(), 0);
  }
  return w;
}

NodeId to_2d(Lowering& L, NodeId x, size_t dims) {
  if (dims == 2) return x;
  Shape s = L.g.node(x).shape;
  s.insert(s.begin() + 2, 1);
  return L.g.reshape(x, s);
}
NodeId from_2d(Lowering& L, NodeId x, size_t dims) {
  if (dims == 2) return x;
  Shape s = L.g.node(x).shape;
  s.erase(s.begin() + 2);
  return L.g.reshape(x, s);
}

// x padded explicitly when begin and end padding differ (or for a fill other than 0); returns the symmetric
// padding left for the op.
NodeId explicit_pad(Lowering& L, NodeId x, Window& w, double fill, bool always) {
  if (!always && w.pads_begin == w.pads_end) return x;
  bool any = false;
  for (size_t i = 0; i < 2; ++i) any = any || w.pads_begin[i] || w.pads_end[i];
  if (any)
    x = L.g.pad(x, {0, 0, w.pads_begin[0], w.pads_begin[1]}, {0, 0, w.pads_end[0], w.pads_end[1]}, fill);
  w.pads_begin = w.pads_end = {0, 0};
  return x;
}

// Conv and ConvTranspose: input and weight of one rank >= 3, and the window their spatial dims describe.
Window conv_window(Lowering& L) {
  const Shape xs = L.shape(0), ws = L.shape(1);
  if (ws.size() != xs.size() || xs.size() < 3)
    L.unsupported(
        "", "expected input and weight of one rank >= 3, got " + shape_str(xs) + " and " + shape_str(ws));
  return window_attrs(L, xs, std::vector<int64_t>(ws.begin() + 2, ws.end()), false);
}

void conv(Lowering& L) {
  const Shape ws = L.shape(1);
  Window w = conv_window(L);
  const int64_t groups = L.attr_i("group", 1);
  NodeId x = to_2d(L, L.in(0), w.dims), weight = to_2d(L, L.in(1), w.dims);
  x = explicit_pad(L, x, w, 0.0, false);
  NodeId y = L.g.conv2d(x, weight, w.strides, w.pads_begin, w.dilations, groups);
  if (L.has_input(2)) y = L.g.add(y, L.g.reshape(L.in(2), {1, ws[0], 1, 1}));
  L.out(0, from_2d(L, y, w.dims));
}

void conv_transpose(Lowering& L) {
  const Shape ws = L.shape(1);
  Window w = conv_window(L);
  const int64_t groups = L.attr_i("group", 1);
  std::vector<int64_t> out_pad = L.attr_ints("output_padding", std::vector<int64_t>(w.dims, 0));
  std::vector<int64_t> out_shape = L.attr_ints("output_shape");
  if (w.dims == 1) {
    out_pad.insert(out_pad.begin(), 0);
    if (!out_shape.empty()) out_shape.insert(out_shape.begin(), 1);
  }
  if (out_pad.size() != 2) L.unsupported("output_padding", "expected one value per spatial axis");
  NodeId x = to_2d(L, L.in(0), w.dims), weight = to_2d(L, L.in(1), w.dims);
  const Shape x2 = L.g.node(x).shape;
  // full-size transpose (no padding), then the padding crops
  int64_t full[2];
  for (int i = 0; i < 2; ++i)
    full[i] = (x2[2 + i] - 1) * w.strides[i] + (w.kernel[i] - 1) * w.dilations[i] + 1;
  if (!out_shape.empty()) {
    if (out_shape.size() != 2) L.unsupported("output_shape", "expected one value per spatial axis");
    const std::string auto_pad = L.attr_s("auto_pad", "NOTSET");
    for (int i = 0; i < 2; ++i) {
      const int64_t total = full[i] + out_pad[size_t(i)] - out_shape[size_t(i)];
      w.pads_begin[size_t(i)] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") w.pads_begin[size_t(i)] = total / 2;
      w.pads_end[size_t(i)] = total - w.pads_begin[size_t(i)];
    }
  } else if (L.attr_s("auto_pad", "NOTSET") == "SAME_UPPER" ||
             L.attr_s("auto_pad", "NOTSET") == "SAME_LOWER") {
    for (int i = 0; i < 2; ++i) {
      const int64_t target = x2[2 + i] * w.strides[i];
      const int64_t total = std::max<int64_t>(0, full[i] + out_pad[size_t(i)] - target);
      const bool upper = L.attr_s("auto_pad", "") == "SAME_UPPER";
      w.pads_begin[size_t(i)] = upper ? total / 2 : total - total / 2;
      w.pads_end[size_t(i)] = total - w.pads_begin[size_t(i)];
    }
  }
  Attrs a;
  a.ints = {w.strides[0],         w.strides[1],        0, 0, w.dilations[0], w.dilations[1], groups,
            full[0] + out_pad[0], full[1] + out_pad[1]};
  // ConvTranspose's weight [C, M/g, kh, kw] is the convolution weight of the transposed convolution
  NodeId y = L.g.make(Op::Conv2dGradInput, {x, weight}, a, Provenance{});
  for (int i = 0; i < 2; ++i) {
    const int64_t size = full[i] + out_pad[size_t(i)];
    const int64_t b = w.pads_begin[size_t(i)], e = size - w.pads_end[size_t(i)];
    if (b < 0 || e <= b) L.unsupported("pads", "expected pads inside the output");
    if (b > 0 || e < size) y = L.g.slice(y, 2 + i, b, e);
  }
  if (L.has_input(2)) y = L.g.add(y, L.g.reshape(L.in(2), {1, L.g.node(y).shape[1], 1, 1}));
  L.out(0, from_2d(L, y, w.dims));
}

void pool(Lowering& L, bool max) {
  if (max && L.has_output(1)) L.unsupported("", "expected no Indices output");
  if (max && L.attr_i("storage_order", 0) != 0) L.unsupported("storage_order", "expected 0");
  const Shape xs = L.shape(0);
  Window w = window_attrs(L, xs, {}, true);
  for (int64_t d : w.dilations)
    if (d != 1) L.unsupported("dilations", "expected 1");
  NodeId x = to_2d(L, L.in(0), w.dims);
  const Shape x2 = L.g.node(x).shape;
  if (max) {
    x = explicit_pad(L, x, w, -std::numeric_limits<float>::max(), true);
    return L.out(0, from_2d(L, L.g.max_pool2d(x, w.kernel, w.strides, {0, 0}), w.dims));
  }
  const bool include_pad = L.attr_i("count_include_pad", 0) != 0;
  const Window orig = w;
  const Window declared = window_attrs(L, xs, {}, false);  // the padding without the ceil-mode extension
  x = explicit_pad(L, x, w, 0.0, true);
  NodeId y = L.g.avg_pool2d(x, w.kernel, w.strides, {0, 0});
  const Shape ys = L.g.node(y).shape;
  // the divisor per output cell: cells of the window inside the input (or inside the declared padding)
  const int64_t lo_h = include_pad ? -declared.pads_begin[0] : 0,
                lo_w = include_pad ? -declared.pads_begin[1] : 0;
  const int64_t hi_h = x2[2] + (include_pad ? declared.pads_end[0] : 0);
  const int64_t hi_w = x2[3] + (include_pad ? declared.pads_end[1] : 0);
  HostTensor scale(Shape{ys[2], ys[3]});
  bool uniform = true;
  for (int64_t oh = 0; oh < ys[2]; ++oh)
    for (int64_t ow = 0; ow < ys[3]; ++ow) {
      int64_t count = 0;
      for (int64_t kh = 0; kh < w.kernel[0]; ++kh)
        for (int64_t kw = 0; kw < w.kernel[1]; ++kw) {
          const int64_t ih = oh * w.strides[0] + kh - orig.pads_begin[0],
                        iw = ow * w.strides[1] + kw - orig.pads_begin[1];
          count += ih >= lo_h && ih < hi_h && iw >= lo_w && iw < hi_w;
        }
      const double s = count ? double(w.kernel[0] * w.kernel[1]) / double(count) : 0.0;
      scale.data[size_t(oh * ys[3] + ow)] = s;
      uniform = uniform && s == scale.data[0];
    }
  if (!uniform || scale.data[0] != 1.0) y = L.g.mul(y, L.constant(scale));
  L.out(0, from_2d(L, y, w.dims));
}

// Axes of a Reduce* node: an attribute before the opset that made them an input (13 for ReduceSum, 18 for
// the others).
std::vector<int64_t> reduce_axes(Lowering& L, bool sum, bool& noop) {
  std::vector<int64_t> axes;
  const bool as_input = L.opset >= (sum ? 13 : 18);
  if (as_input) {
    if (L.has_input(1)) axes = L.known_ints(1);
  } else {
    axes = L.attr_ints("axes");
  }
  const bool noop_attr = L.attr_i("noop_with_empty_axes", 0) != 0;
  noop = axes.empty() && noop_attr;
  for (auto& a : axes) a = L.axis(a, L.shape(0).size());
  return axes;
}

Converter reduce(NodeId (*f)(Lowering&, NodeId, const std::vector<int64_t>&, bool), bool sum = false) {
  return [f, sum](Lowering& L) {
    bool noop = false;
    std::vector<int64_t> axes = reduce_axes(L, sum, noop);
    const bool keep = L.attr_i("keepdims", 1) != 0;
    if (numel(L.shape(0)) == 0) L.unsupported("", "expected a non-empty input");
    NodeId x = L.in(0);
    if (noop) return L.out(0, fresh(L, x));
    if (L.shape(0).empty()) return L.out(0, f(L, L.g.reshape(x, {1}), {0}, false));
    L.out(0, f(L, x, axes, keep));
  };
}

NodeId normalize(Lowering& L, NodeId x, const std::vector<int64_t>& axes, double eps) {
  NodeId mean = L.g.mean(x, axes, true);
  NodeId var = L.g.variance(x, axes, true);
  return L.g.div(L.g.sub(x, mean), L.g.sqrt(L.g.add(var, L.g.scalar(eps))));
}

// [C] → [1, C, 1, ...] for an NC... input of rank r
NodeId channel(Lowering& L, NodeId v, size_t rank) {
  Shape s(rank, 1);
  s[1] = numel(L.g.node(v).shape);
  return L.g.reshape(v, s);
}

void softmax(Lowering& L, bool log) {
  const Shape s = L.shape(0);
  const int64_t axis = L.axis(L.attr_i("axis", L.opset >= 13 ? -1 : 1), s.size());
  NodeId x = L.in(0);
  if (L.opset >= 13) return L.out(0, log ? L.g.log_softmax(x, axis) : L.g.softmax(x, axis));
  // before opset 13: over everything from `axis` on, as one flattened row
  int64_t a = 1, b = 1;
  for (size_t i = 0; i < s.size(); ++i) (int64_t(i) < axis ? a : b) *= s[i];
  NodeId f = L.g.reshape(x, {a, b});
  L.out(0, L.g.reshape(log ? L.g.log_softmax(f, 1) : L.g.softmax(f, 1), s));
}

void arg(Lowering& L, bool max) {
  const int64_t axis = L.axis(L.attr_i("axis", 0), L.shape(0).size());
  const bool keep = L.attr_i("keepdims", 1) != 0;
  const bool last = L.attr_i("select_last_index", 0) != 0;
  NodeId x = L.in(0);
  if (!max) x = L.g.neg(x);
  const int64_t dim = L.shape(0)[size_t(axis)];
  if (last) {  // the first maximum of the reversed axis is the last one
    std::vector<int64_t> rev;
    for (int64_t i = dim - 1; i >= 0; --i) rev.push_back(i);
    x = L.take(x, axis, host_ints(rev));
  }
  NodeId idx = L.g.cast(L.g.argmax(x, axis, keep), DType::F32);
  if (last) idx = L.g.sub(L.g.scalar(double(dim - 1)), idx);
  L.out(0, idx, kInt64);
}

}  // namespace

void add_nn_ops(ConverterTable& t) {
  t["MatMul"] = [](Lowering& L) {
    NodeId a = L.in(0), b = L.in(1);
    const Shape as = L.shape(0), bs = L.shape(1);
    if (as.empty() || bs.empty()) L.unsupported("", "expected operands of rank >= 1");
    if (as.size() == 1) a = L.g.reshape(a, {1, as[0]});
    if (bs.size() == 1) b = L.g.reshape(b, {bs[0], 1});
    NodeId y = L.g.matmul(a, b);
    Shape ys = L.g.node(y).shape;
    if (as.size() == 1) ys.erase(ys.end() - 2);
    if (bs.size() == 1) ys.erase(ys.end() - 1);
    if (ys != L.g.node(y).shape) y = L.g.reshape(y, ys);
    L.out(0, y);
  };
  t["Gemm"] = [](Lowering& L) {
    const double alpha = L.attr_f("alpha", 1.0), beta = L.attr_f("beta", 1.0);
    if (L.opset < 7 && L.has("broadcast")) L.attr_i("broadcast", 0);
    NodeId y = L.g.matmul(L.in(0), L.in(1), L.attr_i("transA", 0) != 0, L.attr_i("transB", 0) != 0);
    if (alpha != 1.0) y = L.g.mul(y, L.g.scalar(alpha));
    if (L.has_input(2)) {
      NodeId c = L.in(2);
      if (beta != 1.0) c = L.g.mul(c, L.g.scalar(beta));
      y = L.g.add(y, c);
    }
    L.out(0, y);
  };
  t["Conv"] = conv;
  t["ConvTranspose"] = conv_transpose;
  t["MaxPool"] = [](Lowering& L) { pool(L, true); };
  t["AveragePool"] = [](Lowering& L) { pool(L, false); };
  t["GlobalAveragePool"] = [](Lowering& L) {
    std::vector<int64_t> axes;
    for (size_t i = 2; i < L.shape(0).size(); ++i) axes.push_back(int64_t(i));
    L.out(0, L.g.mean(L.in(0), axes, true));
  };
  t["GlobalMaxPool"] = [](Lowering& L) {
    std::vector<int64_t> axes;
    for (size_t i = 2; i < L.shape(0).size(); ++i) axes.push_back(int64_t(i));
    L.out(0, L.g.max(L.in(0), axes, true));
  };
  t["BatchNormalization"] = [](Lowering& L) {
    if (L.attr_i("training_mode", 0) != 0) L.unsupported("training_mode", "expected inference (0)");
    if (L.has_output(1) || L.has_output(2)) L.unsupported("", "expected no running-statistics outputs");
    L.attr_f("momentum", 0.9);
    if (L.opset < 7) L.attr_i("is_test", 0), L.attr_i("spatial", 1), L.attr_ints("consumed_inputs");
    if (L.opset >= 7 && L.opset < 9) L.attr_i("spatial", 1);
    const double eps = L.attr_f("epsilon", 1e-5);
    const size_t r = L.shape(0).size();
    NodeId x = L.in(0);
    // The running statistics are buffers, not weights (as in PyTorch): fine-tuning an imported model must not
    // move them, and a gradient step on the variance can take it below zero under the square root.
    NodeId mean = L.g.stop_gradient(L.in(3)), var = L.g.stop_gradient(L.in(4));
    NodeId inv = L.g.rsqrt(L.g.add(channel(L, var, r), L.g.scalar(eps)));
    NodeId y = L.g.mul(L.g.sub(x, channel(L, mean, r)), L.g.mul(inv, channel(L, L.in(1), r)));
    L.out(0, L.g.add(y, channel(L, L.in(2), r)));
  };
  t["InstanceNormalization"] = [](Lowering& L) {
    const size_t r = L.shape(0).size();
    std::vector<int64_t> axes;
    for (size_t i = 2; i < r; ++i) axes.push_back(int64_t(i));
    NodeId y = normalize(L, L.in(0), axes, L.attr_f("epsilon", 1e-5));
    L.out(0, L.g.add(L.g.mul(y, channel(L, L.in(1), r)), channel(L, L.in(2), r)));
  };
  t["LayerNormalization"] = [](Lowering& L) {
    L.attr_i("stash_type", 1);
    const size_t r = L.shape(0).size();
    const int64_t axis = L.axis(L.attr_i("axis", -1), r);
    std::vector<int64_t> axes;
    for (int64_t i = axis; i < int64_t(r); ++i) axes.push_back(i);
    const double eps = L.attr_f("epsilon", 1e-5);
    NodeId x = L.in(0);
    NodeId y = L.g.mul(normalize(L, x, axes, eps), L.in(1));
    L.out(0, L.has_input(2) ? L.g.add(y, L.in(2)) : y);
    // Mean and InvStdDev, with the reduced axes kept as 1
    if (L.has_output(1)) L.out(1, L.g.mean(x, axes, true));
    if (L.has_output(2)) L.out(2, L.g.rsqrt(L.g.add(L.g.variance(x, axes, true), L.g.scalar(eps))));
  };
  t["RMSNormalization"] = [](Lowering& L) {
    L.attr_i("stash_type", 1);
    const size_t r = L.shape(0).size();
    const int64_t axis = L.axis(L.attr_i("axis", -1), r);
    std::vector<int64_t> axes;
    for (int64_t i = axis; i < int64_t(r); ++i) axes.push_back(i);
    NodeId x = L.in(0);
    NodeId ms = L.g.mean(L.g.square(x), axes, true);
    NodeId y = L.g.mul(x, L.g.rsqrt(L.g.add(ms, L.g.scalar(L.attr_f("epsilon", 1e-5)))));
    L.out(0, L.g.mul(y, L.in(1)));
  };
  t["GroupNormalization"] = [](Lowering& L) {
    L.attr_i("stash_type", 1);
    const Shape s = L.shape(0);
    const int64_t groups = L.attr_i("num_groups", 1);
    if (s.size() < 3 || groups < 1 || s[1] % groups)
      L.unsupported("num_groups", "expected a divisor of the channels");
    Shape gs{s[0], groups, -1};
    NodeId x = L.g.reshape(L.in(0), {s[0], groups, numel(s) / s[0] / groups});
    NodeId y = L.g.reshape(normalize(L, x, {2}, L.attr_f("epsilon", 1e-5)), s);
    NodeId scale = L.in(1), bias = L.in(2);
    if (L.opset < 21) {  // scale and bias per group
      const int64_t per = s[1] / groups;
      scale = L.g.reshape(L.g.broadcast_to(L.g.reshape(scale, {groups, 1}), {groups, per}), {s[1]});
      bias = L.g.reshape(L.g.broadcast_to(L.g.reshape(bias, {groups, 1}), {groups, per}), {s[1]});
    }
    L.out(0, L.g.add(L.g.mul(y, channel(L, scale, s.size())), channel(L, bias, s.size())));
  };
  t["LRN"] = [](Lowering& L) {  // x / (bias + alpha/size · Σ x² over a window of channels)^beta
    const Shape s = L.shape(0);
    const int64_t size = L.attr_i("size", 0);
    const double alpha = L.attr_f("alpha", 1e-4), beta = L.attr_f("beta", 0.75), bias = L.attr_f("bias", 1.0);
    if (s.size() < 3 || size < 1) L.unsupported("size", "expected size >= 1 and an input [N, C, ...]");
    Graph& g = L.g;
    NodeId x = L.in(0);
    NodeId sq = g.square(x);
    const int64_t before = (size - 1) / 2, after = size - 1 - before, C = s[1];
    std::vector<int64_t> b(s.size(), 0), a(s.size(), 0);
    b[1] = before, a[1] = after;
    NodeId padded = g.pad(sq, b, a, 0.0);
    std::optional<NodeId> sum;
    for (int64_t k = 0; k < size; ++k) {
      NodeId part = g.slice(padded, 1, k, k + C);
      sum = sum ? g.add(*sum, part) : part;
    }
    NodeId base = g.add(g.mul(*sum, g.scalar(alpha / double(size))), g.scalar(bias));
    L.out(0, g.div(x, g.pow(base, g.scalar(beta))));
  };
  t["Softmax"] = [](Lowering& L) { softmax(L, false); };
  t["LogSoftmax"] = [](Lowering& L) { softmax(L, true); };
  t["ReduceSum"] = reduce(
      [](Lowering& L, NodeId x, const std::vector<int64_t>& a, bool k) { return L.g.sum(x, a, k); }, true);
  t["ReduceMean"] =
      reduce([](Lowering& L, NodeId x, const std::vector<int64_t>& a, bool k) { return L.g.mean(x, a, k); });
  t["ReduceMax"] =
      reduce([](Lowering& L, NodeId x, const std::vector<int64_t>& a, bool k) { return L.g.max(x, a, k); });
  t["ReduceMin"] =
      reduce([](Lowering& L, NodeId x, const std::vector<int64_t>& a, bool k) { return L.g.min(x, a, k); });
  t["ReduceL1"] = reduce(
      [](Lowering& L, NodeId x, const std::vector<int64_t>& a, bool k) { return L.g.sum(L.g.abs(x), a, k); });
  t["ReduceL2"] = reduce([](Lowering& L, NodeId x, const std::vector<int64_t>& a, bool k) {
    return L.g.sqrt(L.g.sum(L.g.square(x), a, k));
  });
  t["ReduceSumSquare"] = reduce([](Lowering& L, NodeId x, const std::vector<int64_t>& a, bool k) {
    return L.g.sum(L.g.square(x), a, k);
  });
  t["ReduceLogSum"] = reduce(
      [](Lowering& L, NodeId x, const std::vector<int64_t>& a, bool k) { return L.g.log(L.g.sum(x, a, k)); });
  t["ReduceLogSumExp"] = reduce([](Lowering& L, NodeId x, const std::vector<int64_t>& a, bool k) {
    NodeId m = L.g.stop_gradient(L.g.max(x, a, true));
    NodeId r = L.g.add(L.g.log(L.g.sum(L.g.exp(L.g.sub(x, m)), a, true)), m);
    return k ? r : L.g.reshape(r, L.g.node(L.g.sum(x, a, false)).shape);
  });
  t["ReduceProd"] = reduce([](Lowering& L, NodeId x, const std::vector<int64_t>& a, bool k) {
    // |Π x| = exp(Σ log|x|); the sign from the parity of the negative count; any zero gives 0
    Graph& g = L.g;
    NodeId magnitude = g.exp(g.sum(g.log(g.abs(x)), a, k));
    NodeId negatives = g.sum(g.lt(x, g.scalar(0)), a, k);
    NodeId half = g.cast(g.cast(g.mul(negatives, g.scalar(0.5)), DType::I32), DType::F32);
    NodeId sign = g.sub(g.scalar(1), g.mul(g.sub(negatives, g.mul(half, g.scalar(2))), g.scalar(2)));
    NodeId zero = g.max(g.eq(x, g.scalar(0)), a, k);
    return g.where(zero, g.scalar(0), g.mul(magnitude, sign));
  });
  t["ArgMax"] = [](Lowering& L) { arg(L, true); };
  t["ArgMin"] = [](Lowering& L) { arg(L, false); };
  t["Dropout"] = [](Lowering& L) {
    if (L.opset < 7) L.attr_i("is_test", 0);
    L.attr_f("ratio", 0.5);
    L.attr_i("seed", 0);
    if (L.has_input(2) && L.known(2).data.at(0) != 0) L.unsupported("", "expected training_mode false");
    NodeId x = L.in(0);
    L.out(0, fresh(L, x));
    if (L.has_output(1)) L.out_known(1, HostTensor(L.shape(0), 1.0), int32_t(ElemType::Bool));
  };
}

}  // namespace meganeura::onnx
