// Row reductions: a workgroup per output row, a shared-memory tree over the row, a fused prologue on the
// operands and an epilogue on the result. Losses reduced over the batch use one workgroup, so the mean needs
// no second kernel: short rows (class scores) take a thread each. Long rows on few rows, and batch-reduced
// losses over longer rows, take the two-pass form of reduce_split.cpp instead.
#include <algorithm>

#include "meganeura/codegen/reduce_impl.hpp"

namespace meganeura::codegen {

namespace {

int64_t norm_axis(int64_t a, size_t rank) { return a < 0 ? a + int64_t(rank) : a; }

}  // namespace

// Emits `uint <name>(uint i)`: decomposes i over dims `dims` of `shape` (last fastest) into an offset.
std::string norm_affine(Emitter& e, const Node& core, const std::string& X) {
  const Shape& xs = e.g.node(core.inputs.at(0)).shape;
  // the affine channel of element f (r: position in the row, o: the row)
  const std::string ch = core.op == Op::BatchNorm ? "o"
                         : core.op == Op::GroupNorm
                             ? "(f / " + uint_lit(numel(xs) / (xs[0] * xs[1])) + ") % " + uint_lit(xs[1])
                             : "r";
  std::string y = "(" + X + "(f) - mu) * rstd * " + e.operand_fn(1) + "(" + ch + ")";
  if (core.op != Op::RmsNorm) y += " + " + e.operand_fn(2) + "(" + ch + ")";
  return y;
}

std::string offset_fn(const std::string& name, const Shape& shape, const std::vector<int64_t>& dims) {
  std::vector<int64_t> st = contiguous_strides(shape);
  std::string s = "uint " + name + "(uint i) {\n  uint off = 0u;\n";
  for (size_t j = dims.size(); j-- > 0;) {
    int64_t d = dims[j];
    if (j == 0)
      s += "  off += i * " + uint_lit(st[size_t(d)]) + ";\n";
    else
      s += "  off += (i % " + uint_lit(shape[size_t(d)]) + ") * " + uint_lit(st[size_t(d)]) +
           "; i /= " + uint_lit(shape[size_t(d)]) + ";\n";
  }
  return s + "  return off;\n}\n";
}

namespace {

const char* kTree = R"(shared float red[gl_WorkGroupSize.x];
shared uint redi[gl_WorkGroupSize.x];
float wg_sum(float v) {
  uint t = gl_LocalInvocationID.x;
  red[t] = v;
  barrier();
  for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1u) {
    if (t < s) red[t] += red[t + s];
    barrier();
  }
  float r = red[0];
  barrier();
  return r;
}
float wg_max(float v) {
  uint t = gl_LocalInvocationID.x;
  red[t] = v;
  barrier();
  for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1u) {
    if (t < s) red[t] = mn_max(red[t], red[t + s]);
    barrier();
  }
  float r = red[0];
  barrier();
  return r;
}
float wg_min(float v) { return -wg_max(-v); }
// (value, index) with the first index winning ties, as numpy and torch do.
uint wg_argmax(float v, uint i) {
  uint t = gl_LocalInvocationID.x;
  red[t] = v;
  redi[t] = i;
  barrier();
  for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1u) {
    if (t < s) {
      float o = red[t + s];
      uint oi = redi[t + s];
      if (o > red[t] || (o == red[t] && oi < redi[t]) || (isnan(o) && !isnan(red[t]))) { red[t] = o; redi[t] = oi; }
    }
    barrier();
  }
  uint r = redi[0];
  barrier();
  return r;
}
)";

}  // namespace

const char* workgroup_reductions_glsl() { return kTree; }

