// Vision ops, NCHW: conv2d and its two gradient ops, max/avg pooling and their gradient ops, nearest
// upsampling. global_avg_pool is a mean over {2, 3} (built in Graph::global_avg_pool).
//
// Attrs (ints):
//   Conv2d            {sh, sw, ph, pw, dh, dw, groups}                inputs {x, w}
//   Conv2dGradInput   {sh, sw, ph, pw, dh, dw, groups, H, W}          inputs {dy, w}  -> dx
//   Conv2dGradWeight  {sh, sw, ph, pw, dh, dw, groups, KH, KW}        inputs {x, dy}  -> dw
//   MaxPool2d         {kh, kw, sh, sw, ph, pw}                        inputs {x}
//   MaxPool2dGrad     {kh, kw, sh, sw, ph, pw}                        inputs {x, dy}  -> dx
//   AvgPool2d         {kh, kw, sh, sw, ph, pw}                        inputs {x}
//   AvgPool2dGrad     {kh, kw, sh, sw, ph, pw, H, W}                  inputs {dy}     -> dx
//   UpsampleNearest   {factor}                                        inputs {x}
// The gradient ops carry the size they restore (H, W or KH, KW) because a strided forward loses it.
#include <algorithm>
#include <limits>

#include "meganeura/ops/ops.hpp"

