// LSTM, unrolled over its (load-time) sequence length into matmuls and pointwise gates: the input projection
// of every step is one matmul up front, each step adds the recurrent matmul and updates c and h. Directions
// forward, reverse and bidirectional; peepholes; layout 0 and 1; the default activations (sigmoid, tanh,
// tanh) only. sequence_lens is accepted when it is known and every entry is the full length (no padding to
// mask).
#include <algorithm>

#include "meganeura/onnx/lower.hpp"
#include "meganeura/onnx/tensor.hpp"

namespace meganeura::onnx {
namespace {

void lstm(Lowering& L) {
  Graph& g = L.g;
  const int64_t H = L.attr_i("hidden_size", 0);
  const std::string direction = L.attr_s("direction", "forward");
  const int64_t layout = L.attr_i("layout", 0);
  if (H <= 0) L.unsupported("hidden_size", "expected a positive hidden_size");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    L.unsupported("direction", "expected forward, reverse or bidirectional, got " + direction);
  if (L.has("clip")) L.unsupported("clip", "cell clipping is not lowered");
  if (L.attr_i("input_forget", 0) != 0) L.unsupported("input_forget", "expected 0");
  if (const AttributeProto* a = L.attr("activations")) {
    const std::vector<std::string> defaults{"Sigmoid", "Tanh", "Tanh"};
    for (size_t k = 0; k < a->strings.size(); ++k)
      if (a->strings[k] != defaults[k % 3])
        L.unsupported("activations", "expected the default Sigmoid, Tanh, Tanh, got " + a->strings[k]);
  }
  if (L.has("activation_alpha") || L.has("activation_beta"))
    L.unsupported("activation_alpha", "only the default activations are lowered");
  if (layout != 0 && layout != 1) L.unsupported("layout", "expected 0 or 1");
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;

  NodeId x = L.in(0);
  const Shape xs = L.shape(0);
  if (xs.size() != 3) L.unsupported("", "expected X of rank 3, got " + shape_str(xs));
  if (layout == 1) x = g.transpose(x, 0, 1);  // [batch, seq, in] -> [seq, batch, in]
  const int64_t T = layout == 0 ? xs[0] : xs[1], B = layout == 0 ? xs[1] : xs[0], I = xs[2];
  if (L.shape(1) != Shape{dirs, 4 * H, I} || L.shape(2) != Shape{dirs, 4 * H, H})
    L.unsupported("", "expected W [" + std::to_string(dirs) + ", 4H, input] and R [dirs, 4H, H], got " +
                          shape_str(L.shape(1)) + " and " + shape_str(L.shape(2)));
  if (L.has_input(4)) {
    const HostTensor& lens = L.known(4);
    for (double v : lens.data)
      if (v != double(T)) L.unsupported("", "expected every sequence_lens entry to be the full length");
  }
  const NodeId W = L.in(1), R = L.in(2);
  const NodeId flat_x = g.reshape(x, {T * B, I});

  std::vector<NodeId> ys, hs, cs;  // per direction: Y [T, 1, B, H], Y_h and Y_c [1, B, H]
  for (int64_t d = 0; d < dirs; ++d) {
    const NodeId w = g.reshape(g.slice(W, 0, d, d + 1), {4 * H, I});
    const NodeId r = g.reshape(g.slice(R, 0, d, d + 1), {4 * H, H});
    NodeId xw = g.matmul(flat_x, w, false, true);  // [T*B, 4H], gates in the order i, o, f, c
    if (L.has_input(3)) {
      const NodeId b = g.reshape(g.slice(L.in(3), 0, d, d + 1), {8 * H});
      xw = g.add(xw, g.add(g.slice(b, 0, 0, 4 * H), g.slice(b, 0, 4 * H, 8 * H)));
    }
    xw = g.reshape(xw, {T, B, 4 * H});
    auto state = [&](size_t input) {
      return L.has_input(input) ? g.reshape(g.slice(L.in(input), 0, d, d + 1), {B, H})
                                : L.constant(HostTensor({B, H}));
    };
    NodeId h = state(5), c = state(6);
    std::optional<NodeId> pi, po, pf;
    if (L.has_input(7)) {
      const NodeId p = g.reshape(g.slice(L.in(7), 0, d, d + 1), {3 * H});
      pi = g.slice(p, 0, 0, H), po = g.slice(p, 0, H, 2 * H), pf = g.slice(p, 0, 2 * H, 3 * H);
    }
    const bool reverse = direction == "reverse" || d == 1;
    std::vector<NodeId> steps(size_t(T), NodeId{});
    for (int64_t k = 0; k < T; ++k) {
      const int64_t t = reverse ? T - 1 - k : k;
      const NodeId gates =
          g.add(g.reshape(g.slice(xw, 0, t, t + 1), {B, 4 * H}), g.matmul(h, r, false, true));
      auto gate = [&](int64_t j) { return g.slice(gates, 1, j * H, (j + 1) * H); };
      NodeId i = gate(0), o = gate(1), f = gate(2);
      if (pi) i = g.add(i, g.mul(*pi, c)), f = g.add(f, g.mul(*pf, c));
      c = g.add(g.mul(g.sigmoid(f), c), g.mul(g.sigmoid(i), g.tanh(gate(3))));
      if (po) o = g.add(o, g.mul(*po, c));
      h = g.mul(g.sigmoid(o), g.tanh(c));
      steps[size_t(t)] = g.reshape(h, {1, 1, B, H});
    }
    ys.push_back(T == 1 ? steps[0] : g.concat(steps, 0));
    hs.push_back(g.reshape(h, {1, B, H}));
    cs.push_back(g.reshape(c, {1, B, H}));
  }
  NodeId y = dirs == 1 ? ys[0] : g.concat(ys, 1);                // [T, dirs, B, H]
  if (layout == 1) y = g.transpose(g.transpose(y, 1, 2), 0, 1);  // [B, T, dirs, H]
  NodeId yh = dirs == 1 ? hs[0] : g.concat(hs, 0), yc = dirs == 1 ? cs[0] : g.concat(cs, 0);
  if (layout == 1) yh = g.transpose(yh, 0, 1), yc = g.transpose(yc, 0, 1);  // [B, dirs, H]
  L.out(0, y);
  L.out(1, yh);
  L.out(2, yc);
}

}  // namespace

void add_rnn_ops(ConverterTable& t) { t["LSTM"] = lstm; }

}  // namespace meganeura::onnx
