// The two-pass form of a row reduction (reduce_impl.hpp). A 49152-class cross-entropy over 128 rows ran in
// one workgroup; here each of the rows' chunks gets a workgroup for its statistics, and the combining pass
// reads a handful of partials per row.
#include <algorithm>

#include "meganeura/codegen/reduce_impl.hpp"

namespace meganeura::codegen {

namespace {

bool elementwise_result(Op op) {
  return op == Op::Softmax || op == Op::LogSoftmax || op == Op::LayerNorm || op == Op::RmsNorm ||
         op == Op::BatchNorm || op == Op::GroupNorm;
}

bool centred(Op op) {
  return op == Op::Variance || op == Op::LayerNorm || op == Op::BatchNorm || op == Op::GroupNorm;
}

// Partial statistics per (row, chunk).
uint32_t partial_width(Op op) {
  switch (op) {
    case Op::Softmax:
    case Op::LogSoftmax:
    case Op::CrossEntropyIndex: return 2;  // max, sum of exp(x - max)
    case Op::CrossEntropy: return 4;       // ... sum t, sum t*x
    default: return centred(op) ? 2 : 1;   // mean, centred sum of squares
  }
}

}  // namespace

int64_t reduce_chunks(const RowGeometry& r, const Node& core, const runtime::DeviceCaps& caps) {
  const Op op = r.op;
  const bool elem_loss = op == Op::MseLoss || op == Op::L1Loss || op == Op::BceWithLogits;
  if (op == Op::ArgMax || (op == Op::BatchNorm && !core.attrs.flag_a) || (elem_loss && !r.reduce_rows))
    return 0;
  const int64_t units = kernels::target_workgroups(caps);  // compute units (a default where unknown)
  if (r.reduce_rows) {
    if (r.row_per_thread || r.R * r.C <= kMaxRowChunk) return 0;
  } else if (r.R >= units || r.C <= kMaxRowChunk) {
    return 0;
  }
  int64_t chunks = std::max((units + r.R - 1) / r.R, (r.C + kMaxRowChunk - 1) / kMaxRowChunk);
  chunks = std::min(chunks, (r.C + kMinRowChunk - 1) / kMinRowChunk);
  return std::max<int64_t>(chunks, 1);
}

void emit_reduce_split(Emitter& e, const RowGeometry& r, int64_t chunks) {
  const Node& core = e.g.node(e.k.core);
  const Op op = r.op;
  const int64_t chunk = (r.C + chunks - 1) / chunks;
  const uint32_t W = partial_width(op);
  const uint64_t scratch_bytes = uint64_t(r.R * chunks) * W * 4;
  const std::string Cs = uint_lit(r.C), Rs = uint_lit(r.R), Ps = uint_lit(chunks), CHs = uint_lit(chunk),
                    Ws = uint_lit(W);
  const std::string ninf = "uintBitsToFloat(0xFF800000u)", pinf = "uintBitsToFloat(0x7F800000u)";
  const bool per_row_loss = op == Op::CrossEntropy || op == Op::CrossEntropyIndex;
  auto geometry = [&](Emitter& x) {
    x.decls += workgroup_reductions_glsl();
    x.decls += offset_fn("row_base", r.vs, r.kept);
    x.decls += offset_fn("row_off", r.vs, r.red_axes);
  };
  // Workgroup `id` of a (row, chunk) launch: row o, chunk p, elements [lo, hi) of the row.
  const std::string chunk_of_group =
      "  uint id = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;\n  if (id >= " +
      uint_lit(r.R * chunks) + ") return;\n  uint o = id / " + Ps + ", p = id % " + Ps +
      ";\n  uint lo = p * " + CHs + ", hi = min(" + Cs + ", lo + " + CHs + ");\n  uint base = row_base(o);\n";
  const std::string loop = "for (uint r = lo + t; r < hi; r += gl_WorkGroupSize.x)";

  // ---- pass 1: partial statistics
  Emitter z(e.g, e.kg, e.k, e.caps, e.opt);
  z.variant = e.variant;
  geometry(z);
  {
    const std::string X = z.operand_fn(0);
    const std::string at = X + "(base + row_off(r))";
    const uint32_t sb = z.bind_scratch(scratch_bytes, true);
    auto put = [&](uint32_t j, const std::string& v) {
      return "b" + std::to_string(sb) + ".d[id * " + Ws + " + " + uint_lit(j) + "] = " + v + ";";
    };
    std::string b = "  uint t = gl_LocalInvocationID.x;\n" + chunk_of_group;
    std::string stats;
    switch (op) {
      case Op::Sum:
      case Op::Mean:
      case Op::Max:
      case Op::Min: {
        const std::string init = op == Op::Max ? ninf : op == Op::Min ? pinf : "0.0";
        const std::string acc = op == Op::Max   ? "a = max(a, x);"
                                : op == Op::Min ? "a = min(a, x);"
                                                : "a += x;";
        const std::string fin = op == Op::Max ? "wg_max" : op == Op::Min ? "wg_min" : "wg_sum";
        b += "  float a = " + init + ";\n  " + loop + " { float x = " + at + "; " + acc + " }\n  a = " + fin +
             "(a);\n";
        stats = put(0, "a");
        break;
      }
      case Op::MseLoss:
      case Op::L1Loss:
      case Op::BceWithLogits: {
        const std::string T = z.operand_fn(1);
        const std::string f = op == Op::MseLoss  ? "(x - y) * (x - y)"
                              : op == Op::L1Loss ? "abs(x - y)"
                                                 : "max(x, 0.0) - x * y + log(1.0 + exp(-abs(x)))";
        b += "  float a = 0.0;\n  " + loop + " { uint f = base + row_off(r); float x = " + X +
             "(f), y = " + T + "(f); a += " + f + "; }\n  a = wg_sum(a);\n";
        stats = put(0, "a");
        break;
      }
      case Op::Softmax:
      case Op::LogSoftmax:
      case Op::CrossEntropyIndex:
      case Op::CrossEntropy: {
        b += "  float m = " + ninf + ";\n  " + loop + " m = max(m, " + at + ");\n  m = wg_max(m);\n";
        if (op == Op::CrossEntropy) {
          const std::string T = z.operand_fn(1);
          b += "  float s = 0.0, st = 0.0, stx = 0.0;\n  " + loop +
               " { uint f = base + row_off(r); float x = " + X + "(f); float tt = " + T +
               "(f); s += exp(x - m); st += tt; stx += tt * x; }\n";
          b += "  s = wg_sum(s); st = wg_sum(st); stx = wg_sum(stx);\n";
          stats = put(2, "st") + " " + put(3, "stx") + " ";
        } else {
          b += "  float s = 0.0;\n  " + loop + " s += exp(" + at + " - m);\n  s = wg_sum(s);\n";
        }
        // a chunk of -inf only contributes nothing (its exp(x - m) are NaN)
        b += "  if (isinf(m) && m < 0.0) s = 0.0;\n";
        stats = put(0, "m") + " " + put(1, "s") + " " + stats;
        break;
      }
      case Op::RmsNorm:
        b += "  float q = 0.0;\n  " + loop + " { float x = " + at + "; q += x * x; }\n  q = wg_sum(q);\n";
        stats = put(0, "q");
        break;
      case Op::Variance:
      case Op::LayerNorm:
      case Op::BatchNorm:
      case Op::GroupNorm:
        b += "  float a = 0.0;\n  " + loop + " a += " + at + ";\n  float mu = wg_sum(a) / float(hi - lo);\n";
        b +=
            "  float q = 0.0;\n  " + loop + " { float d = " + at + " - mu; q += d * d; }\n  q = wg_sum(q);\n";
        stats = put(0, "mu") + " " + put(1, "q");
        break;
      default:
        throw GraphError("[codegen] expected a reduction with a two-pass form, got " +
                         std::string(op_name(op)) + " at node '" + node_label(e.g, e.k.core) + "'");
    }
    b += "  if (t == 0u) { " + stats + " }\n";
    z.out.label = "partials " + e.out.label;
    z.out.grid = element_grid(r.R * chunks, 1, e.caps);
    z.out.spec_constants = {z.wg()};
    z.out.variant = "reduce.partials";
    z.finish("layout(local_size_x_id = 0) in;\n", b);
  }
  e.before.push_back(std::move(z.out));

  // ---- pass 2: combine the partials of row o (chunk order), then write
  geometry(e);
  const std::string X = e.operand_fn(0);
  const uint32_t sb = e.bind_scratch(scratch_bytes, false);
  const std::string S = "b" + std::to_string(sb) + ".d[(o * " + Ps + " + q) * " + Ws + " + ";
  auto part = [&](uint32_t j) { return S + uint_lit(j) + "]"; };
  const std::string over = "for (uint q = 0u; q < " + Ps + "; ++q)";
  std::string combine;
  switch (op) {
    case Op::Sum:
    case Op::Mean:
    case Op::MseLoss:
    case Op::L1Loss:
    case Op::BceWithLogits:
      combine = "  float a = 0.0;\n  " + over + " a += " + part(0) + ";\n";
      if (op == Op::Mean) combine += "  a /= " + float_lit(double(r.C)) + ";\n";
      if (op != Op::Sum && op != Op::Mean) combine += "  float l = a, w = " + float_lit(double(r.C)) + ";\n";
      break;
    case Op::Max:
    case Op::Min:
      combine = "  float a = " + std::string(op == Op::Max ? ninf : pinf) + ";\n  " + over +
                " a = " + (op == Op::Max ? "max" : "min") + "(a, " + part(0) + ");\n";
      break;
    case Op::Softmax:
    case Op::LogSoftmax:
    case Op::CrossEntropyIndex:
    case Op::CrossEntropy:
      combine = "  float m = " + ninf + ";\n  " + over + " m = max(m, " + part(0) + ");\n  float s = 0.0;\n";
      combine += "  " + over + " { float mq = " + part(0) + "; s += " + part(1) +
                 " * (mq == m ? 1.0 : exp(mq - m)); }\n";
      if (op == Op::CrossEntropy) {
        combine += "  float st = 0.0, stx = 0.0;\n  " + over + " { st += " + part(2) + "; stx += " + part(3) +
                   "; }\n";
        combine += "  float l = (m + log(s)) * st - stx;\n  float w = 1.0;\n";
      } else if (op == Op::CrossEntropyIndex) {
        const int64_t ignore = core.attrs.ints.empty() ? -100 : core.attrs.ints[0];
        combine += "  int lab = int(" + e.load(core.inputs.at(1), "o") + ");\n";
        combine += "  float w = lab == " + std::to_string(ignore) + " ? 0.0 : 1.0;\n";
        combine += "  float l = w == 0.0 ? 0.0 : (lab < 0 || lab >= " + std::to_string(r.C) +
                   " ? uintBitsToFloat(0x7FC00000u) : m + log(s) - " + X +
                   "(row_base(o) + uint(lab) * row_off(1u)));\n";
      }
      break;
    case Op::RmsNorm:
      combine = "  float q2 = 0.0;\n  " + over + " q2 += " + part(0) + ";\n  float mu = 0.0, var = q2 / " +
                float_lit(double(r.C)) + ";\n";
      break;
    default:  // Chan et al.'s pairwise update of (count, mean, centred sum of squares), chunk by chunk
      combine = "  float n = 0.0, mu = 0.0, m2 = 0.0;\n  " + over + " {\n    float nb = float(min(" + Cs +
                ", (q + 1u) * " + CHs + ") - q * " + CHs + ");\n    float d = " + part(0) +
                " - mu, nn = n + nb;\n    mu += d * nb / nn;\n" + "    m2 += " + part(1) +
                " + d * d * n * nb / nn;\n    n = nn;\n  }\n";
      if (op == Op::Variance)
        combine += "  float a = m2 / " +
                   float_lit(double(r.C - (core.attrs.ints.empty() ? 0 : core.attrs.ints[0]))) + ";\n";
      else
        combine += "  float var = m2 / " + float_lit(double(r.C)) + ";\n";
      break;
  }
  std::string epi = e.region_fn(e.k.root, e.k.epilogue, e.g.node(e.k.root).shape, e.k.core);
  auto write = [&](const std::string& idx, const std::string& v) {
    return e.store(e.k.root, idx, epi + "(" + idx + ", " + v + ")");
  };
  std::string b = "  uint t = gl_LocalInvocationID.x;\n";
  if (r.reduce_rows) {
    // one workgroup: a thread per row, then one tree (fixed order)
    b += "  float total = 0.0, count = 0.0;\n  for (uint o = t; o < " + Rs +
         "; o += gl_WorkGroupSize.x) {\n" + combine +
         "  total += l; count += w;\n  }\n  total = wg_sum(total); count = wg_sum(count);\n";
    const std::string v = core.attrs.reduction == Reduction::Mean ? "total / count" : "total";
    b += "  if (t == 0u) " + write("0u", v) + "\n";
    e.out.grid = {1, 1, 1};
  } else if (elementwise_result(op)) {
    b += chunk_of_group + combine;
    if (op == Op::Softmax || op == Op::LogSoftmax) {
      const std::string y = op == Op::Softmax ? "exp(x - m) / s" : "x - m - log(s)";
      b += "  " + loop + " {\n    uint f = base + row_off(r);\n    float x = " + X + "(f);\n    " +
           write("f", y) + "\n  }\n";
    } else {
      b += "  float rstd = 1.0 / sqrt(var + " + float_lit(core.attrs.reals.at(0)) + ");\n";
      b += "  " + loop + " {\n    uint f = base + row_off(r);\n    " + write("f", norm_affine(e, core, X)) +
           "\n  }\n";
    }
    e.out.grid = element_grid(r.R * chunks, 1, e.caps);
  } else {
    b += "  uint o = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;\n  if (o >= " + Rs +
         ") return;\n" + combine;
    b += "  if (t == 0u) " + write("o", per_row_loss ? "l" : "a") + "\n";
    e.out.grid = element_grid(r.R, 1, e.caps);
  }
  e.out.spec_constants = {e.wg()};
  e.out.variant = "reduce.combine";
  e.finish("layout(local_size_x_id = 0) in;\n", b);
}

}  // namespace meganeura::codegen
