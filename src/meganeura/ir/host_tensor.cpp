#include "meganeura/ir/host_tensor.hpp"

namespace meganeura {

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

BroadcastIndex::BroadcastIndex(const Shape& in, const Shape& out) : out_(out), in_strides_(out.size(), 0) {
  std::vector<int64_t> st = strides_of(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] != 1) in_strides_[off + i] = st[i];
}

int64_t BroadcastIndex::operator()(int64_t out_flat) const {
  int64_t idx = 0;
  for (size_t i = out_.size(); i-- > 0;) {
    int64_t d = out_[i];
    int64_t c = out_flat % d;
    out_flat /= d;
    idx += c * in_strides_[i];
  }
  return idx;
}

std::vector<double> broadcast_data(const HostTensor& t, const Shape& out) {
  BroadcastIndex bi(t.shape, out);
  std::vector<double> r(size_t(numel(out)));
  for (size_t i = 0; i < r.size(); ++i) r[i] = t.data[size_t(bi(int64_t(i)))];
  return r;
}

}  // namespace meganeura