namespace meganeura::ops {

namespace {

std::string ints_str(const std::vector<int64_t>& v) { return shape_str(v); }

// ------------------------------------------------------------------------------------------ convolution
struct ConvGeom {
  int64_t n, cin, h, w, cout, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups;
  int64_t cin_g() const { return cin / groups; }
  int64_t cout_g() const { return cout / groups; }
};

// Output length of a sliding window; 0 when the window does not fit (integer division would round a
// negative span up to a spurious single window).
int64_t window_out(int64_t span, int64_t s) { return span < 0 ? 0 : span / s + 1; }
int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return window_out(in + 2 * p - d * (k - 1) - 1, s);
}

void check_conv_params(const ShapeCtx& c, size_t count) {
  const auto& a = c.attrs.ints;
  if (a.size() != count)
    c.fail(std::to_string(count) + " integer attributes", std::to_string(a.size()) + " " + ints_str(a));
  if (a[0] < 1 || a[1] < 1 || a[2] < 0 || a[3] < 0 || a[4] < 1 || a[5] < 1 || a[6] < 1)
    c.fail("stride >= 1, padding >= 0, dilation >= 1, groups >= 1", "attrs " + ints_str(a));
}

// Checks a (x shape, w shape) pair against the forward conv parameters and returns the geometry.
ConvGeom conv_geom(const ShapeCtx& c, const Shape& x, const Shape& wt) {
  const auto& a = c.attrs.ints;
  if (x.size() != 4) c.fail("x of rank 4 [N, C, H, W]", "x " + shape_str(x));
  if (wt.size() != 4) c.fail("weight of rank 4 [Cout, Cin/groups, KH, KW]", "weight " + shape_str(wt));
  ConvGeom g{x[0], x[1], x[2], x[3], wt[0], wt[2], wt[3], 0, 0, a[0], a[1], a[2], a[3], a[4], a[5], a[6]};
  if (g.cin % g.groups || g.cout % g.groups || wt[1] != g.cin / g.groups)
    c.fail("C and Cout divisible by groups=" + std::to_string(g.groups) + " and weight[1] == C/groups",
           "x " + shape_str(x) + ", weight " + shape_str(wt));
  g.oh = conv_out(g.h, g.kh, g.sh, g.ph, g.dh);
  g.ow = conv_out(g.w, g.kw, g.sw, g.pw, g.dw);
  if (g.oh < 1 || g.ow < 1)
    c.fail("a kernel (with dilation) that fits the padded input",
           "x " + shape_str(x) + ", weight " + shape_str(wt) + ", padding " + std::to_string(g.ph) + "," +
               std::to_string(g.pw));
  return g;
}

TypeInfo conv2d_shape(const ShapeCtx& c) {
  check_conv_params(c, 7);
  ConvGeom g = conv_geom(c, c.shape(0), c.shape(1));
  return {{g.n, g.cout, g.oh, g.ow}, c.dtype(0)};
}

TypeInfo conv2d_grad_input_shape(const ShapeCtx& c) {
  check_conv_params(c, 9);
  const Shape& dy = c.shape(0);
  const Shape& wt = c.shape(1);
  const auto& a = c.attrs.ints;
  if (dy.size() != 4 || wt.size() != 4)
    c.fail("dy and weight of rank 4", shape_str(dy) + ", " + shape_str(wt));
  Shape x{dy[0], wt[1] * a[6], a[7], a[8]};
  ConvGeom g = conv_geom(c, x, wt);
  if (dy[1] != g.cout || dy[2] != g.oh || dy[3] != g.ow)
    c.fail("dy " + shape_str({g.n, g.cout, g.oh, g.ow}), "dy " + shape_str(dy));
  return {x, c.dtype(0)};
}

TypeInfo conv2d_grad_weight_shape(const ShapeCtx& c) {
  check_conv_params(c, 9);
  const Shape& x = c.shape(0);
  const Shape& dy = c.shape(1);
  const auto& a = c.attrs.ints;
  if (x.size() != 4 || dy.size() != 4) c.fail("x and dy of rank 4", shape_str(x) + ", " + shape_str(dy));
  if (a[6] < 1 || x[1] % a[6]) c.fail("C divisible by groups", "x " + shape_str(x));
  Shape wt{dy[1], x[1] / a[6], a[7], a[8]};
  ConvGeom g = conv_geom(c, x, wt);
  if (dy[0] != g.n || dy[2] != g.oh || dy[3] != g.ow)
    c.fail("dy " + shape_str({g.n, g.cout, g.oh, g.ow}), "dy " + shape_str(dy));
  return {wt, c.dtype(0)};
}

ConvGeom geom_of(const std::vector<int64_t>& a, const Shape& x, const Shape& wt) {
  ConvGeom g{x[0], x[1], x[2], x[3], wt[0], wt[2], wt[3], 0, 0, a[0], a[1], a[2], a[3], a[4], a[5], a[6]};
  g.oh = conv_out(g.h, g.kh, g.sh, g.ph, g.dh);
  g.ow = conv_out(g.w, g.kw, g.sw, g.pw, g.dw);
  return g;
}

// Visits every (input element, weight element, output element) triple of the convolution once; the three
// reference functions differ only in which of the three they accumulate into.
template <class F>
void conv_visit(const ConvGeom& g, F&& f) {
  const int64_t cig = g.cin_g(), cog = g.cout_g();
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t co = 0; co < g.cout; ++co) {
      const int64_t grp = co / cog;
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          const int64_t o = ((n * g.cout + co) * g.oh + oy) * g.ow + ox;
          for (int64_t ci = 0; ci < cig; ++ci) {
            const int64_t c_in = grp * cig + ci;
            for (int64_t ky = 0; ky < g.kh; ++ky) {
              const int64_t iy = oy * g.sh - g.ph + ky * g.dh;
              if (iy < 0 || iy >= g.h) continue;
              for (int64_t kx = 0; kx < g.kw; ++kx) {
                const int64_t ix = ox * g.sw - g.pw + kx * g.dw;
                if (ix < 0 || ix >= g.w) continue;
                const int64_t xi = ((n * g.cin + c_in) * g.h + iy) * g.w + ix;
                const int64_t wi = ((co * cig + ci) * g.kh + ky) * g.kw + kx;
                f(size_t(xi), size_t(wi), size_t(o));
              }
            }
          }
        }
    }
}

