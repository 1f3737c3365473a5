// Matmul with an epilogue: C[b] = op(A[b]) · op(B[b]) with transposes by attribute and broadcast batch
// dimensions. Large M: square output tiles staged through shared memory, one output per thread. M up to
// gemv_max_m: a workgroup per output column splits K across its threads (inference with a few rows).
#include <algorithm>

#include "meganeura/codegen/emit.hpp"

namespace meganeura::codegen {

namespace {

// Element offset of operand `x` (a [.., R, C] matrix) for output batch index z, broadcasting batch dims.
std::string batch_base_fn(const std::string& name, const Shape& xs, const Shape& out) {
  size_t ob = out.size() - 2, xb = xs.size() - 2;
  int64_t mat = xs[xs.size() - 1] * xs[xs.size() - 2];
  std::string s = "uint " + name + "(uint z) {\n  uint rest = z;\n  uint off = 0u;\n";
  int64_t stride = mat;
  for (size_t d = ob; d-- > 0;) {
    std::string c = "c" + std::to_string(d);
    s += "  uint " + c + " = rest % " + uint_lit(out[d]) + "; rest /= " + uint_lit(out[d]) + ";\n";
    size_t shift = ob - xb;
    if (d >= shift && xs[d - shift] != 1) {
      s += "  off += " + c + " * " + uint_lit(stride) + ";\n";
    }
    if (d >= shift) stride *= xs[d - shift];
  }
  return s + "  return off;\n}\n";
}

}  // namespace

void emit_matmul(Emitter& e) {
  const Node& mm = e.g.node(e.k.core);
  NodeId a = mm.inputs.at(0), bnode = mm.inputs.at(1);
  const Shape& as = e.g.node(a).shape;
  const Shape& bs = e.g.node(bnode).shape;
  const Shape& os = mm.shape;
  if (as.size() < 2 || bs.size() < 2 || os.size() < 2)
    throw GraphError("[codegen] expected matmul operands of rank >= 2, got " + shape_str(as) + " and " +
                     shape_str(bs) + " at node '" + node_label(e.g, e.k.core) + "'");
  bool ta = mm.attrs.flag_a, tb = mm.attrs.flag_b;
  int64_t M = os[os.size() - 2], N = os[os.size() - 1];
  int64_t K = ta ? as[as.size() - 2] : as[as.size() - 1];
  int64_t batch = numel(os) / std::max<int64_t>(1, M * N);

  e.decls += batch_base_fn("a_base", as, os);
  e.decls += batch_base_fn("b_base", bs, os);
  std::string ai = ta ? "base + k * " + uint_lit(M) + " + m" : "base + m * " + uint_lit(K) + " + k";
  std::string bi = tb ? "base + n * " + uint_lit(K) + " + k" : "base + k * " + uint_lit(N) + " + n";
  e.decls += "float ldA(uint base, uint m, uint k) { return " + e.load(a, ai) + "; }\n";
  e.decls += "float ldB(uint base, uint k, uint n) { return " + e.load(bnode, bi) + "; }\n";
  std::string epi = e.region_fn(e.k.root, e.k.epilogue, os, e.k.core);
  std::string write = "    uint ix = z * " + uint_lit(M * N) + " + m * " + uint_lit(N) + " + n;\n    " +
                      e.store(e.k.root, "ix", epi + "(ix, acc)") + "\n";

  uint32_t max_x = e.caps.max_workgroup_count[0] ? e.caps.max_workgroup_count[0] : 65535;
  if (M <= int64_t(e.opt.gemv_max_m) && N <= int64_t(max_x)) {
    uint32_t wg = e.opt.workgroup;
    e.decls += "shared float red[gl_WorkGroupSize.x];\n";
    std::string b;
    b += "  uint t = gl_LocalInvocationID.x;\n  uint n = gl_WorkGroupID.x;\n  uint z = gl_WorkGroupID.z;\n";
    b += "  uint ab = a_base(z), bb = b_base(z);\n";
    b += "  float accs[" + std::to_string(M) + "];\n";
    b += "  for (uint m = 0u; m < " + uint_lit(M) + "; ++m) accs[m] = 0.0;\n";
    b += "  for (uint k = t; k < " + uint_lit(K) + "; k += gl_WorkGroupSize.x) {\n    float bv = ldB(bb, k, n);\n";
    b += "    for (uint m = 0u; m < " + uint_lit(M) + "; ++m) accs[m] += ldA(ab, m, k) * bv;\n  }\n";
    b += "  for (uint m = 0u; m < " + uint_lit(M) + "; ++m) {\n    red[t] = accs[m];\n    barrier();\n";
    b += "    for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1u) {\n      if (t < s) red[t] += red[t + s];\n      barrier();\n    }\n";
    b += "    if (t == 0u) {\n      float acc = red[0];\n  " + write + "    }\n    barrier();\n  }\n";
    e.out.spec_constants = {wg};
    e.out.variant = "matmul.gemv";
    e.out.grid = {uint32_t(N), 1, uint32_t(batch)};
    e.finish("layout(local_size_x_id = 0) in;\n", b);
    return;
  }
  uint32_t ts = e.opt.matmul_tile;
  e.decls += "layout(constant_id = 0) const uint TS = 16;\nshared float As[TS][TS];\nshared float Bs[TS][TS];\n";
  std::string b;
  b += "  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;\n";
  b += "  uint n = gl_WorkGroupID.x * TS + tx;\n  uint m = gl_WorkGroupID.y * TS + ty;\n  uint z = gl_WorkGroupID.z;\n";
  b += "  uint ab = a_base(z), bb = b_base(z);\n  float acc = 0.0;\n";
  b += "  for (uint k0 = 0u; k0 < " + uint_lit(K) + "; k0 += TS) {\n";
  b += "    uint ka = k0 + tx, kb = k0 + ty;\n";
  b += "    As[ty][tx] = (m < " + uint_lit(M) + " && ka < " + uint_lit(K) + ") ? ldA(ab, m, ka) : 0.0;\n";
  b += "    Bs[ty][tx] = (kb < " + uint_lit(K) + " && n < " + uint_lit(N) + ") ? ldB(bb, kb, n) : 0.0;\n";
  b += "    barrier();\n    for (uint kk = 0u; kk < TS; ++kk) acc += As[ty][kk] * Bs[kk][tx];\n    barrier();\n  }\n";
  b += "  if (m < " + uint_lit(M) + " && n < " + uint_lit(N) + ") {\n" + write + "  }\n";
  e.out.spec_constants = {ts, ts};
  e.out.variant = "matmul.tiled";
  e.out.grid = {uint32_t((N + ts - 1) / ts), uint32_t((M + ts - 1) / ts), uint32_t(batch)};
  e.finish("layout(local_size_x_id = 0, local_size_y_id = 1) in;\n", b);
}

}  // namespace meganeura::codegen
