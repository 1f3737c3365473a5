// The NNEF primitives lowered to IR ops, one row each, and the standard's fragment declarations (the
// compound fragments with their bodies, expanded by the evaluator like a file's own fragments).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "meganeura/core/error.hpp"
#include "meganeura/nnef/lower.hpp"

namespace meganeura::nnef {

// Declarations after the NNEF 1.0 specification (chapter 4); a primitive without a row in primitives() is
// reported as unsupported when a graph uses it. Compound fragments carry their definition.
const char* standard_fragments() {
  return R"NNEF(
fragment external<? = scalar>( shape: integer[] ) -> ( output: tensor<?> );
fragment variable<? = scalar>( shape: integer[], label: string ) -> ( output: tensor<?> );
fragment constant<? = scalar>( shape: integer[], value: ?[] ) -> ( output: tensor<?> );

fragment copy<?>( x: tensor<?> ) -> ( y: tensor<?> );
fragment neg( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment rcp( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment exp( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment log( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment sin( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment cos( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment abs( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment sign( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment not( x: tensor<logical> ) -> ( y: tensor<logical> );
fragment floor( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment ceil( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment round( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment sqr( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment sqrt( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment rsqr( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment rsqrt( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment log2( x: tensor<scalar> ) -> ( y: tensor<scalar> );

fragment add( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<scalar> );
fragment sub( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<scalar> );
fragment mul( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<scalar> );
fragment div( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<scalar> );
fragment pow( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<scalar> );
fragment lt( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<logical> );
fragment gt( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<logical> );
fragment le( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<logical> );
fragment ge( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<logical> );
fragment eq( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<logical> );
fragment ne( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<logical> );
fragment and( x: tensor<logical>, y: tensor<logical> ) -> ( z: tensor<logical> );
fragment or( x: tensor<logical>, y: tensor<logical> ) -> ( z: tensor<logical> );
fragment min( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<scalar> );
fragment max( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<scalar> );
fragment select<?>( condition: tensor<logical>, true_value: tensor<?>, false_value: tensor<?> )
    -> ( output: tensor<?> );
fragment clamp( x: tensor<scalar>, a: tensor<scalar>, b: tensor<scalar> ) -> ( y: tensor<scalar> );

fragment sum_reduce( input: tensor<scalar>, axes: integer[], normalize: logical = false )
    -> ( output: tensor<scalar> );
fragment max_reduce( input: tensor<scalar>, axes: integer[] ) -> ( output: tensor<scalar> );
fragment min_reduce( input: tensor<scalar>, axes: integer[] ) -> ( output: tensor<scalar> );
fragment mean_reduce( input: tensor<scalar>, axes: integer[] ) -> ( output: tensor<scalar> );
fragment argmax_reduce( input: tensor<scalar>, axes: integer[] ) -> ( output: tensor<integer> );
fragment argmin_reduce( input: tensor<scalar>, axes: integer[] ) -> ( output: tensor<integer> );
fragment any_reduce( input: tensor<logical>, axes: integer[] ) -> ( output: tensor<logical> );
fragment all_reduce( input: tensor<logical>, axes: integer[] ) -> ( output: tensor<logical> );
fragment moments( input: tensor<scalar>, axes: integer[] ) -> ( mean: tensor<scalar>, variance: tensor<scalar> )
{
    mean = mean_reduce(input, axes = axes);
    variance = mean_reduce(sqr(sub(input, mean)), axes = axes);
}

fragment reshape<?>( input: tensor<?>, shape: integer[], axis_start: integer = 0, axis_count: integer = -1 )
    -> ( output: tensor<?> );
fragment squeeze<?>( input: tensor<?>, axes: integer[] ) -> ( output: tensor<?> );
fragment unsqueeze<?>( input: tensor<?>, axes: integer[] ) -> ( output: tensor<?> );
fragment transpose<?>( input: tensor<?>, axes: integer[] ) -> ( output: tensor<?> );
fragment split<?>( value: tensor<?>, axis: integer, ratios: integer[] ) -> ( values: tensor<?>[] );
fragment concat<?>( values: tensor<?>[], axis: integer ) -> ( value: tensor<?> );
fragment stack<?>( values: tensor<?>[], axis: integer ) -> ( value: tensor<?> );
fragment unstack<?>( value: tensor<?>, axis: integer ) -> ( values: tensor<?>[] );
fragment slice<?>( input: tensor<?>, axes: integer[], begin: integer[], end: integer[], stride: integer[] = [] )
    -> ( output: tensor<?> );
fragment pad( input: tensor<scalar>, padding: (integer, integer)[], border: string = 'constant',
    value: scalar = 0.0 ) -> ( output: tensor<scalar> );
fragment tile<?>( input: tensor<?>, repeats: integer[] ) -> ( output: tensor<?> );

fragment matmul( A: tensor<scalar>, B: tensor<scalar>, transposeA: logical = false, transposeB: logical = false )
    -> ( C: tensor<scalar> );
fragment linear( input: tensor<scalar>, filter: tensor<scalar>, bias: tensor<scalar> = 0.0 )
    -> ( output: tensor<scalar> )
{
    output = add(matmul(input, filter, transposeB = true), bias);
}
fragment conv( input: tensor<scalar>, filter: tensor<scalar>, bias: tensor<scalar> = 0.0,
    border: string = 'constant', padding: (integer,integer)[] = [], stride: integer[] = [],
    dilation: integer[] = [], groups: integer = 1 ) -> ( output: tensor<scalar> );
fragment deconv( input: tensor<scalar>, filter: tensor<scalar>, bias: tensor<scalar> = 0.0,
    border: string = 'constant', padding: (integer,integer)[] = [], stride: integer[] = [],
    dilation: integer[] = [], output_shape: integer[] = [], groups: integer = 1 ) -> ( output: tensor<scalar> );
fragment separable_conv( input: tensor<scalar>, plane_filter: tensor<scalar>, point_filter: tensor<scalar>,
    bias: tensor<scalar> = 0.0, border: string = 'constant', padding: (integer,integer)[] = [],
    stride: integer[] = [], dilation: integer[] = [], groups: integer = 1 ) -> ( output: tensor<scalar> )
{
    filtered = conv(input, plane_filter, border = border, padding = padding, stride = stride,
                    dilation = dilation, groups = 0);
    output = conv(filtered, point_filter, bias, groups = groups);
}
fragment max_pool( input: tensor<scalar>, size: integer[], border: string = 'constant',
    padding: (integer,integer)[] = [], stride: integer[] = [], dilation: integer[] = [] )
    -> ( output: tensor<scalar> );
fragment avg_pool( input: tensor<scalar>, size: integer[], border: string = 'constant',
    padding: (integer,integer)[] = [], stride: integer[] = [], dilation: integer[] = [] )
    -> ( output: tensor<scalar> );
fragment box( input: tensor<scalar>, size: integer[], border: string = 'constant',
    padding: (integer,integer)[] = [], stride: integer[] = [], dilation: integer[] = [],
    normalize: logical = false ) -> ( output: tensor<scalar> );

fragment relu( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment sigmoid( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment tanh( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment softplus( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment gelu( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment silu( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment elu( x: tensor<scalar>, alpha: scalar = 1.0 ) -> ( y: tensor<scalar> );
fragment leaky_relu( x: tensor<scalar>, alpha: scalar ) -> ( y: tensor<scalar> );
fragment prelu( x: tensor<scalar>, alpha: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = select(x < 0.0, alpha * x, x);
}
fragment softmax( x: tensor<scalar>, axes: integer[] = [1] ) -> ( y: tensor<scalar> );

fragment batch_normalization( input: tensor<scalar>, mean: tensor<scalar>, variance: tensor<scalar>,
    offset: tensor<scalar>, scale: tensor<scalar>, epsilon: scalar ) -> ( output: tensor<scalar> )
{
    output = offset + scale * (input - mean) / sqrt(variance + epsilon);
}
fragment l2_normalization( input: tensor<scalar>, axes: integer[], bias: scalar = 0.0, epsilon: scalar = 0.0 )
    -> ( output: tensor<scalar> )
{
    sigma = sqrt(bias + sum_reduce(sqr(input), axes = axes));
    output = input / max(sigma, epsilon);
}
)NNEF";
}

Shape checked_shape(const std::vector<int64_t>& dims, const std::string& what) {
  Shape s;
  double total = 1;
  for (int64_t d : dims) {
    if (d < 0 || d >= (int64_t(1) << 31))
      throw Unsupported{"expected " + what + " extents in [0, 2^31), got " + std::to_string(d)};
    total *= double(d);
    s.push_back(d);
  }
  if (total >= double(int64_t(1) << 40)) throw Unsupported{"expected " + what + " of fewer than 2^40 items"};
  return s;
}

std::pair<NodeId, NodeId> align(Graph& g, NodeId a, NodeId b) {
  Shape sa = g.node(a).shape, sb = g.node(b).shape;
  if (!sa.empty() && !sb.empty() && sa.size() != sb.size()) {
    if (sa.size() < sb.size()) {
      sa.resize(sb.size(), 1);
      a = g.reshape(a, sa);
    } else {
      sb.resize(sa.size(), 1);
      b = g.reshape(b, sb);
    }
  }
  return {a, b};
}

// ---- argument access ----

const Val& Args::at(const std::string& name) const {
  auto it = v.find(name);
  if (it == v.end()) throw Unsupported{"expected argument '" + name + "'"};
  return it->second;
}
NodeId Args::tensor(const std::string& name) const {
  const Val& x = at(name);
  if (x.k == Val::K::Tensor) return x.node;
  if (x.numeric()) return g.scalar(x.num);
  if (x.k == Val::K::Bool) return g.scalar(x.b ? 1.0 : 0.0);
  throw Unsupported{"expected a tensor for '" + name + "'"};
}
std::vector<NodeId> Args::tensors(const std::string& name) const {
  const Val& x = at(name);
  if (x.k != Val::K::Array) throw Unsupported{"expected an array of tensors for '" + name + "'"};
  std::vector<NodeId> r;
  for (const Val& i : x.items) {
    if (i.k != Val::K::Tensor) throw Unsupported{"expected an array of tensors for '" + name + "'"};
    r.push_back(i.node);
  }
  if (r.empty()) throw Unsupported{"expected at least one tensor in '" + name + "'"};
  return r;
}
int64_t Args::integer(const std::string& name) const {
  const Val& x = at(name);
  if (x.k != Val::K::Int) throw Unsupported{"expected an integer for '" + name + "'"};
  return int64_t(x.num);
}
double Args::real(const std::string& name) const {
  const Val& x = at(name);
  if (!x.numeric()) throw Unsupported{"expected a number for '" + name + "'"};
  return x.num;
}
bool Args::logical(const std::string& name) const {
  const Val& x = at(name);
  if (x.k != Val::K::Bool) throw Unsupported{"expected a logical for '" + name + "'"};
  return x.b;
}
std::string Args::str(const std::string& name) const {
  const Val& x = at(name);
  if (x.k != Val::K::Str) throw Unsupported{"expected a string for '" + name + "'"};
  return x.s;
}
std::vector<int64_t> Args::ints(const std::string& name) const {
  const Val& x = at(name);
  if (x.k != Val::K::Array) throw Unsupported{"expected an integer array for '" + name + "'"};
  std::vector<int64_t> r;
  for (const Val& i : x.items) {
    if (i.k != Val::K::Int) throw Unsupported{"expected an integer array for '" + name + "'"};
    r.push_back(int64_t(i.num));
  }
  return r;
}
std::vector<std::pair<int64_t, int64_t>> Args::pairs(const std::string& name) const {
  const Val& x = at(name);
  if (x.k != Val::K::Array) throw Unsupported{"expected an array of (integer, integer) for '" + name + "'"};
  std::vector<std::pair<int64_t, int64_t>> r;
  for (const Val& i : x.items) {
    if (i.k != Val::K::Tuple || i.items.size() != 2 || i.items[0].k != Val::K::Int ||
        i.items[1].k != Val::K::Int)
      throw Unsupported{"expected an array of (integer, integer) for '" + name + "'"};
    r.emplace_back(int64_t(i.items[0].num), int64_t(i.items[1].num));
  }
  return r;
}

namespace {

Val T(NodeId n) { return Val::tensor(n); }

int64_t axis_of(const Args& a, int64_t ax, size_t rank) {
  if (ax < 0 || ax >= int64_t(rank))
    a.unsupported("expected an axis in [0, " + std::to_string(rank) + "), got " + std::to_string(ax));
  return ax;
}

std::vector<int64_t> axes_of(const Args& a, const std::string& name, size_t rank) {
  std::vector<int64_t> r = a.ints(name);
  for (int64_t& x : r) x = axis_of(a, x, rank);
  std::sort(r.begin(), r.end());
  if (std::adjacent_find(r.begin(), r.end()) != r.end())
    a.unsupported("expected distinct axes in '" + name + "'");
  return r;
}

OpFn unary(NodeId (*fn)(Graph&, NodeId)) {
  return [fn](Args& a) { return T(fn(a.g, a.tensor("x"))); };
}

OpFn binary(NodeId (Graph::*fn)(NodeId, NodeId, Graph::Loc)) {
  return [fn](Args& a) {
    auto [x, y] = align(a.g, a.tensor("x"), a.tensor("y"));
    return T((a.g.*fn)(x, y, Graph::Loc::current()));
  };
}

// Window parameters of a pooling or convolution over a rank-r input, in NNEF's convention: `size`, `stride`,
// `dilation` and `padding` cover every axis (or only the spatial ones for conv); empty means 1s, and empty
// padding means the "same" padding of the spec (output = ceil(input / stride), the excess split with the
// smaller half in front).
struct Window {
  std::vector<int64_t> size, stride, dilation;
  std::vector<std::pair<int64_t, int64_t>> padding;
};

Window window(const Args& a, const Shape& in, std::vector<int64_t> size, size_t first) {
  Window w;
  const size_t n = in.size() - first;
  w.size = size;
  w.stride = a.ints("stride");
  w.dilation = a.ints("dilation");
  w.padding = a.pairs("padding");
  if (w.stride.empty()) w.stride.assign(n, 1);
  if (w.dilation.empty()) w.dilation.assign(n, 1);
  if (w.size.size() != n || w.stride.size() != n || w.dilation.size() != n)
    a.unsupported("expected size, stride and dilation of " + std::to_string(n) + " values");
  for (size_t i = 0; i < n; ++i)
    if (w.size[i] < 1 || w.stride[i] < 1 || w.dilation[i] < 1 || w.size[i] > (1 << 20) ||
        w.stride[i] > (1 << 20) || w.dilation[i] > (1 << 20))
      a.unsupported("expected positive window sizes, strides and dilations below 2^20");
  if (w.padding.empty()) {
    for (size_t i = 0; i < n; ++i) {
      const int64_t x = in[first + i], s = w.stride[i];
      const int64_t out = (x + s - 1) / s, k = (w.size[i] - 1) * w.dilation[i] + 1;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + k - x);
      w.padding.emplace_back(total / 2, total - total / 2);
    }
  }
  if (w.padding.size() != n) a.unsupported("expected padding of " + std::to_string(n) + " pairs");
  for (const auto& [b, e] : w.padding)
    if (b < 0 || e < 0 || b > (1 << 20) || e > (1 << 20)) a.unsupported("expected padding in [0, 2^20)");
  return w;
}

Val conv(Args& a) {
  Graph& g = a.g;
  NodeId x = a.tensor("input"), f = a.tensor("filter");
  const Shape xs = g.node(x).shape, fs = g.node(f).shape;
  if (xs.size() != 4 || fs.size() != 4)
    a.unsupported("expected a 2-D convolution (input and filter of rank 4), got input rank " +
                  std::to_string(xs.size()));
  const std::string border = a.str("border");
  if (border != "constant" && border != "ignore")  // zero padding: 'ignore' contributes nothing to the sum
    a.unsupported("expected border 'constant' or 'ignore', got '" + border + "'");
  Window w = window(a, xs, {fs[2], fs[3]}, 2);
  int64_t groups = a.integer("groups");
  if (groups == 0) groups = xs[1];  // depthwise
  if (groups < 1) a.unsupported("expected groups >= 0");
  if (w.padding[0].first != w.padding[0].second || w.padding[1].first != w.padding[1].second)
    x = g.pad(x, {0, 0, w.padding[0].first, w.padding[1].first},
              {0, 0, w.padding[0].second, w.padding[1].second});
  const std::vector<int64_t> sym =
      w.padding[0].first == w.padding[0].second && w.padding[1].first == w.padding[1].second
          ? std::vector<int64_t>{w.padding[0].first, w.padding[1].first}
          : std::vector<int64_t>{0, 0};
  NodeId y = g.conv2d(x, f, w.stride, sym, w.dilation, groups);
  if (!(a.is_literal("bias") && a.real("bias") == 0.0)) {
    auto [yy, b] = align(g, y, a.tensor("bias"));
    y = g.add(yy, b);
  }
  return T(y);
}

Val pool(Args& a, bool max) {
  Graph& g = a.g;
  NodeId x = a.tensor("input");
  const Shape xs = g.node(x).shape;
  Window w = window(a, xs, a.ints("size"), 0);
  if (xs.size() != 4)
    a.unsupported("expected a rank-4 input (N, C, H, W), got rank " + std::to_string(xs.size()));
  for (size_t i = 0; i < 2; ++i)
    if (w.size[i] != 1 || w.stride[i] != 1 || w.padding[i].first || w.padding[i].second)
      a.unsupported(
          "expected a window over the spatial axes only (size, stride 1 and no padding on N and C)");
  for (int64_t d : w.dilation)
    if (d != 1) a.unsupported("expected dilation 1");
  const std::string border = a.str("border");
  if (border != "constant" && border != "ignore")
    a.unsupported("expected border 'constant' or 'ignore', got '" + border + "'");
  const std::vector<int64_t> k{w.size[2], w.size[3]}, s{w.stride[2], w.stride[3]};
  const auto& ph = w.padding[2];
  const auto& pw = w.padding[3];
  const bool padded = ph.first || ph.second || pw.first || pw.second;
  if (max) {
    // 'ignore': padded cells never win; 'constant': they hold 0
    const double fill = border == "ignore" ? -std::numeric_limits<float>::max() : 0.0;
    if (padded) x = g.pad(x, {0, 0, ph.first, pw.first}, {0, 0, ph.second, pw.second}, fill);
    return T(g.max_pool2d(x, k, s, {0, 0}));
  }
  if (padded) x = g.pad(x, {0, 0, ph.first, pw.first}, {0, 0, ph.second, pw.second}, 0.0);
  NodeId y = g.avg_pool2d(x, k, s, {0, 0});
  if (!padded || border == "constant") return T(y);
  // 'ignore': the mean over the cells inside the input only
  const Shape ys = g.node(y).shape;
  if (ys[2] * ys[3] > (int64_t(1) << 24))
    a.unsupported("expected at most 2^24 output cells for border 'ignore'");
  std::vector<float> scale(size_t(ys[2] * ys[3]));
  for (int64_t oh = 0; oh < ys[2]; ++oh)
    for (int64_t ow = 0; ow < ys[3]; ++ow) {
      auto inside = [](int64_t start, int64_t size, int64_t extent) {
        return std::max<int64_t>(0, std::min(start + size, extent) - std::max<int64_t>(start, 0));
      };
      const int64_t count =
          inside(oh * s[0] - ph.first, k[0], xs[2]) * inside(ow * s[1] - pw.first, k[1], xs[3]);
      scale[size_t(oh * ys[3] + ow)] = count ? float(double(k[0] * k[1]) / double(count)) : 0.0f;
    }
  return T(g.mul(y, g.constant(scale, {ys[2], ys[3]})));
}

Val reduce(Args& a, int kind) {
  Graph& g = a.g;
  NodeId x = a.tensor("input");
  const std::vector<int64_t> axes = axes_of(a, "axes", g.node(x).shape.size());
  if (axes.empty()) return T(x);
  switch (kind) {
    case 0: return T(a.logical("normalize") ? g.mean(x, axes, true) : g.sum(x, axes, true));
    case 1: return T(g.max(x, axes, true));
    case 2: return T(g.min(x, axes, true));
    default: return T(g.mean(x, axes, true));
  }
}

Val reshape(Args& a) {
  Graph& g = a.g;
  NodeId x = a.tensor("input");
  const Shape xs = g.node(x).shape;
  const int64_t rank = int64_t(xs.size());
  const int64_t start = a.integer("axis_start");
  int64_t count = a.integer("axis_count");
  if (start < 0 || start > rank) a.unsupported("expected axis_start in [0, rank]");
  if (count == -1) count = rank - start;
  if (count < 0 || start + count > rank) a.unsupported("expected axis_count within the rank");
  std::vector<int64_t> shape = a.ints("shape");
  int64_t known = 1, infer = -1, whole = 1;
  for (int64_t i = start; i < start + count; ++i) whole *= xs[size_t(i)];
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) {
      if (start + int64_t(i) >= rank) a.unsupported("expected 0 (copy) only where the input has an axis");
      shape[i] = xs[size_t(start) + i];
    }
    if (shape[i] == -1) {
      if (infer >= 0) a.unsupported("expected at most one -1 in shape");
      infer = int64_t(i);
    } else if (shape[i] < 0 || shape[i] >= (int64_t(1) << 31)) {
      a.unsupported("expected extents in [-1, 2^31)");
    } else {
      if (double(known) * double(shape[i]) >= double(int64_t(1) << 40))
        a.unsupported("expected fewer than 2^40 items");
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || whole % known) a.unsupported("expected a shape whose -1 divides the input");
    shape[size_t(infer)] = whole / known;
  }
  std::vector<int64_t> full(xs.begin(), xs.begin() + start);
  full.insert(full.end(), shape.begin(), shape.end());
  full.insert(full.end(), xs.begin() + start + count, xs.end());
  return T(g.reshape(x, checked_shape(full, "reshape's")));
}

Val squeeze(Args& a, bool un) {
  Graph& g = a.g;
  NodeId x = a.tensor("input");
  Shape s = g.node(x).shape;
  std::vector<int64_t> axes = a.ints("axes");
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) a.unsupported("expected distinct axes");
  if (un) {
    for (int64_t ax : axes) {
      if (ax < 0 || ax > int64_t(s.size())) a.unsupported("expected axes within the output's rank");
      s.insert(s.begin() + ax, 1);
    }
  } else {
    for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
      const int64_t ax = axis_of(a, *it, s.size());
      if (s[size_t(ax)] != 1) a.unsupported("expected squeezed axes of extent 1");
      s.erase(s.begin() + ax);
    }
  }
  return T(g.reshape(x, s));
}

Val transpose(Args& a) {
  Graph& g = a.g;
  NodeId x = a.tensor("input");
  const size_t rank = g.node(x).shape.size();
  std::vector<int64_t> perm = a.ints("axes");
  if (perm.size() > rank) a.unsupported("expected at most as many axes as the input's rank");
  for (size_t i = perm.size(); i < rank; ++i) perm.push_back(int64_t(i));
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < rank; ++i)
    if (sorted[i] != int64_t(i)) a.unsupported("expected a permutation in 'axes'");
  return T(g.permute(x, perm));
}

Val split(Args& a) {
  Graph& g = a.g;
  NodeId x = a.tensor("value");
  const Shape s = g.node(x).shape;
  const int64_t ax = axis_of(a, a.integer("axis"), s.size());
  const std::vector<int64_t> ratios = a.ints("ratios");
  int64_t total = 0;
  for (int64_t r : ratios) {
    if (r < 1 || r > (1 << 30)) a.unsupported("expected positive ratios");
    total += r;
  }
  if (ratios.empty() || s[size_t(ax)] % total) a.unsupported("expected ratios that divide the axis");
  const int64_t unit = s[size_t(ax)] / total;
  std::vector<Val> out;
  int64_t at = 0;
  for (int64_t r : ratios) {
    out.push_back(T(g.slice(x, ax, at, at + r * unit)));
    at += r * unit;
  }
  return Val::list(Val::K::Array, std::move(out));
}

Val concat(Args& a, bool stack) {
  Graph& g = a.g;
  std::vector<NodeId> xs = a.tensors("values");
  const size_t rank = g.node(xs[0]).shape.size() + (stack ? 1 : 0);
  const int64_t ax = axis_of(a, a.integer("axis"), rank);
  if (stack)
    for (NodeId& x : xs) x = g.unsqueeze(x, ax);
  return T(xs.size() == 1 ? xs[0] : g.concat(xs, ax));
}

Val unstack(Args& a) {
  Graph& g = a.g;
  NodeId x = a.tensor("value");
  const Shape s = g.node(x).shape;
  const int64_t ax = axis_of(a, a.integer("axis"), s.size());
  if (s[size_t(ax)] > 4096) a.unsupported("expected at most 4096 slices");
  std::vector<Val> out;
  for (int64_t i = 0; i < s[size_t(ax)]; ++i) out.push_back(T(g.squeeze(g.slice(x, ax, i, i + 1), ax)));
  return Val::list(Val::K::Array, std::move(out));
}

Val slice(Args& a) {
  Graph& g = a.g;
  NodeId x = a.tensor("input");
  const Shape s = g.node(x).shape;
  const std::vector<int64_t> axes = a.ints("axes"), begin = a.ints("begin"), end = a.ints("end");
  std::vector<int64_t> stride = a.ints("stride");
  if (stride.empty()) stride.assign(axes.size(), 1);
  if (begin.size() != axes.size() || end.size() != axes.size() || stride.size() != axes.size())
    a.unsupported("expected begin, end and stride of one value per axis");
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t ax = axis_of(a, axes[i], s.size()), n = s[size_t(ax)];
    if (stride[i] != 1) a.unsupported("expected stride 1");
    // negative positions count from the end; an end of 0 means the extent (NNEF 1.0.1)
    int64_t b = begin[i] < 0 ? begin[i] + n : begin[i];
    int64_t e = end[i] <= 0 ? end[i] + n : end[i];
    b = std::clamp<int64_t>(b, 0, n);
    e = std::clamp<int64_t>(e, 0, n);
    if (e <= b) a.unsupported("expected a non-empty slice");
    x = g.slice(x, ax, b, e);
  }
  return T(x);
}

Val pad(Args& a) {
  Graph& g = a.g;
  NodeId x = a.tensor("input");
  const size_t rank = g.node(x).shape.size();
  if (a.str("border") != "constant")
    a.unsupported("expected border 'constant', got '" + a.str("border") + "'");
  const auto p = a.pairs("padding");
  if (p.size() > rank) a.unsupported("expected at most one padding pair per axis");
  std::vector<int64_t> before(rank, 0), after(rank, 0);
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i].first < 0 || p[i].second < 0 || p[i].first > (1 << 20) || p[i].second > (1 << 20))
      a.unsupported("expected padding in [0, 2^20)");
    before[i] = p[i].first;
    after[i] = p[i].second;
  }
  return T(g.pad(x, before, after, a.real("value")));
}

Val tile(Args& a) {
  Graph& g = a.g;
  NodeId x = a.tensor("input");
  const std::vector<int64_t> reps = a.ints("repeats");
  if (reps.size() != g.node(x).shape.size()) a.unsupported("expected one repeat count per axis");
  double total = double(numel(g.node(x).shape));
  for (int64_t r : reps) total *= double(r);
  if (total >= double(int64_t(1) << 40)) a.unsupported("expected a result of fewer than 2^40 items");
  for (size_t ax = 0; ax < reps.size(); ++ax) {
    if (reps[ax] < 1 || reps[ax] > 1024) a.unsupported("expected repeat counts in [1, 1024]");
    if (reps[ax] > 1) x = g.concat(std::vector<NodeId>(size_t(reps[ax]), x), int64_t(ax));
  }
  return T(x);
}

Val softmax(Args& a) {
  Graph& g = a.g;
  NodeId x = a.tensor("x");
  const std::vector<int64_t> axes = axes_of(a, "axes", g.node(x).shape.size());
  if (axes.empty()) return T(g.fill(1.0, g.node(x).shape));
  if (axes.size() == 1) return T(g.softmax(x, axes[0]));
  NodeId e = g.exp(g.sub(x, g.max(x, axes, true)));
  return T(g.div(e, g.sum(e, axes, true)));
}

Val matmul(Args& a) {
  Graph& g = a.g;
  NodeId x = a.tensor("A"), y = a.tensor("B");
  if (g.node(x).shape.size() < 2 || g.node(y).shape.size() < 2)
    a.unsupported("expected operands of rank >= 2");
  return T(g.matmul(x, y, a.logical("transposeA"), a.logical("transposeB")));
}

Val clamp(Args& a) {
  Graph& g = a.g;
  if (a.is_literal("a") && a.is_literal("b")) return T(g.clamp(a.tensor("x"), a.real("a"), a.real("b")));
  auto [x, hi] = align(g, a.tensor("x"), a.tensor("b"));
  NodeId y = g.minimum(x, hi);
  auto [yy, lo] = align(g, y, a.tensor("a"));
  return T(g.maximum(yy, lo));
}

Val select(Args& a) {
  Graph& g = a.g;
  auto [c, t] = align(g, a.tensor("condition"), a.tensor("true_value"));
  auto [c2, f] = align(g, c, a.tensor("false_value"));
  auto [t2, f2] = align(g, t, f);
  return T(g.where(c2, t2, f2));
}

}  // namespace

const std::map<std::string, OpFn>& primitives() {
  static const std::map<std::string, OpFn> table = [] {
    std::map<std::string, OpFn> t;
    t["copy"] = [](Args& a) { return T(a.g.reshape(a.tensor("x"), a.g.node(a.tensor("x")).shape)); };
    t["neg"] = unary([](Graph& g, NodeId x) { return g.neg(x); });
    t["rcp"] = unary([](Graph& g, NodeId x) { return g.reciprocal(x); });
    t["exp"] = unary([](Graph& g, NodeId x) { return g.exp(x); });
    t["log"] = unary([](Graph& g, NodeId x) { return g.log(x); });
    t["sin"] = unary([](Graph& g, NodeId x) { return g.sin(x); });
    t["cos"] = unary([](Graph& g, NodeId x) { return g.cos(x); });
    t["abs"] = unary([](Graph& g, NodeId x) { return g.abs(x); });
    t["sign"] = unary([](Graph& g, NodeId x) { return g.sign(x); });
    t["sqr"] = unary([](Graph& g, NodeId x) { return g.square(x); });
    t["sqrt"] = unary([](Graph& g, NodeId x) { return g.sqrt(x); });
    t["rsqr"] = unary([](Graph& g, NodeId x) { return g.reciprocal(g.square(x)); });
    t["rsqrt"] = unary([](Graph& g, NodeId x) { return g.rsqrt(x); });
    t["log2"] = unary([](Graph& g, NodeId x) { return g.mul(g.log(x), g.scalar(1.0 / std::log(2.0))); });
    t["relu"] = unary([](Graph& g, NodeId x) { return g.relu(x); });
    t["sigmoid"] = unary([](Graph& g, NodeId x) { return g.sigmoid(x); });
    t["tanh"] = unary([](Graph& g, NodeId x) { return g.tanh(x); });
    t["softplus"] = unary([](Graph& g, NodeId x) { return g.softplus(x); });
    t["gelu"] = unary([](Graph& g, NodeId x) { return g.gelu(x); });
    t["silu"] = unary([](Graph& g, NodeId x) { return g.silu(x); });
    t["elu"] = [](Args& a) { return T(a.g.elu(a.tensor("x"), a.real("alpha"))); };
    t["leaky_relu"] = [](Args& a) { return T(a.g.leaky_relu(a.tensor("x"), a.real("alpha"))); };
    t["add"] = binary(&Graph::add);
    t["sub"] = binary(&Graph::sub);
    t["mul"] = binary(&Graph::mul);
    t["div"] = binary(&Graph::div);
    t["pow"] = binary(&Graph::pow);
    t["min"] = binary(&Graph::minimum);
    t["max"] = binary(&Graph::maximum);
    t["lt"] = binary(&Graph::lt);
    t["gt"] = binary(&Graph::gt);
    t["le"] = binary(&Graph::le);
    t["ge"] = binary(&Graph::ge);
    t["eq"] = binary(&Graph::eq);
    t["ne"] = binary(&Graph::ne);
    t["select"] = select;
    t["clamp"] = clamp;
    t["sum_reduce"] = [](Args& a) { return reduce(a, 0); };
    t["max_reduce"] = [](Args& a) { return reduce(a, 1); };
    t["min_reduce"] = [](Args& a) { return reduce(a, 2); };
    t["mean_reduce"] = [](Args& a) { return reduce(a, 3); };
    t["reshape"] = reshape;
    t["squeeze"] = [](Args& a) { return squeeze(a, false); };
    t["unsqueeze"] = [](Args& a) { return squeeze(a, true); };
    t["transpose"] = transpose;
    t["split"] = split;
    t["concat"] = [](Args& a) { return concat(a, false); };
    t["stack"] = [](Args& a) { return concat(a, true); };
    t["unstack"] = unstack;
    t["slice"] = slice;
    t["pad"] = pad;
    t["tile"] = tile;
    t["matmul"] = matmul;
    t["conv"] = conv;
    t["max_pool"] = [](Args& a) { return pool(a, true); };
    t["avg_pool"] = [](Args& a) { return pool(a, false); };
    t["softmax"] = softmax;
    return t;
  }();
  return table;
}

}  // namespace meganeura::nnef