HostTensor conv2d_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  const HostTensor &x = *in[0], &w = *in[1];
  HostTensor y(node.shape);
  conv_visit(geom_of(node.attrs.ints, x.shape, w.shape),
             [&](size_t xi, size_t wi, size_t o) { y.data[o] += x.data[xi] * w.data[wi]; });
  return y;
}

HostTensor conv2d_grad_input_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  const HostTensor &dy = *in[0], &w = *in[1];
  HostTensor dx(node.shape);
  conv_visit(geom_of(node.attrs.ints, node.shape, w.shape),
             [&](size_t xi, size_t wi, size_t o) { dx.data[xi] += dy.data[o] * w.data[wi]; });
  return dx;
}

HostTensor conv2d_grad_weight_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  const HostTensor &x = *in[0], &dy = *in[1];
  HostTensor dw(node.shape);
  conv_visit(geom_of(node.attrs.ints, x.shape, node.shape),
             [&](size_t xi, size_t wi, size_t o) { dw.data[wi] += x.data[xi] * dy.data[o]; });
  return dw;
}

std::vector<int64_t> head(const std::vector<int64_t>& v, size_t n) {
  return {v.begin(), v.begin() + long(n)};
}

Attrs with_ints(std::vector<int64_t> ints) {
  Attrs a;
  a.ints = std::move(ints);
  return a;
}

// How many partial weight gradients to compute side by side: the weight gradient reduces over N·OH·OW,
// usually far more than its few output tiles can spread over a GPU. Splitting the batch into P slices
// gives P independent GEMMs of reduction length N/P·OH·OW each; P is the largest divisor of N that keeps
// each slice's reduction at least 512 long and the partials at most 4M elements.
int64_t weight_grad_splits(int64_t n, int64_t pixels, int64_t weight_elements) {
  if (n * pixels < 2048) return 1;
  for (int64_t p = std::min<int64_t>(n, 64); p > 1; --p)
    if (n % p == 0 && (n / p) * pixels >= 512 && p * weight_elements <= (int64_t(1) << 22)) return p;
  return 1;
}

// dw for x [N, C, H, W] and dy [N, Cout, OH, OW]. Split P ways without copying anything: viewing x as
// [N/P, P·C, H, W] (image s·P + i's channels become group block i) and dy likewise, a convolution weight
// gradient with P·groups groups computes, in group block i, the sum over images i, i + P, ...; its result
// [P·Cout, C/g, KH, KW] viewed as [P, Cout, C/g, KH, KW] is summed over the P partials.
NodeId conv_weight_grad(Graph& g, NodeId x, NodeId dy, const std::vector<int64_t>& attrs7, const Shape& w) {
  const Shape xs = g.node(x).shape, ys = g.node(dy).shape;
  auto ints = attrs7;
  ints.insert(ints.end(), {w[2], w[3]});
  const int64_t p = weight_grad_splits(xs[0], ys[2] * ys[3], numel(w));
  if (p == 1) return g.make(Op::Conv2dGradWeight, {x, dy}, with_ints(ints), {});
  ints[6] *= p;
  const NodeId xv = g.reshape(x, {xs[0] / p, p * xs[1], xs[2], xs[3]});
  const NodeId yv = g.reshape(dy, {ys[0] / p, p * ys[1], ys[2], ys[3]});
  const NodeId parts = g.make(Op::Conv2dGradWeight, {xv, yv}, with_ints(ints), {});
  return g.sum(g.reshape(parts, {p, w[0], w[1], w[2], w[3]}), {0});
}

std::vector<NodeId> conv2d_vjp(VjpCtx& c) {
  const auto& a = c.fwd.attrs.ints;
  const Shape x = c.in_shape(0), w = c.in_shape(1);
  NodeId dx, dw;
  if (c.needs(0)) {
    auto ints = a;
    ints.insert(ints.end(), {x[2], x[3]});
    dx = c.g.make(Op::Conv2dGradInput, {c.grad, c.in(1)}, with_ints(ints), {});
  }
  if (c.needs(1)) dw = conv_weight_grad(c.g, c.in(0), c.grad, a, w);
  return {dx, dw};
}

