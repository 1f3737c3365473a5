// In-place state updates. WriteSlice(state, value, start) is the state with `value` written at
// [start, start + n) along attrs.axes[0]; start is i32 of shape [] or [B] (one per index of the state's first
// axis). The scheduler gives the result the state's storage, so the write costs only value's elements.
#include "meganeura/ops/helpers.hpp"

namespace meganeura::ops {

namespace {

TypeInfo write_slice_shape(const ShapeCtx& c) {
  const Node& st = c.in(0);
  if (st.op != Op::Parameter || !st.attrs.flag_a)
    c.fail("a state (Graph::state) to write into", std::string(op_name(st.op)) + " '" + st.prov.name + "'");
  const Shape& s = c.shape(0);
  const Shape& v = c.shape(1);
  if (c.attrs.axes.size() != 1) c.fail("one axis", std::to_string(c.attrs.axes.size()) + " axes");
  const int64_t ax = c.axis(c.attrs.axes[0], s.size());
  if (v.size() != s.size())
    c.fail("a value of the state's rank " + std::to_string(s.size()), "value " + shape_str(v));
  for (size_t d = 0; d < s.size(); ++d)
    if (int64_t(d) == ax ? v[d] > s[d] : v[d] != s[d])
      c.fail("a value shaped like the state but along axis " + std::to_string(ax) + " (at most " +
                 std::to_string(s[size_t(ax)]) + ")",
             "value " + shape_str(v) + " into state " + shape_str(s));
  // Floats of any width meet in f32; an i32 state (token ids fed back) takes i32 values only (kernels carry
  // them through f32 like every i32 value: exact below 2^24).
  if (!(is_float(c.dtype(1)) && is_float(c.dtype(0))) &&
      !(c.dtype(0) == DType::I32 && c.dtype(1) == DType::I32))
    c.fail("a float state and value, or an i32 state and value",
           std::string(dtype_name(c.dtype(0))) + " and " + dtype_name(c.dtype(1)));
  const Shape& p = c.shape(2);
  if (c.dtype(2) != DType::I32 || !(p.empty() || (p.size() == 1 && p[0] == s[0] && ax > 0)))
    c.fail("an i32 start of shape [] (or [" + std::to_string(s[0]) + "] with an axis > 0)",
           std::string(dtype_name(c.dtype(2))) + shape_str(p) + " along axis " + std::to_string(ax));
  return {s, c.dtype(0)};
}

HostTensor write_slice_ref(const Node& node, const std::vector<const HostTensor*>& in) {
  const HostTensor &st = *in[0], &v = *in[1], &start = *in[2];
  const Shape& s = st.shape;
  const size_t ax =
      size_t(node.attrs.axes[0] < 0 ? node.attrs.axes[0] + int64_t(s.size()) : node.attrs.axes[0]);
  HostTensor y = st;
  const std::vector<int64_t> vst = strides_of(v.shape), sst = strides_of(s);
  for (int64_t i = 0; i < numel(v.shape); ++i) {
    int64_t dst = 0;
    bool inside = true;
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t c = (i / vst[d]) % v.shape[d];
      if (d == ax) {
        const int64_t b = (i / vst[0]) % v.shape[0];
        // in f64: a reference i32 start may be any integer, beyond int64 too (NaN compares outside)
        const double at = double(c) + start.data[start.data.size() == 1 ? 0 : size_t(b)];
        inside = at >= 0 && at < double(s[d]);
        c = inside ? int64_t(at) : 0;
      }
      dst += c * sst[d];
    }
    if (inside) y.data[size_t(dst)] = v.data[size_t(i)];
  }
  return y;
}

}  // namespace

void register_state(OpTable& t) {
  t.add({Op::WriteSlice, 3, write_slice_shape, nullptr, write_slice_ref, nullptr});
}

}  // namespace meganeura::ops
