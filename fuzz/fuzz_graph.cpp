// Graph builder: a random sequence of ops from the op table (random operands, dtypes, attributes) must, op by
// op, either build or throw a meganeura::Error; a graph that built is then evaluated by the CPU reference
// (small shapes only) and differentiated, under the same rule. Anything else (another exception, a crash,
// an out-of-bounds read under ASan) is a bug in a shape rule, a VJP or a reference.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "meganeura/autodiff/autodiff.hpp"
#include "meganeura/core/error.hpp"
#include "meganeura/ir/graph.hpp"
#include "meganeura/ops/ops.hpp"
#include "meganeura/reference/interpreter.hpp"

using namespace meganeura;

namespace {

class Bytes {
 public:
  Bytes(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool empty() const { return i_ >= n_; }
  uint8_t u8() { return i_ < n_ ? d_[i_++] : 0; }
  int64_t small() { return int64_t(int8_t(u8())); }  // -128..127: axes, strides, paddings, sizes
  double real() {
    static const double v[] = {0.0, 1.0, -1.0, 0.5, 2.0, 1e-5, 0.1, -0.3, 3.0, 1e30, -1e30, 1e-30};
    return v[u8() % (sizeof v / sizeof v[0])];
  }

 private:
  const uint8_t* d_;
  size_t n_, i_ = 0;
};

Shape small_shape(Bytes& b) {
  Shape s(b.u8() % 5);
  for (int64_t& d : s) d = 1 + b.u8() % 4;
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes b(data, size);
  Graph g;
  std::vector<NodeId> nodes;
  reference::Feeds feeds;
  // a few leaves first
  const int leaves = 1 + b.u8() % 3;
  for (int i = 0; i < leaves; ++i) {
    const Shape s = small_shape(b);
    const bool param = b.u8() & 1;
    const DType t = (b.u8() % 4 == 0) ? DType::I32 : DType::F32;
    const std::string name = (param ? "p" : "x") + std::to_string(i);
    try {
      NodeId n = param ? g.parameter(name, s, DType::F32) : g.input(name, s, t);
      nodes.push_back(n);
      HostTensor v(s);
      for (size_t k = 0; k < v.size(); ++k) v[k] = double(int(k % 3));
      feeds[name] = v;
    } catch (const Error&) {
    }
  }
  if (nodes.empty()) return 0;
  const int steps = 1 + b.u8() % 8;
  for (int step = 0; step < steps && !b.empty(); ++step) {
    const Op op = Op(b.u8() % uint8_t(Op::Count_));
    if (op == Op::Input || op == Op::Parameter || op == Op::Constant || !ops::registered(op)) continue;
    const int arity = ops::def(op).arity;
    const int n_in = arity >= 0 ? arity : 1 + b.u8() % 3;
    std::vector<NodeId> in;
    for (int i = 0; i < n_in; ++i) in.push_back(nodes[b.u8() % nodes.size()]);
    Attrs a;
    for (int i = b.u8() % 4; i > 0; --i) a.axes.push_back(b.small() % 6);
    for (int i = b.u8() % 7; i > 0; --i) a.ints.push_back(b.small());
    for (int i = b.u8() % 3; i > 0; --i) a.reals.push_back(b.real());
    const uint8_t flags = b.u8();
    a.keepdim = flags & 1;
    a.flag_a = flags & 2;
    a.flag_b = flags & 4;
    a.reduction = Reduction((flags >> 3) % 3);
    a.dtype = DType((flags >> 5) % 5);
    a.seed = b.u8();
    try {
      nodes.push_back(g.make(op, in, a, Provenance{}));
    } catch (const Error&) {
    }
  }
  const NodeId last = nodes.back();
  try {
    g.set_outputs({last});
  } catch (const Error&) {
    return 0;
  }
  // Evaluate only small graphs: shape rules may legally make large values (pad, upsample, broadcast).
  int64_t total = 0;
  for (NodeId n : nodes) total += numel(g.node(n).shape);
  if (total > 20000) return 0;
  try {
    (void)reference::evaluate(g, feeds, nodes);
  } catch (const Error&) {
  }
  if (g.node(last).dtype == DType::F32 && !g.parameters().empty()) {
    try {
      const NodeId loss = g.sum(last, {}, false);
      Graph d = differentiate(g, loss, g.parameters());
      std::vector<NodeId> want{loss};
      for (NodeId p : g.parameters())
        if (auto gr = d.gradient(p)) want.push_back(*gr);
      int64_t dtotal = 0;
      for (uint32_t i = 0; i < d.size(); ++i) dtotal += numel(d.node(NodeId{i}).shape);
      if (dtotal <= 50000) (void)reference::evaluate(d, feeds, want);
    } catch (const Error&) {
    }
  }
  return 0;
}