// GradInput(dy, w) is bilinear and is the adjoint of conv in x, so its own gradients are a convolution
// (for dy) and a weight gradient (for w).
std::vector<NodeId> conv2d_grad_input_vjp(VjpCtx& c) {
  const auto& a = c.fwd.attrs.ints;
  const Shape w = c.in_shape(1);
  NodeId ddy, dw;
  if (c.needs(0)) ddy = c.g.make(Op::Conv2d, {c.grad, c.in(1)}, with_ints(head(a, 7)), {});
  if (c.needs(1)) dw = conv_weight_grad(c.g, c.grad, c.in(0), head(a, 7), w);
  return {ddy, dw};
}

std::vector<NodeId> conv2d_grad_weight_vjp(VjpCtx& c) {
  const auto& a = c.fwd.attrs.ints;
  const Shape x = c.in_shape(0);
  NodeId dx, ddy;
  if (c.needs(0)) {
    auto ints = head(a, 7);
    ints.insert(ints.end(), {x[2], x[3]});
    dx = c.g.make(Op::Conv2dGradInput, {c.in(1), c.grad}, with_ints(ints), {});
  }
  if (c.needs(1)) ddy = c.g.make(Op::Conv2d, {c.in(0), c.grad}, with_ints(head(a, 7)), {});
  return {dx, ddy};
}

// ------------------------------------------------------------------------------------------ pooling
struct PoolGeom {
  int64_t nc, h, w, kh, kw, sh, sw, ph, pw, oh, ow;
};

PoolGeom pool_geom(const std::vector<int64_t>& a, const Shape& x) {
  PoolGeom g{x[0] * x[1], x[2], x[3], a[0], a[1], a[2], a[3], a[4], a[5], 0, 0};
  g.oh = window_out(g.h + 2 * g.ph - g.kh, g.sh);
  g.ow = window_out(g.w + 2 * g.pw - g.kw, g.sw);
  return g;
}

PoolGeom check_pool(const ShapeCtx& c, const Shape& x, size_t count) {
  const auto& a = c.attrs.ints;
  if (a.size() != count)
    c.fail(std::to_string(count) + " integer attributes", std::to_string(a.size()) + " " + ints_str(a));
  if (x.size() != 4) c.fail("x of rank 4 [N, C, H, W]", "x " + shape_str(x));
  if (a[0] < 1 || a[1] < 1 || a[2] < 1 || a[3] < 1 || a[4] < 0 || a[5] < 0)
    c.fail("kernel >= 1, stride >= 1, padding >= 0", "attrs " + ints_str(a));
  // A window must always hold at least one real element (torch's rule): padding at most half the kernel.
  if (2 * a[4] > a[0] || 2 * a[5] > a[1])
    c.fail("padding at most half the kernel",
           "kernel " + ints_str(head(a, 2)) + ", padding " + ints_str({a[4], a[5]}));
  PoolGeom g = pool_geom(a, x);
  if (g.oh < 1 || g.ow < 1)
    c.fail("a window that fits the padded input", "x " + shape_str(x) + ", attrs " + ints_str(a));
  return g;
}

TypeInfo pool_shape(const ShapeCtx& c) {
  PoolGeom g = check_pool(c, c.shape(0), 6);
  return {{c.shape(0)[0], c.shape(0)[1], g.oh, g.ow}, c.dtype(0)};
}

TypeInfo max_pool_grad_shape(const ShapeCtx& c) {
  const Shape& x = c.shape(0);
  PoolGeom g = check_pool(c, x, 6);
  Shape want{x[0], x[1], g.oh, g.ow};
  if (c.shape(1) != want) c.fail("dy " + shape_str(want), "dy " + shape_str(c.shape(1)));
  return {x, c.dtype(0)};
}