void emit_reduce(Emitter& e) {
  const Node& core = e.g.node(e.k.core);
  const Shape& xs = e.g.node(core.inputs.at(0)).shape;
  size_t rank = xs.size();
  Op op = core.op;
  if (op == Op::Sample) {
    emit_sample(e);
    return;
  }
  // Reduced axes of operand 0.
  std::vector<int64_t> red_axes;
  Shape vs = xs;  // the shape whose axes red_axes/kept name (a view of x for group norm)
  bool norm = op == Op::LayerNorm || op == Op::RmsNorm || op == Op::BatchNorm || op == Op::GroupNorm;
  bool per_row_loss = op == Op::CrossEntropy || op == Op::CrossEntropyIndex;
  bool elem_loss = op == Op::MseLoss || op == Op::L1Loss || op == Op::BceWithLogits;
  bool loss = per_row_loss || elem_loss;
  bool reduce_rows = loss && core.attrs.reduction != Reduction::None;  // one workgroup walks every row
  if (op == Op::Softmax || op == Op::LogSoftmax || op == Op::ArgMax) {
    red_axes = {norm_axis(core.attrs.axes.at(0), rank)};
  } else if (per_row_loss || (elem_loss && !reduce_rows)) {
    if (rank > 0) red_axes = {int64_t(rank) - 1};
  } else if (norm) {
    // statistic groups: rows of the last axis (layer/rms), channels (batch) or contiguous (sample, group)
    // blocks, seen as rows of a [N*G, rest] view (group)
    if (op == Op::GroupNorm)
      vs = {xs[0] * core.attrs.ints.at(0), numel(xs) / (xs[0] * core.attrs.ints.at(0))};
    if (op == Op::BatchNorm) {
      for (size_t d = 0; d < rank; ++d)
        if (d != 1) red_axes.push_back(int64_t(d));
    } else {
      red_axes = {int64_t(vs.size()) - 1};
    }
  } else if (elem_loss || core.attrs.axes.empty()) {
    for (size_t d = 0; d < rank; ++d) red_axes.push_back(int64_t(d));
  } else {
    for (int64_t a : core.attrs.axes) red_axes.push_back(norm_axis(a, rank));
  }
  std::sort(red_axes.begin(), red_axes.end());
  red_axes.erase(std::unique(red_axes.begin(), red_axes.end()), red_axes.end());
  std::vector<int64_t> kept;
  for (size_t d = 0; d < vs.size(); ++d)
    if (!std::binary_search(red_axes.begin(), red_axes.end(), int64_t(d))) kept.push_back(int64_t(d));
  int64_t C = 1, R = 1;
  for (int64_t d : red_axes) C *= vs[size_t(d)];
  for (int64_t d : kept) R *= vs[size_t(d)];
  // A batch-reduced loss over short rows (class scores): one thread per row, each walking its row alone, then
  // one tree over the threads. Walking the rows in order with a tree per row cost 60 µs for a 32×10 batch on
  // an H200 (4 trees of 6 barriers per row); longer rows keep the tree per row.
  const bool row_per_thread = per_row_loss && reduce_rows && C <= 256;
  const RowGeometry geo{op, vs, red_axes, kept, C, R, reduce_rows, row_per_thread};
  if (const int64_t chunks = reduce_chunks(geo, core, e.caps)) {
    emit_reduce_split(e, geo, chunks);
    return;
  }

  e.decls += kTree;
  e.decls += offset_fn("row_base", vs, kept);
  e.decls += offset_fn("row_off", vs, red_axes);
  std::string X = e.operand_fn(0);
  std::string T = core.inputs.size() > 1 && op != Op::CrossEntropyIndex && !norm ? e.operand_fn(1) : "";
  const Shape& os = core.shape;
  std::string epi = e.region_fn(e.k.root, e.k.epilogue, e.g.node(e.k.root).shape, e.k.core);
  auto write = [&](const std::string& idx, const std::string& v) {
    return e.store(e.k.root, idx, epi + "(" + idx + ", " + v + ")");
  };
  std::string Cs = uint_lit(C), Rs = uint_lit(R);
  std::string loop = row_per_thread ? "for (uint r = 0u; r < " + Cs + "; ++r)"
                                    : "for (uint r = t; r < " + Cs + "; r += gl_WorkGroupSize.x)";
  auto wg = [&](const std::string& f, const std::string& v) {
    return row_per_thread ? v : f + "(" + v + ")";
  };
  std::string b = "  uint t = gl_LocalInvocationID.x;\n";
  if (!reduce_rows) {
    b += "  uint o = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;\n  if (o >= " + Rs +
         ") return;\n";
  }
  b += "  uint base = row_base(o_PLACEHOLDER);\n";
  std::string row;  // per-row body; `base` is the row's first element
  switch (op) {
    case Op::Sum:
    case Op::Mean:
    case Op::Max:
    case Op::Min: {
      std::string init = op == Op::Max   ? "uintBitsToFloat(0xFF800000u)"
                         : op == Op::Min ? "uintBitsToFloat(0x7F800000u)"
                                         : "0.0";
      std::string acc = op == Op::Max ? "a = mn_max(a, x);" : op == Op::Min ? "a = mn_min(a, x);" : "a += x;";
      std::string fin = op == Op::Max ? "wg_max(a)" : op == Op::Min ? "wg_min(a)" : "wg_sum(a)";
      row += "  float a = " + init + ";\n  " + loop + " { float x = " + X + "(base + row_off(r)); " + acc +
             " }\n";
      row += "  a = " + fin + ";\n";
      if (op == Op::Mean) row += "  a /= " + float_lit(double(C)) + ";\n";
      row += "  if (t == 0u) " + write("o", "a") + "\n";
      break;
    }
    case Op::Variance: {
      row += "  float a = 0.0;\n  " + loop + " a += " + X + "(base + row_off(r));\n";
      row += "  float mu = wg_sum(a) / " + float_lit(double(C)) + ";\n  float q = 0.0;\n";
      row += "  " + loop + " { float d = " + X + "(base + row_off(r)) - mu; q += d * d; }\n";
      row += "  q = wg_sum(q) / " +
             float_lit(double(C - (core.attrs.ints.empty() ? 0 : core.attrs.ints[0]))) +
             ";\n  if (t == 0u) " + write("o", "q") + "\n";
      break;
    }
    case Op::ArgMax: {
      row += "  float a = uintBitsToFloat(0xFF800000u);\n  uint ai = 0xFFFFFFFFu;\n";
      row += "  " + loop + " { float x = " + X +
             "(base + row_off(r)); if (ai == 0xFFFFFFFFu || x > a || (isnan(x) && !isnan(a))) { a = x; ai = "
             "r; } }\n";
      row += "  uint w = wg_argmax(ai == 0xFFFFFFFFu ? uintBitsToFloat(0xFF800000u) : a, ai);\n";
      row += "  if (t == 0u) " + write("o", "float(w)") + "\n";
      break;
    }
    case Op::Softmax:
    case Op::LogSoftmax: {
      row += "  float m = uintBitsToFloat(0xFF800000u);\n  " + loop + " m = mn_max(m, " + X +
             "(base + row_off(r)));\n";
      row +=
          "  m = wg_max(m);\n  float s = 0.0;\n  " + loop + " s += exp(" + X + "(base + row_off(r)) - m);\n";
      row += "  s = wg_sum(s);\n";
      std::string y = op == Op::Softmax ? "exp(x - m) / s" : "x - m - log(s)";
      row += "  " + loop + " {\n    uint f = base + row_off(r);\n    float x = " + X + "(f);\n    " +
             write("f", y) + "\n  }\n";
      break;
    }
    case Op::CrossEntropy: {
      // -sum t*log_softmax(x) = (max + log sum exp(x - max)) * sum t - sum t*x
      row += "  float m = uintBitsToFloat(0xFF800000u);\n  " + loop + " m = mn_max(m, " + X +
             "(base + row_off(r)));\n";
      row += "  m = " + wg("wg_max", "m") + ";\n  float s = 0.0, st = 0.0, stx = 0.0;\n";
      row += "  " + loop + " { uint f = base + row_off(r); float x = " + X + "(f); float tt = " + T +
             "(f); s += exp(x - m); st += tt; stx += tt * x; }\n";
      row += "  s = " + wg("wg_sum", "s") + "; st = " + wg("wg_sum", "st") +
             "; stx = " + wg("wg_sum", "stx") + ";\n";
      row += "  float l = (m + log(s)) * st - stx;\n  float w = 1.0;\n";
      break;
    }
    case Op::CrossEntropyIndex: {
      NodeId labels = core.inputs.at(1);
      int64_t ignore = core.attrs.ints.empty() ? -100 : core.attrs.ints[0];
      row += "  int lab = int(" + e.load(labels, "o_PLACEHOLDER") + ");\n";
      row += "  float m = uintBitsToFloat(0xFF800000u);\n  " + loop + " m = mn_max(m, " + X +
             "(base + row_off(r)));\n";
      row += "  m = " + wg("wg_max", "m") + ";\n  float s = 0.0;\n  " + loop + " s += exp(" + X +
             "(base + row_off(r)) - m);\n";
      row += "  s = " + wg("wg_sum", "s") + ";\n";
      row += "  float w = lab == " + std::to_string(ignore) + " ? 0.0 : 1.0;\n";
      row += "  float l = w == 0.0 ? 0.0 : (lab < 0 || lab >= " + std::to_string(C) +
             " ? uintBitsToFloat(0x7FC00000u) : m + log(s) - " + X + "(base + uint(lab) * row_off(1u)));\n";
      break;
    }
    case Op::MseLoss:
    case Op::L1Loss:
    case Op::BceWithLogits: {
      std::string f = op == Op::MseLoss  ? "(x - y) * (x - y)"
                      : op == Op::L1Loss ? "abs(x - y)"
                                         : "max(x, 0.0) - x * y + log(1.0 + exp(-abs(x)))";
      if (!reduce_rows) {
        row += "  " + loop + " {\n    uint f = base + row_off(r);\n    float x = " + X + "(f), y = " + T +
               "(f);\n    " + write("f", f) + "\n  }\n";
      } else {
        row += "  float a = 0.0;\n  " + loop + " { uint f = base + row_off(r); float x = " + X +
               "(f), y = " + T + "(f); a += " + f + "; }\n";
        row += "  float l = wg_sum(a);\n  float w = " + float_lit(double(C)) + ";\n";
      }
      break;
    }
    case Op::LayerNorm:
    case Op::RmsNorm:
    case Op::BatchNorm:
    case Op::GroupNorm: {
      // two passes for the statistics (mean, then the centred sum of squares), a third writes the result
      bool centre = op != Op::RmsNorm, running = op == Op::BatchNorm && !core.attrs.flag_a;
      std::string n = float_lit(double(C));
      if (running) {
        row += "  float mu = " + e.operand_fn(3) + "(o);\n  float var = " + e.operand_fn(4) + "(o);\n";
      } else {
        row += "  float mu = 0.0;\n";
        if (centre)
          row += "  float a = 0.0;\n  " + loop + " a += " + X + "(base + row_off(r));\n  mu = wg_sum(a) / " +
                 n + ";\n";
        row +=
            "  float q = 0.0;\n  " + loop + " { float d = " + X + "(base + row_off(r)) - mu; q += d * d; }\n";
        row += "  float var = wg_sum(q) / " + n + ";\n";
      }
      row += "  float rstd = 1.0 / sqrt(var + " + float_lit(core.attrs.reals.at(0)) + ");\n";
      row += "  " + loop + " {\n    uint f = base + row_off(r);\n    " + write("f", norm_affine(e, core, X)) +
             "\n  }\n";
      break;
    }
    default:
      throw GraphError("[codegen] expected a reduction op, got " + std::string(op_name(op)) + " at node '" +
                       node_label(e.g, e.k.core) + "'");
  }
  auto replace_all = [](std::string s, const std::string& from, const std::string& to) {
    for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
      s.replace(p, from.size(), to);
    return s;
  };
  if (!reduce_rows) {
    if (per_row_loss) row += "  if (t == 0u) " + write("o", "l") + "\n";
    b += row;
    b = replace_all(b, "o_PLACEHOLDER", "o");
    e.out.grid = element_grid(R, 1, e.caps);
  } else {
    // The whole loss in one workgroup: rows in order, so the sum is deterministic.
    b = "  uint t = gl_LocalInvocationID.x;\n  float total = 0.0, count = 0.0;\n";
    std::string rows = row_per_thread ? "for (uint o = t; o < " + Rs + "; o += gl_WorkGroupSize.x)"
                                      : "for (uint o = 0u; o < " + Rs + "; ++o)";
    b += "  " + rows + " {\n  uint base = row_base(o);\n" + replace_all(row, "o_PLACEHOLDER", "o");
    b += "  total += l; count += w;\n  }\n";
    if (row_per_thread) b += "  total = wg_sum(total); count = wg_sum(count);\n";
    std::string v = core.attrs.reduction == Reduction::Mean ? "total / count" : "total";
    b += "  if (t == 0u) " + write("0u", v) + "\n";
    e.out.grid = {1, 1, 1};
  }
  (void)os;
  e.out.spec_constants = {e.wg()};
  e.finish("layout(local_size_x_id = 0) in;\n", b);
}

}  // namespace meganeura::codegen
