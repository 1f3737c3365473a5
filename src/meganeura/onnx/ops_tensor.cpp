// Shape and movement ONNX ops. Shape, Size, ConstantOfShape, Range, Constant and EyeLike give load-time
// values; shape-like inputs (Reshape's shape, Slice's starts, Pad's pads, ...) must be known at load time.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "meganeura/onnx/lower.hpp"
#include "meganeura/onnx/tensor.hpp"

namespace meganeura::onnx {
namespace {

constexpr int32_t kInt64 = int32_t(ElemType::Int64);

// The node's output `x` is an existing node (an identity): give the output a node of its own so that its name
// and its position as a graph output do not collide with the input's.
NodeId fresh(Lowering& L, NodeId x) { return L.g.reshape(x, L.g.node(x).shape); }

std::vector<int64_t> axes_of(Lowering& L, size_t input, const char* attribute) {
  if (L.opset >= 13 || L.has_input(input))
    return L.has_input(input) ? L.known_ints(input) : std::vector<int64_t>{};
  return L.attr_ints(attribute);
}

HostTensor tensor_attr(Lowering& L, const AttributeProto& a) {
  if (a.t.empty()) L.unsupported(a.name, "expected a tensor value, got none");
  return decode_tensor(a.t[0], "attribute '" + a.name + "'", "");
}

// A slice with no elements: the result is a known empty value.
struct EmptySlice {};

void slice_axis(Lowering& L, NodeId& x, int64_t axis, int64_t start, int64_t end, int64_t step) {
  const int64_t dim = L.g.node(x).shape[size_t(axis)];
  if (step == 0) L.unsupported("", "expected a non-zero step, got 0");
  auto clampi = [](int64_t v, int64_t lo, int64_t hi) { return std::max(lo, std::min(hi, v)); };
  if (start < 0) start = start < INT64_MIN + dim ? INT64_MIN : start + dim;
  if (end < 0) end = end < INT64_MIN + dim ? INT64_MIN : end + dim;
  if (step > 0) {
    start = clampi(start, 0, dim);
    end = clampi(end, 0, dim);
    if (start >= end) throw EmptySlice{};
    if (start == 0 && end == dim && step == 1) return;
    x = L.g.slice(x, axis, start, end, step);
    return;
  }
  start = clampi(start, -1, dim - 1);
  end = clampi(end, -1, dim - 1);
  std::vector<int64_t> idx;
  for (int64_t i = start; i > end; i += step) idx.push_back(i);
  if (idx.empty()) throw EmptySlice{};
  x = L.take(x, axis, host_ints(idx));
}

// Source index of padded position j (in [-before, dim + after)) for reflect, edge and wrap padding.
int64_t pad_source(int64_t j, int64_t dim, const std::string& mode) {
  if (mode == "edge") return std::max<int64_t>(0, std::min(dim - 1, j));
  if (mode == "wrap") return ((j % dim) + dim) % dim;
  if (dim == 1) return 0;
  const int64_t period = 2 * (dim - 1);  // reflect: mirror without repeating the edge
  int64_t m = ((j % period) + period) % period;
  return m < dim ? m : period - m;
}

}  // namespace

void add_tensor_ops(ConverterTable& t) {
  t["Constant"] = [](Lowering& L) {
    static const char* names[] = {"value", "value_float", "value_floats", "value_int", "value_ints"};
    for (const char* n : names) {
      const AttributeProto* a = L.attr(n);
      if (!a) continue;
      const std::string name = n;
      if (name == "value") {
        const int32_t type = a->t.empty() ? 1 : a->t[0].data_type;
        HostTensor value = tensor_attr(L, *a);
        // Weights that an exporter wrote as Constant nodes (paddle2onnx does) train like initializers; a
        // scalar (an activation's 6, an epsilon) stays a constant.
        const bool weight = L.constants_as_parameters && is_float_type(type) && value.size() >= 2;
        L.out_known(0, std::move(value), type);
        if (weight && L.has_output(0)) L.values[L.node->output[0]].parameter = true;
        return;
      }
      if (name == "value_float") return L.out_known(0, HostTensor::scalar(a->f), 1);
      if (name == "value_int") return L.out_known(0, HostTensor::scalar(double(a->i)), kInt64);
      if (name == "value_ints") return L.out_known(0, host_ints(a->ints), kInt64);
      HostTensor f(Shape{int64_t(a->floats.size())});
      for (size_t i = 0; i < a->floats.size(); ++i) f.data[i] = a->floats[i];
      return L.out_known(0, f, 1);
    }
    L.unsupported("", "expected a value, value_float(s) or value_int(s) attribute");
  };
  t["Shape"] = [](Lowering& L) {
    const Shape s = L.shape(0);
    const int64_t r = int64_t(s.size());
    int64_t start = L.attr_i("start", 0), end = L.attr_i("end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, 0, r);
    std::vector<int64_t> v;
    for (int64_t i = start; i < end; ++i) v.push_back(s[size_t(i)]);
    L.out_known(0, host_ints(v), kInt64);
  };
  t["Size"] = [](Lowering& L) { L.out_known(0, HostTensor::scalar(double(numel(L.shape(0)))), kInt64); };
  t["ConstantOfShape"] = [](Lowering& L) {
    const std::vector<int64_t> s = L.known_ints(0);
    double v = 0;
    int32_t type = 1;
    if (const AttributeProto* a = L.attr("value")) {
      HostTensor t = tensor_attr(L, *a);
      if (t.data.size() != 1)
        L.unsupported("value", "expected one element, got " + std::to_string(t.data.size()));
      v = t.data[0];
      type = a->t[0].data_type;
    }
    for (int64_t d : s)
      if (d < 0 || d > (int64_t(1) << 31))
        L.unsupported("", "expected dims in [0, 2^31], got " + shape_str(s));
    if (numel(s) > (int64_t(1) << 28)) L.unsupported("", "expected under 2^28 elements, got " + shape_str(s));
    L.out_known(0, HostTensor(Shape(s.begin(), s.end()), v), type);
  };
  t["EyeLike"] = [](Lowering& L) {
    const Shape s = L.shape(0);
    if (s.size() != 2) L.unsupported("", "expected a 2-D input, got " + shape_str(s));
    const int64_t k = L.attr_i("k", 0);
    HostTensor r(s, 0.0);
    for (int64_t i = 0; i < s[0]; ++i)
      if (i + k >= 0 && i + k < s[1]) r.data[size_t(i * s[1] + i + k)] = 1;
    L.out_known(0, r, int32_t(L.attr_i("dtype", L.type(0))));
  };
  t["Range"] = [](Lowering& L) {
    const double start = L.known(0).data.at(0), limit = L.known(1).data.at(0), delta = L.known(2).data.at(0);
    if (delta == 0) L.unsupported("", "expected a non-zero delta, got 0");
    const double n = std::max(0.0, std::ceil((limit - start) / delta));
    if (n > double(1 << 28)) L.unsupported("", "expected under 2^28 elements, got " + std::to_string(n));
    HostTensor r(Shape{int64_t(n)});
    for (size_t i = 0; i < r.data.size(); ++i) r.data[i] = start + double(i) * delta;
    L.out_known(0, r, L.type(0));
  };

  t["Reshape"] = [](Lowering& L) {
    const Shape in = L.shape(0);
    std::vector<int64_t> s = L.known_ints(1);
    const bool allowzero = L.attr_i("allowzero", 0) != 0;
    int64_t infer = -1, known = 1;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == 0 && !allowzero) {
        if (i >= in.size())
          L.unsupported("", "expected a 0 within the input's rank, got shape " + shape_str(s));
        s[i] = in[i];
      }
      if (s[i] == -1) {
        if (infer >= 0) L.unsupported("", "expected at most one -1, got shape " + shape_str(s));
        infer = int64_t(i);
      } else {
        known *= s[i];
      }
    }
    if (infer >= 0) {
      if (known == 0 || numel(in) % known)
        L.unsupported("", "expected a shape that divides the input, got " + shape_str(s));
      s[size_t(infer)] = numel(in) / known;
    }
    NodeId x = L.in(0);
    L.out(0, s == in ? fresh(L, x) : L.g.reshape(x, Shape(s.begin(), s.end())));
  };
  t["Flatten"] = [](Lowering& L) {
    const Shape in = L.shape(0);
    int64_t axis = L.attr_i("axis", 1);
    if (axis < 0) axis += int64_t(in.size());
    if (axis < 0 || axis > int64_t(in.size())) L.unsupported("axis", "expected an axis in [-rank, rank]");
    int64_t a = 1, b = 1;
    for (size_t i = 0; i < in.size(); ++i) (int64_t(i) < axis ? a : b) *= in[i];
    L.out(0, L.g.reshape(L.in(0), {a, b}));
  };
  t["Transpose"] = [](Lowering& L) {
    const size_t r = L.shape(0).size();
    std::vector<int64_t> perm(r);
    std::iota(perm.rbegin(), perm.rend(), 0);
    perm = L.attr_ints("perm", perm);
    NodeId x = L.in(0);
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == int64_t(i);
    L.out(0, identity ? fresh(L, x) : L.g.permute(x, perm));
  };
  t["Squeeze"] = [](Lowering& L) {
    const Shape in = L.shape(0);
    std::vector<int64_t> axes = axes_of(L, 1, "axes");
    for (auto& a : axes) a = L.axis(a, in.size());
    Shape out;
    for (size_t i = 0; i < in.size(); ++i) {
      const bool listed = std::find(axes.begin(), axes.end(), int64_t(i)) != axes.end();
      if (listed && in[i] != 1) L.unsupported("", "expected size 1 at squeezed axis " + std::to_string(i));
      if (!(listed || (axes.empty() && in[i] == 1))) out.push_back(in[i]);
    }
    L.out(0, L.g.reshape(L.in(0), out));
  };
  t["Unsqueeze"] = [](Lowering& L) {
    Shape s = L.shape(0);
    std::vector<int64_t> axes = axes_of(L, 1, "axes");
    const size_t rank = s.size() + axes.size();
    for (auto& a : axes) a = L.axis(a, rank);
    std::sort(axes.begin(), axes.end());
    for (int64_t a : axes) s.insert(s.begin() + a, 1);
    L.out(0, L.g.reshape(L.in(0), s));
  };
  t["Concat"] = [](Lowering& L) {
    const int64_t axis = L.axis(L.attr_i("axis", 0), L.shape(0).size());
    std::vector<NodeId> xs;
    for (size_t i = 0; i < L.arity(); ++i)
      if (numel(L.shape(i)) > 0) xs.push_back(L.in(i));
    if (xs.empty()) L.unsupported("", "expected a non-empty input, got only empty ones");
    L.out(0, xs.size() == 1 ? fresh(L, xs[0]) : L.g.concat(xs, axis));
  };
  t["Split"] = [](Lowering& L) {
    const Shape in = L.shape(0);
    const int64_t axis = L.axis(L.attr_i("axis", 0), in.size());
    std::vector<int64_t> sizes =
        L.opset >= 13 ? (L.has_input(1) ? L.known_ints(1) : std::vector<int64_t>{}) : L.attr_ints("split");
    const int64_t n = L.has("num_outputs") ? L.attr_i("num_outputs", 1) : int64_t(L.outputs());
    if (sizes.empty()) {
      const int64_t dim = in[size_t(axis)];
      const int64_t chunk = (dim + n - 1) / n;
      for (int64_t k = 0; k < n; ++k) sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - k * chunk)));
    }
    for (int64_t s : sizes)
      if (s <= 0) L.unsupported("split", "expected positive sizes, got " + shape_str(sizes));
    auto parts = L.g.split(L.in(0), sizes, axis);
    for (size_t i = 0; i < parts.size(); ++i) L.out(i, parts.size() == 1 ? fresh(L, parts[i]) : parts[i]);
  };
  t["Slice"] = [](Lowering& L) {
    const Shape in = L.shape(0);
    std::vector<int64_t> starts, ends, axes, steps;
    if (L.opset < 10) {
      starts = L.attr_ints("starts");
      ends = L.attr_ints("ends");
      axes = L.attr_ints("axes");
    } else {
      starts = L.known_ints(1);
      ends = L.known_ints(2);
      if (L.has_input(3)) axes = L.known_ints(3);
      if (L.has_input(4)) steps = L.known_ints(4);
    }
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
      L.unsupported("", "expected starts, ends, axes and steps of one length");
    NodeId x = L.in(0);
    try {
      for (size_t i = 0; i < starts.size(); ++i)
        slice_axis(L, x, L.axis(axes[i], in.size()), starts[i], ends[i], steps[i]);
    } catch (const EmptySlice&) {
      Shape s = in;
      s[size_t(L.axis(axes[0], in.size()))] = 0;
      return L.out_known(0, HostTensor(s), L.type(0));
    }
    L.out(0, x == L.in(0) ? fresh(L, x) : x);
  };
  t["Gather"] = [](Lowering& L) {
    const int64_t axis = L.axis(L.attr_i("axis", 0), L.shape(0).size());
    const Value& idx = L.value(1);
    if (numel(L.shape(1)) == 0) L.unsupported("", "expected indices, got an empty tensor");
    NodeId r = idx.known ? L.take(L.in(0), axis, *idx.known) : L.take_node(L.in(0), axis, L.in(1));
    L.out(0, r);
  };
  t["Expand"] = [](Lowering& L) {
    const std::vector<int64_t> s = L.known_ints(1);
    auto out = broadcast_shapes(L.shape(0), Shape(s.begin(), s.end()));
    if (!out) L.unsupported("", "expected a shape the input broadcasts to, got " + shape_str(s));
    NodeId x = L.in(0);
    L.out(0, *out == L.shape(0) ? fresh(L, x) : L.g.broadcast_to(x, *out));
  };
  t["Tile"] = [](Lowering& L) {
    const std::vector<int64_t> reps = L.known_ints(1);
    if (reps.size() != L.shape(0).size()) L.unsupported("", "expected one repeat per axis");
    NodeId x = L.in(0);
    for (size_t a = 0; a < reps.size(); ++a) {
      if (reps[a] < 1) L.unsupported("", "expected repeats >= 1, got " + shape_str(reps));
      if (reps[a] > 1) x = L.g.concat(std::vector<NodeId>(size_t(reps[a]), x), int64_t(a));
    }
    L.out(0, x == L.in(0) ? fresh(L, x) : x);
  };
  t["Pad"] = [](Lowering& L) {
    const Shape in = L.shape(0);
    const std::string mode = L.attr_s("mode", "constant");
    std::vector<int64_t> pads;
    double value = 0;
    std::vector<int64_t> axes;
    if (L.opset < 11) {
      pads = L.attr_ints(L.opset < 2 ? "paddings" : "pads");
      value = L.attr_f("value", 0.0);
    } else {
      pads = L.known_ints(1);
      if (L.has_input(2) && numel(L.shape(2)) > 0) value = L.known(2).data.at(0);
      if (L.has_input(3)) axes = L.known_ints(3);
    }
    if (axes.empty())
      for (size_t i = 0; i < in.size(); ++i) axes.push_back(int64_t(i));
    if (pads.size() != 2 * axes.size())
      L.unsupported("pads", "expected 2 pads per axis, got " + shape_str(pads));
    std::vector<int64_t> before(in.size(), 0), after(in.size(), 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t a = L.axis(axes[i], in.size());
      before[size_t(a)] = pads[i];
      after[size_t(a)] = pads[i + axes.size()];
    }
    NodeId x = L.in(0);
    if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
      L.unsupported("mode", "expected constant, reflect, edge or wrap, got " + mode);
    for (size_t a = 0; a < in.size(); ++a) {  // negative pads crop
      if (before[a] < 0) slice_axis(L, x, int64_t(a), -before[a], INT64_MAX, 1), before[a] = 0;
      if (after[a] < 0) slice_axis(L, x, int64_t(a), 0, in[a] + after[a], 1), after[a] = 0;
    }
    const Shape cropped = L.g.node(x).shape;
    if (mode == "constant") {
      bool any = false;
      for (size_t a = 0; a < in.size(); ++a) any = any || before[a] || after[a];
      if (any) x = L.g.pad(x, before, after, value);
    } else {
      for (size_t a = 0; a < in.size(); ++a) {
        if (!before[a] && !after[a]) continue;
        std::vector<int64_t> idx;
        for (int64_t j = -before[a]; j < cropped[a] + after[a]; ++j)
          idx.push_back(pad_source(j, cropped[a], mode));
        x = L.take(x, int64_t(a), host_ints(idx));
      }
    }
    L.out(0, x == L.in(0) ? fresh(L, x) : x);
  };
  t["Trilu"] = [](Lowering& L) {
    const Shape in = L.shape(0);
    if (in.size() < 2) L.unsupported("", "expected rank >= 2, got " + shape_str(in));
    const bool upper = L.attr_i("upper", 1) != 0;
    const int64_t k = L.has_input(1) ? L.known_ints(1).at(0) : 0;
    const int64_t n = in[in.size() - 2], m = in[in.size() - 1];
    HostTensor mask(Shape{n, m}, 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) mask.data[size_t(i * m + j)] = upper ? (j - i >= k) : (j - i <= k);
    if (numel(in) == 0) L.unsupported("", "expected a non-empty input");
    L.out(0, L.g.where(L.constant(mask), L.in(0), L.g.scalar(0)));
  };
}

}  // namespace meganeura::onnx
