// Convolution as an implicit GEMM. Each of the three ops is C[m][n] = sum_k A(m, k) · B(k, n) per group
// (grid z), where A and B are read straight from the NCHW tensors by index arithmetic (padding, stride
// and dilation become bounds tests; nothing is unfolded into memory):
//
//   op                 M (rows)          N (columns)       K (reduction)     A(m, k)            B(k, n)
//   Conv2d             N·OH·OW pixels    Cout/g            Cin/g·KH·KW       x at the window    w
//   Conv2dGradInput    N·H·W pixels      Cin/g             Cout/g·KH·KW      dy at the tap      w
//   Conv2dGradWeight   Cout/g            Cin/g·KH·KW       N·OH·OW           dy                 x at the
//   window
//
// A strided input gradient is one GEMM per residue class of input positions (grid z = group · classes +
// class): each class receives a fixed subset of the taps, so no tap the stride skips is visited.
//
// A workgroup of 16×16 threads computes a BM×BN output tile, each thread (BM/16)×(BN/16) outputs held in
// registers; BK-deep slices of A and B are staged through shared memory (rows padded by one float so
// that column-wise stores do not collide in banks). Loads are ordered so that neighbouring threads read
// neighbouring addresses of the tensor that has them, and outputs are assigned so that neighbouring
// threads write neighbouring addresses. The epilogue (bias, activation, ...) runs on each output before
// its store, exactly as in the matmul template.
#include <algorithm>

#include "meganeura/codegen/emit.hpp"

