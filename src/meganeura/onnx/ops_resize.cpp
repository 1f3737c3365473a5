// Resize (and Upsample) as separable resampling: for each resized axis the source positions and weights of
// every output position are computed at load time (nearest: 1 tap, linear: 2, cubic: 4) and applied as
// gathers along that axis times constant weights, so every coordinate transformation and rounding mode of
// the spec is plain host arithmetic.
#include <cmath>

#include "meganeura/onnx/lower.hpp"
#include "meganeura/onnx/tensor.hpp"

namespace meganeura::onnx {
namespace {

double cubic_weight(double s, double a) {
  s = std::fabs(s);
  if (s <= 1) return ((a + 2) * s - (a + 3)) * s * s + 1;
  if (s < 2) return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a;
  return 0;
}

NodeId resample_axis(Lowering& L, NodeId x, int64_t axis, int64_t out, double scale, const std::string& mode,
                     const std::string& transform, const std::string& nearest, double cubic_a,
                     bool exclude_outside) {
  const Shape xs = L.g.node(x).shape;
  const int64_t in = xs[size_t(axis)];
  const size_t taps = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
  std::vector<HostTensor> index(taps, HostTensor(Shape{out})), weight(taps, HostTensor(Shape{out}));
  for (int64_t o = 0; o < out; ++o) {
    double src;
    if (transform == "half_pixel")
      src = (double(o) + 0.5) / scale - 0.5;
    else if (transform == "pytorch_half_pixel")
      src = out > 1 ? (double(o) + 0.5) / scale - 0.5 : 0.0;
    else if (transform == "align_corners") {
      const double resized = double(in) * scale;  // the unrounded length, as the reference divides by
      src = resized <= 1 ? 0.0 : double(o) * double(in - 1) / (resized - 1);
    } else if (transform == "asymmetric")
      src = double(o) / scale;
    else if (transform == "half_pixel_symmetric") {
      const double adjustment = double(out) / (scale * double(in));
      const double center = double(in) / 2, offset = center * (1 - adjustment);
      src = offset + (double(o) + 0.5) / scale - 0.5;
    } else {
      L.unsupported("coordinate_transformation_mode",
                    "expected half_pixel, pytorch_half_pixel, align_corners, "
                    "asymmetric or half_pixel_symmetric, got " +
                        transform);
    }
    auto clampi = [&](int64_t i) { return std::max<int64_t>(0, std::min(in - 1, i)); };
    if (taps == 1) {
      double r;
      if (nearest == "round_prefer_floor")
        r = (src - std::floor(src) == 0.5) ? std::floor(src) : std::round(src);
      else if (nearest == "round_prefer_ceil")
        r = (src - std::floor(src) == 0.5) ? std::ceil(src) : std::round(src);
      else if (nearest == "floor")
        r = std::floor(src);
      else if (nearest == "ceil")
        r = std::ceil(src);
      else
        L.unsupported("nearest_mode",
                      "expected round_prefer_floor, round_prefer_ceil, floor or ceil, got " + nearest);
      index[0].data[size_t(o)] = double(clampi(int64_t(r)));
      weight[0].data[size_t(o)] = 1;
    } else if (taps == 2) {
      const double c = std::max(0.0, std::min(double(in - 1), src));
      const int64_t i0 = int64_t(std::floor(c)), i1 = std::min(in - 1, i0 + 1);
      const double t = c - double(i0);
      index[0].data[size_t(o)] = double(i0), weight[0].data[size_t(o)] = 1 - t;
      index[1].data[size_t(o)] = double(i1), weight[1].data[size_t(o)] = t;
    } else {
      const int64_t base = int64_t(std::floor(src));
      const double t = src - double(base);
      double sum = 0;
      for (size_t k = 0; k < 4; ++k) {
        const int64_t i = base - 1 + int64_t(k);
        double w = cubic_weight(t - (double(k) - 1), cubic_a);
        if (exclude_outside && (i < 0 || i >= in)) w = 0;
        index[k].data[size_t(o)] = double(clampi(i));
        weight[k].data[size_t(o)] = w;
        sum += w;
      }
      if (exclude_outside && sum != 0)
        for (size_t k = 0; k < 4; ++k) weight[k].data[size_t(o)] /= sum;
    }
  }
  Shape ws(xs.size(), 1);
  ws[size_t(axis)] = out;
  std::optional<NodeId> y;
  for (size_t k = 0; k < taps; ++k) {
    NodeId part = L.take(x, axis, index[k]);
    bool ones = true;
    for (double w : weight[k].data) ones = ones && w == 1;
    if (!ones) {
      weight[k].shape = ws;
      part = L.g.mul(part, L.constant(weight[k]));
    }
    y = y ? L.g.add(*y, part) : part;
  }
  return *y;
}

void resize(Lowering& L, bool upsample) {
  const Shape xs = L.shape(0);
  const size_t r = xs.size();
  std::string mode = L.attr_s("mode", "nearest");
  std::string transform = "asymmetric", nearest = "floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  std::vector<double> scales;
  std::vector<int64_t> sizes, axes;
  if (upsample || L.opset < 11) {
    if (upsample && L.opset < 9) {
      for (double d : L.attr_floats("scales")) scales.push_back(d);
    } else {
      const HostTensor& s = L.known(1);
      scales = s.data;
    }
    if (mode == "linear" || mode == "bilinear") mode = "linear", transform = "asymmetric";
  } else {
    transform = L.attr_s("coordinate_transformation_mode", "half_pixel");
    nearest = L.attr_s("nearest_mode", "round_prefer_floor");
    cubic_a = L.attr_f("cubic_coeff_a", -0.75);
    exclude_outside = L.attr_i("exclude_outside", 0) != 0;
    if (L.attr_i("antialias", 0) != 0) L.unsupported("antialias", "expected 0");
    L.attr_f("extrapolation_value", 0.0);
    axes = L.attr_ints("axes");
    if (L.has_input(2) && numel(L.shape(2)) > 0) scales = L.known(2).data;
    if (L.has_input(3) && numel(L.shape(3)) > 0) sizes = L.known_ints(3);
    if (transform == "tf_crop_and_resize")
      L.unsupported("coordinate_transformation_mode", "tf_crop_and_resize");
  }
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    L.unsupported("mode", "expected nearest, linear or cubic, got " + mode);
  if (axes.empty())
    for (size_t i = 0; i < r; ++i) axes.push_back(int64_t(i));
  for (auto& a : axes) a = L.axis(a, r);
  std::vector<double> scale(r, 1.0);
  std::vector<int64_t> out(xs.begin(), xs.end());
  if (!sizes.empty()) {
    if (sizes.size() != axes.size()) L.unsupported("", "expected one size per axis");
    const std::string policy = L.attr_s("keep_aspect_ratio_policy", "stretch");
    double common = policy == "not_larger" ? 1e300 : 0;
    for (size_t i = 0; i < axes.size(); ++i) {
      const double s = double(sizes[i]) / double(xs[size_t(axes[i])]);
      common = policy == "not_larger" ? std::min(common, s) : std::max(common, s);
    }
    for (size_t i = 0; i < axes.size(); ++i) {
      const size_t a = size_t(axes[i]);
      if (policy == "stretch") {
        out[a] = sizes[i];
        scale[a] = double(sizes[i]) / double(xs[a]);
      } else {
        scale[a] = common;
        out[a] = int64_t(std::round(common * double(xs[a])));
      }
    }
  } else {
    if (scales.size() != axes.size()) L.unsupported("", "expected one scale per axis");
    for (size_t i = 0; i < axes.size(); ++i) {
      const size_t a = size_t(axes[i]);
      if (scales[i] <= 0) L.unsupported("", "expected positive scales");
      scale[a] = scales[i];
      out[a] = int64_t(std::floor(double(xs[a]) * scales[i]));
    }
  }
  NodeId x = L.in(0);
  bool changed = false;
  for (size_t a = 0; a < r; ++a) {
    if (out[a] == xs[a] && scale[a] == 1.0) continue;
    if (out[a] < 1) L.unsupported("", "expected a non-empty output");
    x = resample_axis(L, x, int64_t(a), out[a], scale[a], mode, transform, nearest, cubic_a, exclude_outside);
    changed = true;
  }
  L.out(0, changed ? x : L.g.reshape(x, xs));
}

}  // namespace

void add_resize_ops(ConverterTable& t) {
  t["Resize"] = [](Lowering& L) { resize(L, false); };
  t["Upsample"] = [](Lowering& L) { resize(L, true); };
}

}  // namespace meganeura::onnx