TypeInfo avg_pool_grad_shape(const ShapeCtx& c) {
  const Shape& dy = c.shape(0);
  const auto& a = c.attrs.ints;
  if (a.size() != 8 || dy.size() != 4)
    c.fail("8 integer attributes and dy of rank 4", ints_str(a) + ", dy " + shape_str(dy));
  Shape x{dy[0], dy[1], a[6], a[7]};
  PoolGeom g = check_pool(c, x, 8);
  if (dy[2] != g.oh || dy[3] != g.ow)
    c.fail("dy " + shape_str({x[0], x[1], g.oh, g.ow}), "dy " + shape_str(dy));
  return {x, c.dtype(0)};
}

// Calls f(window output index, flat input index) for the in-bounds cells of each window, in row-major
// window order (which fixes the tie rule of max pooling: the first maximum wins).
template <class F>
void pool_visit(const PoolGeom& g, F&& f) {
  for (int64_t p = 0; p < g.nc; ++p)
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const int64_t o = (p * g.oh + oy) * g.ow + ox;
        for (int64_t ky = 0; ky < g.kh; ++ky) {
          const int64_t iy = oy * g.sh - g.ph + ky;
          if (iy < 0 || iy >= g.h) continue;
          for (int64_t kx = 0; kx < g.kw; ++kx) {
            const int64_t ix = ox * g.sw - g.pw + kx;
            if (ix < 0 || ix >= g.w) continue;
            f(size_t(o), size_t((p * g.h + iy) * g.w + ix));
          }
        }
      }
}

// Index of the maximum of each window.
std::vector<size_t> max_pool_argmax(const PoolGeom& g, const HostTensor& x) {
  std::vector<size_t> arg(size_t(g.nc * g.oh * g.ow), SIZE_MAX);
  pool_visit(g, [&](size_t o, size_t i) {
    if (arg[o] == SIZE_MAX || x.data[i] > x.data[arg[o]]) arg[o] = i;
  });
  return arg;
}

HostTensor max_pool_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  const HostTensor& x = *in[0];
  std::vector<size_t> arg = max_pool_argmax(pool_geom(node.attrs.ints, x.shape), x);
  HostTensor y(node.shape);
  for (size_t o = 0; o < arg.size(); ++o) y.data[o] = x.data[arg[o]];
  return y;
}

HostTensor max_pool_grad_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  const HostTensor &x = *in[0], &dy = *in[1];
  std::vector<size_t> arg = max_pool_argmax(pool_geom(node.attrs.ints, x.shape), x);
  HostTensor dx(node.shape);
  for (size_t o = 0; o < arg.size(); ++o) dx.data[arg[o]] += dy.data[o];
  return dx;
}

// Padded cells count in the divisor (torch's count_include_pad=True default).
HostTensor avg_pool_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  const HostTensor& x = *in[0];
  PoolGeom g = pool_geom(node.attrs.ints, x.shape);
  const double inv = 1.0 / double(g.kh * g.kw);
  HostTensor y(node.shape);
  pool_visit(g, [&](size_t o, size_t i) { y.data[o] += x.data[i] * inv; });
  return y;
}

HostTensor avg_pool_grad_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  const HostTensor& dy = *in[0];
  PoolGeom g = pool_geom(node.attrs.ints, node.shape);
  const double inv = 1.0 / double(g.kh * g.kw);
  HostTensor dx(node.shape);
  pool_visit(g, [&](size_t o, size_t i) { dx.data[i] += dy.data[o] * inv; });
  return dx;
}

std::vector<NodeId> max_pool_vjp(VjpCtx& c) {
  if (!c.needs(0)) return {NodeId{}};
  return {c.g.make(Op::MaxPool2dGrad, {c.in(0), c.grad}, c.fwd.attrs, {})};
}

// The gradient of MaxPool2dGrad is zero in x almost everywhere; in dy it would need a "take at argmax" op
// that the IR does not have, so asking for it is an error rather than a silent zero.
std::vector<NodeId> max_pool_grad_vjp(VjpCtx& c) {
  if (c.needs(1))
    throw GraphError(
        "[max_pool2d_grad] expected no second-order gradient through max_pool2d, got a request for "
        "one at " +
        where(c.fwd.prov.loc));
  return {NodeId{}, NodeId{}};
}