namespace meganeura::codegen {

namespace {

struct Geom {
  int64_t n, cin, h, w, cout, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups;
  int64_t cig() const { return cin / groups; }
  int64_t cog() const { return cout / groups; }
};

// The three tensors' shapes come from wherever each op has them: x [N, Cin, H, W], w [Cout, Cin/g, KH, KW],
// y [N, Cout, OH, OW].
Geom geometry(const Graph& g, const Node& c) {
  const Shape* xs = nullptr;
  const Shape* ws = nullptr;
  const Shape* ys = nullptr;
  const Shape& in0 = g.node(c.inputs.at(0)).shape;
  const Shape& in1 = g.node(c.inputs.at(1)).shape;
  switch (c.op) {
    case Op::Conv2d: xs = &in0, ws = &in1, ys = &c.shape; break;
    case Op::Conv2dGradInput: ys = &in0, ws = &in1, xs = &c.shape; break;
    default: xs = &in0, ys = &in1, ws = &c.shape; break;
  }
  const auto& a = c.attrs.ints;
  return {(*xs)[0], (*xs)[1], (*xs)[2], (*xs)[3], (*ws)[0], (*ws)[2], (*ws)[3], (*ys)[2],
          (*ys)[3], a.at(0),  a.at(1),  a.at(2),  a.at(3),  a.at(4),  a.at(5),  a.at(6)};
}

std::string u(int64_t v) { return uint_lit(v); }
std::string i(int64_t v) { return std::to_string(v); }

// GLSL statements splitting `flat` into named coordinates, last one fastest: split("m", {"n","oy","ox"},
// {N, OH, OW}) declares uint n, oy, ox.
std::string split(const std::string& flat, const std::vector<std::string>& names,
                  const std::vector<int64_t>& dims) {
  std::string s = "  uint rest_" + flat + " = " + flat + ";\n";
  for (size_t d = names.size(); d-- > 0;) {
    if (d == 0) {
      s += "  uint " + names[d] + " = rest_" + flat + ";\n";
    } else {
      s += "  uint " + names[d] + " = rest_" + flat + " % " + u(dims[d]) + "; rest_" + flat +
           " /= " + u(dims[d]) + ";\n";
    }
  }
  return s;
}

// Statements computing int iy, ix of the input window cell (oy, ox, ky, kx) and returning 0 outside it.
std::string window_cell(const Geom& g) {
  return "  int iy = int(oy * " + u(g.sh) + " + ky * " + u(g.dh) + ") - " + i(g.ph) + ";\n" +
         "  int ix = int(ox * " + u(g.sw) + " + kx * " + u(g.dw) + ") - " + i(g.pw) + ";\n" +
         "  if (iy < 0 || iy >= " + i(g.h) + " || ix < 0 || ix >= " + i(g.w) + ") return 0.0;\n";
}

int64_t tile_for(int64_t extent) { return extent >= 64 ? 64 : extent >= 32 ? 32 : 16; }

std::string uint_array(const std::string& name, const std::vector<int64_t>& v) {
  std::string s = "const uint " + name + "[" + std::to_string(v.size()) + "] = uint[](";
  for (size_t j = 0; j < v.size(); ++j) s += (j ? ", " : "") + u(v[j]);
  return s + ");\n";
}

// One axis of a strided input gradient split into residue classes: input positions p with
// (p + pad) mod stride == r receive exactly the taps t with (t · dilation) mod stride == r. Per class: the
// first position, how many positions, and the list of taps (padded to `taps` entries).
struct Classes {
  std::vector<int64_t> first, count, ntaps, tap;
};

Classes classes_of(int64_t size, int64_t taps, int64_t stride, int64_t pad, int64_t dil) {
  Classes c;
  for (int64_t r = 0; r < stride; ++r) {
    const int64_t p0 = ((r - pad) % stride + stride) % stride;
    c.first.push_back(p0);
    c.count.push_back(p0 < size ? (size - p0 + stride - 1) / stride : 0);
    int64_t n = 0;
    for (int64_t t = 0; t < taps; ++t)
      if ((t * dil) % stride == r) c.tap.push_back(t), ++n;
    for (int64_t j = n; j < taps; ++j) c.tap.push_back(0);
    c.ntaps.push_back(n);
  }
  return c;
}

int64_t max_of(const std::vector<int64_t>& v) { return *std::max_element(v.begin(), v.end()); }

}  // namespace

void emit_conv(Emitter& e) {
  const Node& c = e.g.node(e.k.core);
  const Geom g = geometry(e.g, c);
  const NodeId in0 = c.inputs[0], in1 = c.inputs[1];
  const int64_t cig = g.cig(), cog = g.cog(), kk = g.kh * g.kw;
  int64_t M = 0, N = 0, K = 0;
  bool a_m_fast = true, out_m_fast = true;  // which index neighbouring threads walk
  int64_t classes = 1;                      // residue classes of a strided input gradient
  std::string lda, ldb, out;
  std::string extent;  // GLSL declaring Mz, Kz: this z's rows and reduction length
  const std::string ydy =
      "(((nb * " + u(g.cout) + " + z * " + u(cog) + " + co) * " + u(g.oh) + " + oy) * " + u(g.ow) + " + ox)";
  switch (c.op) {
    case Op::Conv2d:
      M = g.n * g.oh * g.ow, N = cog, K = cig * kk;
      lda = split("m", {"nb", "oy", "ox"}, {g.n, g.oh, g.ow}) +
            split("k", {"ci", "ky", "kx"}, {cig, g.kh, g.kw}) + window_cell(g) + "  return " +
            e.load(in0, "((nb * " + u(g.cin) + " + z * " + u(cig) + " + ci) * " + u(g.h) + " + uint(iy)) * " +
                            u(g.w) + " + uint(ix)") +
            ";\n";
      ldb = "  return " + e.load(in1, "(z * " + u(cog) + " + n) * " + u(K) + " + k") + ";\n";
      out = split("m", {"nb", "oy", "ox"}, {g.n, g.oh, g.ow}) + "  uint co = n;\n  return " + ydy + ";\n";
      break;
    case Op::Conv2dGradInput:
      if (g.sh > 1 || g.sw > 1) {
        // One GEMM per residue class (grid z = group · classes + class), so that no tap is visited that
        // the stride skips: M and K depend on the class and come from baked tables.
        const Classes cy = classes_of(g.h, g.kh, g.sh, g.ph, g.dh),
                      cx = classes_of(g.w, g.kw, g.sw, g.pw, g.dw);
        classes = g.sh * g.sw;
        M = g.n * max_of(cy.count) * max_of(cx.count), N = cig, K = cog * max_of(cy.ntaps) * max_of(cx.ntaps);
        e.decls += uint_array("IY0", cy.first) + uint_array("HC", cy.count) + uint_array("KYN", cy.ntaps) +
                   uint_array("KYL", cy.tap) + uint_array("IX0", cx.first) + uint_array("WC", cx.count) +
                   uint_array("KXN", cx.ntaps) + uint_array("KXL", cx.tap);
        const std::string cls = "  uint grp = z / " + u(classes) + ", ry = (z % " + u(classes) + ") / " +
                                u(g.sw) + ", rx = z % " + u(g.sw) + ";\n";
        const std::string pix =
            "  uint jx = m % WC[rx], jy = (m / WC[rx]) % HC[ry], nb = m / (WC[rx] * HC[ry]);\n"
            "  uint iy = IY0[ry] + jy * " +
            u(g.sh) + ", ix = IX0[rx] + jx * " + u(g.sw) + ";\n";
        const std::string tap =
            "  uint b = k % KXN[rx], a = (k / KXN[rx]) % KYN[ry], co = k / (KXN[rx] * KYN[ry]);\n"
            "  uint ky = KYL[ry * " +
            u(g.kh) + " + a], kx = KXL[rx * " + u(g.kw) + " + b];\n";
        const std::string grp_dy = "(((nb * " + u(g.cout) + " + grp * " + u(cog) + " + co) * " + u(g.oh) +
                                   " + oy) * " + u(g.ow) + " + ox)";
        lda = cls + pix + tap + "  int ty = int(iy + " + u(g.ph) + ") - int(ky * " + u(g.dh) + ");\n" +
              "  int tx = int(ix + " + u(g.pw) + ") - int(kx * " + u(g.dw) + ");\n" +
              "  if (ty < 0 || tx < 0) return 0.0;\n" + "  uint oy = uint(ty) / " + u(g.sh) +
              ", ox = uint(tx) / " + u(g.sw) + ";\n" + "  if (oy >= " + u(g.oh) + " || ox >= " + u(g.ow) +
              ") return 0.0;\n" + "  return " + e.load(in0, grp_dy) + ";\n";
        ldb = cls + tap + "  return " +
              e.load(in1, "((grp * " + u(cog) + " + co) * " + u(cig) + " + n) * " + u(kk) + " + ky * " +
                              u(g.kw) + " + kx") +
              ";\n";
        out = cls + pix + "  return ((nb * " + u(g.cin) + " + grp * " + u(cig) + " + n) * " + u(g.h) +
              " + iy) * " + u(g.w) + " + ix;\n";
        extent = "  uint ry = (z % " + u(classes) + ") / " + u(g.sw) + ", rx = z % " + u(g.sw) + ";\n" +
                 "  uint Mz = " + u(g.n) + " * HC[ry] * WC[rx], Kz = " + u(cog) + " * KYN[ry] * KXN[rx];\n";
        break;
      }
      // dx[n, ci, iy, ix] = sum over (co, ky, kx) of dy[n, co, oy, ox] w[co, ci, ky, kx] where
      // oy·sh = iy + ph − ky·dh (only when that divides evenly), likewise ox.
      M = g.n * g.h * g.w, N = cig, K = cog * kk;
      lda = split("m", {"nb", "iy", "ix"}, {g.n, g.h, g.w}) +
            split("k", {"co", "ky", "kx"}, {cog, g.kh, g.kw}) + "  int ty = int(iy + " + u(g.ph) +
            ") - int(ky * " + u(g.dh) + ");\n" + "  int tx = int(ix + " + u(g.pw) + ") - int(kx * " +
            u(g.dw) + ");\n" + "  if (ty < 0 || tx < 0) return 0.0;\n" + "  uint oy = uint(ty) / " + u(g.sh) +
            ", ox = uint(tx) / " + u(g.sw) + ";\n" + "  if (oy * " + u(g.sh) + " != uint(ty) || ox * " +
            u(g.sw) + " != uint(tx) || oy >= " + u(g.oh) + " || ox >= " + u(g.ow) + ") return 0.0;\n" +
            "  return " + e.load(in0, ydy) + ";\n";
      ldb = split("k", {"co", "ky", "kx"}, {cog, g.kh, g.kw}) + "  return " +
            e.load(in1, "((z * " + u(cog) + " + co) * " + u(cig) + " + n) * " + u(kk) + " + ky * " + u(g.kw) +
                            " + kx") +
            ";\n";
      out = split("m", {"nb", "iy", "ix"}, {g.n, g.h, g.w}) + "  return ((nb * " + u(g.cin) + " + z * " +
            u(cig) + " + n) * " + u(g.h) + " + iy) * " + u(g.w) + " + ix;\n";
      break;
    case Op::Conv2dGradWeight:
      // dw[co, ci, ky, kx] = sum over (n, oy, ox) of dy[n, co, oy, ox] x[n, ci, window].
      M = cog, N = cig * kk, K = g.n * g.oh * g.ow;
      lda = split("k", {"nb", "oy", "ox"}, {g.n, g.oh, g.ow}) + "  uint co = m;\n  return " +
            e.load(in1, ydy) + ";\n";
      ldb = split("k", {"nb", "oy", "ox"}, {g.n, g.oh, g.ow}) +
            split("n", {"ci", "ky", "kx"}, {cig, g.kh, g.kw}) + window_cell(g) + "  return " +
            e.load(in0, "((nb * " + u(g.cin) + " + z * " + u(cig) + " + ci) * " + u(g.h) + " + uint(iy)) * " +
                            u(g.w) + " + uint(ix)") +
            ";\n";
      out = "  return (z * " + u(cog) + " + m) * " + u(N) + " + n;\n";
      a_m_fast = false, out_m_fast = false;
      break;
    default:
      throw GraphError("[codegen] expected a convolution op, got " + std::string(op_name(c.op)) +
                       " at node '" + node_label(e.g, e.k.core) + "'");
  }
  e.decls += "float ldA(uint z, uint m, uint k) {\n" + lda + "}\n";
  e.decls += "float ldB(uint z, uint k, uint n) {\n" + ldb + "}\n";
  e.decls += "uint out_ix(uint z, uint m, uint n) {\n" + out + "}\n";
  const std::string epi = e.region_fn(e.k.root, e.k.epilogue, e.g.node(e.k.root).shape, e.k.core);

  if (extent.empty()) extent = "  const uint Mz = " + u(M) + ", Kz = " + u(K) + ";\n";
  const int64_t BM = tile_for(M), BN = tile_for(N), BK = 16, RM = BM / 16, RN = BN / 16;
  e.decls += "const uint BM = " + u(BM) + ", BN = " + u(BN) + ", BK = " + u(BK) + ";\n";
  e.decls += "shared float As[BK][BM + 1u];\nshared float Bs[BK][BN + 1u];\n";
  std::string b;
  b += "  uint t = gl_LocalInvocationIndex;\n";
  b += out_m_fast ? "  uint tm = gl_LocalInvocationID.x, tn = gl_LocalInvocationID.y;\n"
                  : "  uint tm = gl_LocalInvocationID.y, tn = gl_LocalInvocationID.x;\n";
  b += "  uint m0 = gl_WorkGroupID.x * BM, n0 = gl_WorkGroupID.y * BN, z = gl_WorkGroupID.z;\n" + extent;
  b += "  float acc[" + i(RM) + "][" + i(RN) + "];\n";
  b += "  for (uint i = 0u; i < " + u(RM) + "; ++i)\n    for (uint j = 0u; j < " + u(RN) +
       "; ++j) acc[i][j] = 0.0;\n";
  b += "  for (uint k0 = 0u; k0 < Kz; k0 += BK) {\n";
  b += "    for (uint e = t; e < BM * BK; e += 256u) {\n";
  b += a_m_fast ? "      uint r = e % BM, q = e / BM;\n" : "      uint q = e % BK, r = e / BK;\n";
  b += "      uint m = m0 + r, k = k0 + q;\n";
  b += "      As[q][r] = (m < Mz && k < Kz) ? ldA(z, m, k) : 0.0;\n    }\n";
  b += "    for (uint e = t; e < BN * BK; e += 256u) {\n";
  b += "      uint q = e % BK, r = e / BK;\n";  // every B operand is contiguous (in runs) along k
  b += "      uint n = n0 + r, k = k0 + q;\n";
  b += "      Bs[q][r] = (n < " + u(N) + " && k < Kz) ? ldB(z, k, n) : 0.0;\n    }\n";
  b += "    barrier();\n";
  b += "    for (uint q = 0u; q < BK; ++q) {\n";
  b += "      float a[" + i(RM) + "], bv[" + i(RN) + "];\n";
  b += "      for (uint i = 0u; i < " + u(RM) + "; ++i) a[i] = As[q][tm + 16u * i];\n";
  b += "      for (uint j = 0u; j < " + u(RN) + "; ++j) bv[j] = Bs[q][tn + 16u * j];\n";
  b += "      for (uint i = 0u; i < " + u(RM) + "; ++i)\n";
  b += "        for (uint j = 0u; j < " + u(RN) + "; ++j) acc[i][j] += a[i] * bv[j];\n";
  b += "    }\n    barrier();\n  }\n";
  b += "  for (uint i = 0u; i < " + u(RM) + "; ++i)\n    for (uint j = 0u; j < " + u(RN) + "; ++j) {\n";
  b += "      uint m = m0 + tm + 16u * i, n = n0 + tn + 16u * j;\n";
  b += "      if (m >= Mz || n >= " + u(N) + ") continue;\n";
  b += "      uint ix = out_ix(z, m, n);\n      " + e.store(e.k.root, "ix", epi + "(ix, acc[i][j])") +
       "\n    }\n";
  e.out.grid = {uint32_t((M + BM - 1) / BM), uint32_t((N + BN - 1) / BN), uint32_t(g.groups * classes)};
  e.finish("layout(local_size_x = 16, local_size_y = 16) in;\n", b);
}

}  // namespace meganeura::codegen
