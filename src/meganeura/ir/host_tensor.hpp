#pragma once
// A float64 host tensor: the value type of the CPU reference interpreter and of every op's reference
// function. Row-major, dense; integer dtypes are held as exact doubles.
#include <cstdint>
#include <vector>

#include "meganeura/ir/graph.hpp"

namespace meganeura {

struct HostTensor {
  Shape shape;
  std::vector<double> data;

  HostTensor() = default;
  explicit HostTensor(Shape s, double value = 0.0) : shape(std::move(s)), data(size_t(numel(shape)), value) {}
  HostTensor(Shape s, std::vector<double> d) : shape(std::move(s)), data(std::move(d)) {}
  static HostTensor scalar(double v) { return HostTensor(Shape{}, v); }
  size_t size() const { return data.size(); }
  double& operator[](size_t i) { return data[i]; }
  double operator[](size_t i) const { return data[i]; }
};

// Row-major strides of a shape.
std::vector<int64_t> strides_of(const Shape& s);

// Maps a flat index of `out` to the flat index of a tensor of shape `in` that numpy-broadcasts to `out`.
class BroadcastIndex {
 public:
  BroadcastIndex(const Shape& in, const Shape& out);
  int64_t operator()(int64_t out_flat) const;

 private:
  Shape out_;
  std::vector<int64_t> in_strides_;  // per output axis; 0 where `in` is broadcast
};

// Reads `t` at the flat index of `out` it broadcasts to (a convenience over BroadcastIndex for one value).
std::vector<double> broadcast_data(const HostTensor& t, const Shape& out);

}  // namespace meganeura
