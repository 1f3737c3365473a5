// Window ops on NCHW planes for the movement template (one thread per output element): max/avg pooling,
// their gradients, nearest upsampling. The gradients are gathers, not scatters: each input cell visits
// the windows that contain it, in ascending window order, so results are deterministic and no atomics
// are needed.
#include "meganeura/codegen/emit.hpp"

namespace meganeura::codegen {

namespace {

std::string u(int64_t v) { return uint_lit(v); }
std::string i(int64_t v) { return std::to_string(v); }

struct Pool {
  int64_t c, h, w, kh, kw, sh, sw, ph, pw, oh, ow;
};

Pool pool_of(const std::vector<int64_t>& a, const Shape& x, const Shape& y) {
  return {x[1], x[2], x[3], a.at(0), a.at(1), a.at(2), a.at(3), a.at(4), a.at(5), y[2], y[3]};
}

// The argmax of window (oy, ox) of the plane starting at `xbase` as int by, bx: the first maximum in
// row-major order, exactly the reference's rule (a later equal value does not replace it; NaN never does).
// Loops over the cells (iy, ix) of window (oy, ox) that lie inside the input (padding skipped), around
// `body`.
std::string window_cells(const Pool& p, const std::string& oy, const std::string& ox,
                         const std::string& body) {
  std::string s;
  s += "    for (int ky = 0; ky < " + i(p.kh) + "; ++ky) {\n";
  s += "      int iy = int(" + oy + ") * " + i(p.sh) + " - " + i(p.ph) + " + ky;\n";
  s += "      if (iy < 0 || iy >= " + i(p.h) + ") continue;\n";
  s += "      for (int kx = 0; kx < " + i(p.kw) + "; ++kx) {\n";
  s += "        int ix = int(" + ox + ") * " + i(p.sw) + " - " + i(p.pw) + " + kx;\n";
  s += "        if (ix < 0 || ix >= " + i(p.w) + ") continue;\n";
  return s + body + "      }\n    }\n";
}

std::string window_argmax(Emitter& e, NodeId x, const Pool& p) {
  return "    float best = 0.0;\n    int by = -1, bx = -1;\n" +
         window_cells(p, "oy", "ox",
                      "        float v = " + e.load(x, "xbase + uint(iy) * " + u(p.w) + " + uint(ix)") +
                          ";\n" + "        if (by < 0 || v > best) { best = v; by = iy; bx = ix; }\n");
}

// Loops over the windows (oy, ox) that contain input cell (c2, c3), ascending, around `body`.
std::string containing_windows(const Pool& p, const std::string& body) {
  std::string s;
  // First window whose last row reaches c2: oy·sh − ph + kh − 1 >= c2 (kept non-negative before dividing).
  s += "  int ly = int(c2) + " + i(p.ph - p.kh + 1) + ", lx = int(c3) + " + i(p.pw - p.kw + 1) + ";\n";
  s += "  uint oy0 = ly <= 0 ? 0u : (uint(ly) + " + u(p.sh - 1) + ") / " + u(p.sh) + ";\n";
  s += "  uint ox0 = lx <= 0 ? 0u : (uint(lx) + " + u(p.sw - 1) + ") / " + u(p.sw) + ";\n";
  s += "  uint oy1 = min((c2 + " + u(p.ph) + ") / " + u(p.sh) + ", " + u(p.oh - 1) + ");\n";
  s += "  uint ox1 = min((c3 + " + u(p.pw) + ") / " + u(p.sw) + ", " + u(p.ow - 1) + ");\n";
  s += "  for (uint oy = oy0; oy <= oy1; ++oy)\n    for (uint ox = ox0; ox <= ox1; ++ox) {\n" + body +
       "    }\n";
  return s;
}

}  // namespace

std::string window_core(Emitter& e, const Node& c) {
  const Shape& os = c.shape;
  const auto& a = c.attrs.ints;
  const std::string plane = "(c0 * " + u(os[1]) + " + c1)";
  std::string s;
  switch (c.op) {
    case Op::MaxPool2d: {
      const Pool p = pool_of(a, e.g.node(c.inputs[0]).shape, os);
      s += "  uint xbase = " + plane + " * " + u(p.h * p.w) + ";\n  uint oy = c2, ox = c3;\n";
      s += "  {\n" + window_argmax(e, c.inputs[0], p) + "    return best;\n  }\n";
      break;
    }
    case Op::MaxPool2dGrad: {
      // dx at (c2, c3) gathers dy of every window whose argmax is this cell.
      const Pool p = pool_of(a, os, e.g.node(c.inputs[1]).shape);
      s += "  uint xbase = " + plane + " * " + u(p.h * p.w) + ", ybase = " + plane + " * " + u(p.oh * p.ow) +
           ";\n";
      s += "  float acc = 0.0;\n";
      s += containing_windows(p, window_argmax(e, c.inputs[0], p) +
                                     "    if (by == int(c2) && bx == int(c3)) acc += " +
                                     e.load(c.inputs[1], "ybase + oy * " + u(p.ow) + " + ox") + ";\n");
      s += "  return acc;\n";
      break;
    }
    case Op::AvgPool2d: {
      // Padded cells count in the divisor (torch's count_include_pad=True), as in the reference.
      const Pool p = pool_of(a, e.g.node(c.inputs[0]).shape, os);
      s += "  uint xbase = " + plane + " * " + u(p.h * p.w) + ";\n  float acc = 0.0;\n";
      s += window_cells(
          p, "c2", "c3",
          "        acc += " + e.load(c.inputs[0], "xbase + uint(iy) * " + u(p.w) + " + uint(ix)") + ";\n");
      s += "  return acc * " + float_lit(1.0 / double(p.kh * p.kw)) + ";\n";
      break;
    }
    case Op::AvgPool2dGrad: {
      const Pool p = pool_of(a, os, e.g.node(c.inputs[0]).shape);
      s += "  uint ybase = " + plane + " * " + u(p.oh * p.ow) + ";\n  float acc = 0.0;\n";
      s += containing_windows(
          p, "      acc += " + e.load(c.inputs[0], "ybase + oy * " + u(p.ow) + " + ox") + ";\n");
      s += "  return acc * " + float_lit(1.0 / double(p.kh * p.kw)) + ";\n";
      break;
    }
    case Op::UpsampleNearest: {
      const Shape& xs = e.g.node(c.inputs[0]).shape;
      const int64_t f = a.at(0);
      s += "  return " +
           e.load(c.inputs[0], "(" + plane + " * " + u(xs[2]) + " + c2 / " + u(f) + ") * " + u(xs[3]) +
                                   " + c3 / " + u(f)) +
           ";\n";
      break;
    }
    default:
      throw GraphError("[codegen] expected a window op, got " + std::string(op_name(c.op)) + " at node '" +
                       node_label(e.g, e.k.core) + "'");
  }
  return s;
}

}  // namespace meganeura::codegen