std::vector<NodeId> avg_pool_vjp(VjpCtx& c) {
  if (!c.needs(0)) return {NodeId{}};
  auto ints = c.fwd.attrs.ints;
  const Shape x = c.in_shape(0);
  ints.insert(ints.end(), {x[2], x[3]});
  return {c.g.make(Op::AvgPool2dGrad, {c.grad}, with_ints(ints), {})};
}

// AvgPool2dGrad is the adjoint of avg_pool2d, so its gradient is avg_pool2d itself.
std::vector<NodeId> avg_pool_grad_vjp(VjpCtx& c) {
  if (!c.needs(0)) return {NodeId{}};
  return {c.g.make(Op::AvgPool2d, {c.grad}, with_ints(head(c.fwd.attrs.ints, 6)), {})};
}

// ------------------------------------------------------------------------------------------ upsample
TypeInfo upsample_shape(const ShapeCtx& c) {
  const Shape& x = c.shape(0);
  const auto& a = c.attrs.ints;
  if (a.size() != 1 || a[0] < 1) c.fail("one integer factor >= 1", ints_str(a));
  if (x.size() != 4) c.fail("x of rank 4 [N, C, H, W]", "x " + shape_str(x));
  return {{x[0], x[1], x[2] * a[0], x[3] * a[0]}, c.dtype(0)};
}

HostTensor upsample_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  const HostTensor& x = *in[0];
  const int64_t f = node.attrs.ints[0], h = x.shape[2], w = x.shape[3], nc = x.shape[0] * x.shape[1];
  HostTensor y(node.shape);
  for (int64_t p = 0; p < nc; ++p)
    for (int64_t oy = 0; oy < h * f; ++oy)
      for (int64_t ox = 0; ox < w * f; ++ox)
        y.data[size_t((p * h * f + oy) * w * f + ox)] = x.data[size_t((p * h + oy / f) * w + ox / f)];
  return y;
}

// Each input cell feeds an f x f block: view the gradient as [N, C, H, f, W, f] and sum the two f axes.
std::vector<NodeId> upsample_vjp(VjpCtx& c) {
  if (!c.needs(0)) return {NodeId{}};
  const Shape x = c.in_shape(0);
  const int64_t f = c.fwd.attrs.ints[0];
  NodeId r = c.g.reshape(c.grad, {x[0], x[1], x[2], f, x[3], f});
  return {c.g.sum(r, {3, 5})};
}

}  // namespace

void register_vision(OpTable& t) {
  t.add({Op::Conv2d, 2, conv2d_shape, conv2d_vjp, conv2d_ref, nullptr});
  t.add({Op::Conv2dGradInput, 2, conv2d_grad_input_shape, conv2d_grad_input_vjp, conv2d_grad_input_ref,
         nullptr});
  t.add({Op::Conv2dGradWeight, 2, conv2d_grad_weight_shape, conv2d_grad_weight_vjp, conv2d_grad_weight_ref,
         nullptr});
  t.add({Op::MaxPool2d, 1, pool_shape, max_pool_vjp, max_pool_ref, nullptr});
  t.add({Op::MaxPool2dGrad, 2, max_pool_grad_shape, max_pool_grad_vjp, max_pool_grad_ref, nullptr});
  t.add({Op::AvgPool2d, 1, pool_shape, avg_pool_vjp, avg_pool_ref, nullptr});
  t.add({Op::AvgPool2dGrad, 1, avg_pool_grad_shape, avg_pool_grad_vjp, avg_pool_grad_ref, nullptr});
  t.add({Op::UpsampleNearest, 1, upsample_shape, upsample_vjp, upsample_ref, nullptr});
}

}  // namespace meganeura::ops
