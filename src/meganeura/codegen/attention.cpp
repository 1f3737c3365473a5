// Flash attention (online softmax; no score matrix is ever stored). Three kernels, chosen by the ops an
// Attention kernel computes (the core and its siblings, see Kernel::siblings):
//   forward   {Attention, AttentionLse}: a workgroup per (query tile of BR rows, batch·head); K/V tiles of
//             BC keys stream through shared memory; per row a running max m and sum l; writes
//             O = acc / l and lse = m + log l (either may be absent).
//   dQ        {AttentionGradQ}: a workgroup per (query tile, batch·head); P = exp(s - lse) recomputed per
//             K/V tile, dS = P (dO·Vᵀ - delta), dQ = scale · dS K, with delta = rowsum(dO ∘ O).
//   dK, dV    {AttentionGradK, AttentionGradV}: a workgroup per (key tile, batch·query head, query chunk)
//   walks
//             the query tiles of its chunk: dV += Pᵀ dO, dK += scale · dSᵀ Q. With one query head per KV head
//             and one chunk it stores dK and dV; otherwise it stores its part into the kernel's scratch and a
//             second dispatch sums the parts of each element in a fixed order (grouped-query sums without
//             atomics, deterministic). A workgroup per (key tile, batch·KV head) walking every query of the
//             group ran 12 workgroups for SmolLM2's S = 128, at 3× the forward's time.
//   rows      {Attention, AttentionLse} with at most kRowsMaxQueries queries (decode): a workgroup per
//   (query,
//             batch·head), its threads spread over the keys: every score into shared memory, the row's max
//             and sum by a tree reduction, then P·V with the threads spread over (key part, output column).
//             The tiled forward walks the keys one tile at a time in a handful of workgroups there (one query
//             row of a 16-row tile busy): 0.19 ms a layer for SmolLM2 at 512 keys on the H200.
// Tiles are square, the largest that fits shared memory (≤ 32), halved (to 16) while the grid has fewer
// workgroups than the device has compute units. Shapes, scale, causal offset and the mask's broadcast strides
// are baked in as literals.
#include <algorithm>

#include "meganeura/codegen/emit.hpp"
#include "meganeura/kernels/matmul.hpp"

namespace meganeura::codegen {

namespace {

struct AttnKernel {
  NodeId out, lse, dq, dk, dv;  // the values this kernel writes (invalid when absent)
};

AttnKernel attention_outputs(const Emitter& e) {
  AttnKernel a;
  std::vector<NodeId> all{e.k.core};
  all.insert(all.end(), e.k.siblings.begin(), e.k.siblings.end());
  for (NodeId n : all) {
    switch (e.g.node(n).op) {
      case Op::Attention: a.out = n; break;
      case Op::AttentionLse: a.lse = n; break;
      case Op::AttentionGradQ: a.dq = n; break;
      case Op::AttentionGradK: a.dk = n; break;
      case Op::AttentionGradV: a.dv = n; break;
      default:
        throw GraphError("[codegen] expected an attention op in an attention kernel, got " +
                         std::string(op_name(e.g.node(n).op)) + " at node '" + node_label(e.g, n) + "'");
    }
  }
  return a;
}

// The query at flat offset `off`: a load, or the rotation of a Rope fused into the kernel (schedule.cpp fuses
// a query's RoPE that only this forward kernel reads, so the rotated queries are never stored).
std::string query_load(Emitter& e, NodeId q, const std::string& off) {
  if (!e.k.fused(q))
    return e.g.node(q).op == Op::Fill ? float_lit(e.g.node(q).attrs.reals.at(0)) : e.load(q, off);
  if (e.decls.find("mn_rope_query(") == std::string::npos) {
    const std::string fn = rope_function(e, q, "mn_rope_query");
    e.decls += fn;
  }
  return "mn_rope_query(" + off + ")";
}

std::string ilit(int64_t v) { return v < 0 ? "(" + std::to_string(v) + ")" : std::to_string(v); }

// Invocations of a tiled attention workgroup for square tiles of `t`.
uint32_t attention_workgroup(int64_t t) { return t >= 32 ? 128 : 64; }

// Floats of shared memory each kernel needs for square tiles of `t`.
// Rows of Q, K, V and dO are padded by one word (AT_DP, AT_DVP), and so are the forward's P rows (AT_BCP).
int64_t shared_floats(int which, int64_t t, int64_t d, int64_t dv) {
  d += 1;
  dv += 1;
  switch (which) {
    case 0:  // Q, K, V, P, row stats, seen, the softmax's partial maxima and sums (a workgroup each)
      return t * d + t * d + t * dv + t * (t + 1) + 3 * t + 1 + 2 * attention_workgroup(t);
    case 1: return t * d + t * dv + t * d + t * dv + t * t + 2 * t;       // Q, dO, K, V, dS, lse+delta
    default: return t * d + t * dv + t * d + t * dv + 2 * t * t + 2 * t;  // K, V, Q, dO, P, dS, lse+delta
  }
}

}  // namespace

namespace {

void emit_attention_body(Emitter& e, int64_t query_chunks, bool partial);
bool emit_attention_rows(Emitter& e);

// The square tile of kernel `which` (0 forward, 1 dQ, 2 dK/dV): the largest that fits shared memory (≤ 32),
// no larger than the sequences need, halved to 16 while the grid is short of the device's compute units.
int64_t attention_tile(const Emitter& e, int which) {
  const Node& core = e.g.node(e.k.core);
  const Shape &qs = e.g.node(core.inputs[0]).shape, &ks = e.g.node(core.inputs[1]).shape;
  const int64_t B = qs[0], HQ = qs[1], S = qs[2], D = qs[3], T = ks[2],
                DV = e.g.node(core.inputs[2]).shape[3];
  const int64_t budget =
      std::max<int64_t>(e.caps.max_shared_memory ? e.caps.max_shared_memory : 16384, 1024) / 4;
  const int64_t units = kernels::target_workgroups(e.caps);
  const int64_t rows = which == 2 ? T : S;
  int64_t tile = 32;
  while (tile > 4 && (shared_floats(which, tile, D, DV) > budget || tile / 2 >= std::max(S, T) ||
                      (tile > 16 && (rows + tile - 1) / tile * B * HQ < units)))
    tile /= 2;
  if (shared_floats(which, tile, D, DV) > budget)
    throw GraphError("[codegen] expected attention head sizes whose tiles fit in " +
                     std::to_string(budget * 4) + " bytes of shared memory, got D = " + std::to_string(D) +
                     ", Dv = " + std::to_string(DV) + " at node '" + node_label(e.g, e.k.core) + "'");
  return tile;
}

}  // namespace

void emit_attention(Emitter& e) {
  const Node& core = e.g.node(e.k.core);
  const AttnKernel out = attention_outputs(e);
  if ((out.out.valid() || out.lse.valid()) && emit_attention_rows(e)) return;
  if (out.out.valid() || out.lse.valid() || out.dq.valid()) {
    emit_attention_body(e, 1, false);
    return;
  }
  const Shape &qs = e.g.node(core.inputs[0]).shape, &ks = e.g.node(core.inputs[1]).shape;
  const int64_t B = qs[0], HQ = qs[1], S = qs[2], HKV = ks[1], T = ks[2];
  const int64_t tile = attention_tile(e, 2), units = kernels::target_workgroups(e.caps);
  const int64_t grid = (T + tile - 1) / tile * B * HQ, query_tiles = (S + tile - 1) / tile;
  const int64_t chunks = std::clamp<int64_t>((units + grid - 1) / grid, 1, query_tiles);
  if (HQ == HKV && chunks == 1) {
    emit_attention_body(e, 1, false);
    return;
  }
  // The parts into scratch, then a thread per element of dK and dV sums its HQ / HKV · chunks parts.
  Emitter z(e.g, e.kg, e.k, e.caps, e.opt);
  z.variant = e.variant;
  emit_attention_body(z, chunks, true);
  z.out.label = "parts " + e.out.label;
  z.out.variant = "attention.dkdv-parts";
  const Binding scratch = *std::find_if(z.out.bindings.begin(), z.out.bindings.end(),
                                        [](const Binding& b) { return b.kind == Binding::Scratch; });
  e.before.push_back(std::move(z.out));
  const int64_t parts = HQ / HKV * chunks;
  const int64_t nk = B * HKV * T * qs[3], nv = B * HKV * T * e.g.node(core.inputs[2]).shape[3];
  const uint32_t sb = e.bind_scratch(scratch.bytes, false);
  std::string m = "  uint i = " + flat_invocation() + ";\n";
  auto sum = [&](const std::string& first, int64_t n) {
    return "    float a = 0.0;\n    for (uint p = 0u; p < " + uint_lit(parts) + "; ++p) a += b" +
           std::to_string(sb) + ".d[" + first + " + p * " + uint_lit(n) + " + i];\n";
  };
  if (out.dk.valid())
    m += "  if (i < " + uint_lit(nk) + ") {\n" + sum("0u", nk) + "    " + e.store(out.dk, "i", "a") +
         "\n    return;\n  }\n";
  m += "  i -= " + uint_lit(nk) + ";\n";
  if (out.dv.valid())
    m += "  if (i < " + uint_lit(nv) + ") {\n" + sum(uint_lit(parts * nk), nv) + "    " +
         e.store(out.dv, "i", "a") + "\n  }\n";
  e.out.grid = element_grid(nk + nv, e.opt.workgroup, e.caps);
  e.out.spec_constants = {e.opt.workgroup};
  e.out.variant = "attention.dkdv-sum";
  e.finish("layout(local_size_x_id = 0) in;\n", m);
}

namespace {

// Queries per (batch, head) up to which the forward takes a workgroup per query row (decode, short drafts).
constexpr int64_t kRowsMaxQueries = 8;

// The forward for a few query rows (see the header); false, emitting nothing, where it does not apply (more
// rows, or the scores of a row do not fit shared memory).
bool emit_attention_rows(Emitter& e) {
  const Graph& g = e.g;
  const Node& core = g.node(e.k.core);
  const AttnKernel out = attention_outputs(e);
  const NodeId q = core.inputs[0], k = core.inputs[1], v = core.inputs[2];
  const NodeId mask = core.inputs.size() > 3 ? core.inputs[3] : NodeId{};
  const Shape &qs = g.node(q).shape, &ks = g.node(k).shape, &vs = g.node(v).shape;
  const int64_t B = qs[0], HQ = qs[1], S = qs[2], D = qs[3], HKV = ks[1], T = ks[2], DV = vs[3];
  const int64_t wg = 128, parts = std::max<int64_t>(1, wg / DV);
  const int64_t budget =
      std::max<int64_t>(e.caps.max_shared_memory ? e.caps.max_shared_memory : 16384, 1024) / 4;
  if (S > kRowsMaxQueries || D + T + wg + parts * DV > budget) return false;
  const bool causal = core.attrs.flag_a;
  auto ld = [&](NodeId n, const std::string& off) {
    const Node& nd = g.node(n);
    return nd.op == Op::Fill ? float_lit(nd.attrs.reals.at(0)) : e.load(n, off);
  };
  std::string& d = e.decls;
  d += "#define AT_HQ " + uint_lit(HQ) + "\n#define AT_G " + uint_lit(HQ / HKV) + "\n#define AT_HKV " +
       uint_lit(HKV) + "\n#define AT_S " + uint_lit(S) + "\n#define AT_T " + uint_lit(T) + "\n#define AT_D " +
       uint_lit(D) + "\n#define AT_DV " + uint_lit(DV) + "\n#define AT_WG " + uint_lit(wg) +
       "\n#define AT_PARTS " + uint_lit(parts) + "\n#define AT_SCALE " + float_lit(core.attrs.reals.at(0)) +
       "\n#define AT_NEG_INF uintBitsToFloat(0xFF800000u)\n";
  d += "float ldK(uint o) { return " + ld(k, "o") + "; }\n";
  d += "float ldV(uint o) { return " + ld(v, "o") + "; }\n";
  std::string mask_term = "0.0";
  if (mask.valid()) {
    const Shape& ms = g.node(mask).shape;
    const std::vector<int64_t> st = contiguous_strides(ms);
    const char* coord[4] = {"b", "h", "i", "j"};
    std::string off;
    for (size_t a = 0; a < ms.size(); ++a)
      if (ms[a] != 1)
        off += (off.empty() ? "" : " + ") + std::string(coord[a + 4 - ms.size()]) + " * " + uint_lit(st[a]);
    d += "float ldMask(uint b, uint h, uint i, uint j) { return " + ld(mask, off.empty() ? "0u" : off) +
         "; }\n";
    mask_term = "ldMask(b, h, i, j)";
  }
  d += "shared float q_s[AT_D];\nshared float p_s[AT_T];\nshared float red[AT_WG];\nshared float "
       "acc_s[AT_PARTS * AT_DV];\n";
  // A tree reduction of each thread's `v` over the workgroup with `op`; every thread gets the result.
  d += "float reduce_max(float v) {\n  uint tid = gl_LocalInvocationID.x;\n  red[tid] = v;\n  barrier();\n"
       "  for (uint s = AT_WG / 2u; s > 0u; s >>= 1u) {\n    if (tid < s) red[tid] = max(red[tid], red[tid + "
       "s]);\n"
       "    barrier();\n  }\n  float r = red[0];\n  barrier();\n  return r;\n}\n";
  d += "float reduce_sum(float v) {\n  uint tid = gl_LocalInvocationID.x;\n  red[tid] = v;\n  barrier();\n"
       "  for (uint s = AT_WG / 2u; s > 0u; s >>= 1u) {\n    if (tid < s) red[tid] += red[tid + s];\n"
       "    barrier();\n  }\n  float r = red[0];\n  barrier();\n  return r;\n}\n";
  std::string m;
  m += "  uint tid = gl_LocalInvocationID.x, i = gl_WorkGroupID.x, bh = gl_WorkGroupID.y;\n"
       "  uint b = bh / AT_HQ, h = bh % AT_HQ, bkh = b * AT_HKV + h / AT_G;\n"
       "  uint kbase = bkh * AT_T * AT_D, vbase = bkh * AT_T * AT_DV;\n";
  m += "  for (uint x = tid; x < AT_D; x += AT_WG) q_s[x] = " +
       query_load(e, q, "(bh * AT_S + i) * AT_D + x") + ";\n  barrier();\n";
  // Query i sees key j when j <= i + T - S (bottom-right aligned causal mask).
  m += causal ? "  uint kend = uint(clamp(int(i) + " + ilit(T - S + 1) + ", 0, int(AT_T)));\n"
              : "  uint kend = AT_T;\n";
  // A key the mask hides (-inf: cache rows past a sequence's length in decode) is skipped before its K row is
  // read, and its V row is never read: a step reads only the valid part of the cache.
  m += "  float mx = AT_NEG_INF;\n  for (uint j = tid; j < kend; j += AT_WG) {\n    float mk = " + mask_term +
       ";\n    if (mk == AT_NEG_INF) { p_s[j] = AT_NEG_INF; continue; }\n    float s = 0.0;\n"
       "    for (uint x = 0u; x < AT_D; ++x) s += q_s[x] * ldK(kbase + j * AT_D + x);\n"
       "    s = s * AT_SCALE + mk;\n    p_s[j] = s;\n    mx = max(mx, s);\n  }\n";
  m += "  mx = reduce_max(mx);\n";
  m += "  float sum = 0.0;\n  for (uint j = tid; j < kend; j += AT_WG) {\n"
       "    float p = mx == AT_NEG_INF ? 0.0 : exp(p_s[j] - mx);\n    p_s[j] = p;\n    sum += p;\n  }\n";
  m += "  float l = reduce_sum(sum);\n";  // its barriers also publish p_s
  if (out.out.valid()) {
    m += "  for (uint e = tid; e < AT_PARTS * AT_DV; e += AT_WG) {\n    uint part = e / AT_DV, dd = e % "
         "AT_DV;\n"
         "    float a = 0.0;\n    for (uint j = part; j < kend; j += AT_PARTS)\n"
         "      if (p_s[j] != 0.0) a += p_s[j] * ldV(vbase + j * AT_DV + dd);\n"
         "    acc_s[e] = a;\n  }\n  barrier();\n";
    m += "  for (uint dd = tid; dd < AT_DV; dd += AT_WG) {\n    float a = 0.0;\n"
         "    for (uint part = 0u; part < AT_PARTS; ++part) a += acc_s[part * AT_DV + dd];\n    " +
         e.store(out.out, "(bh * AT_S + i) * AT_DV + dd", "l > 0.0 ? a / l : 0.0") + "\n  }\n";
  }
  if (out.lse.valid())
    m += "  if (tid == 0u) " + e.store(out.lse, "bh * AT_S + i", "l > 0.0 ? mx + log(l) : AT_NEG_INF") + "\n";
  e.out.grid = {uint32_t(S), uint32_t(B * HQ), 1};
  e.out.spec_constants = {uint32_t(wg)};
  e.out.variant = "attention.rows";
  e.finish("layout(local_size_x_id = 0) in;\n", m);
  return true;
}

void emit_attention_body(Emitter& e, int64_t query_chunks, bool partial) {
  const Graph& g = e.g;
  const Node& core = g.node(e.k.core);
  const AttnKernel out = attention_outputs(e);
  const bool fwd = out.out.valid() || out.lse.valid();
  const int which = fwd ? 0 : out.dq.valid() ? 1 : 2;
  const NodeId q = core.inputs[0], k = core.inputs[1], v = core.inputs[2];
  const size_t mask_at = fwd ? 3 : 6;
  const NodeId mask = core.inputs.size() > mask_at ? core.inputs[mask_at] : NodeId{};
  const Shape &qs = g.node(q).shape, &ks = g.node(k).shape, &vs = g.node(v).shape;
  const int64_t B = qs[0], HQ = qs[1], S = qs[2], D = qs[3], HKV = ks[1], T = ks[2], DV = vs[3];
  const bool causal = core.attrs.flag_a;

  const int64_t tile = attention_tile(e, which);
  const uint32_t wg = attention_workgroup(tile);
  auto per_thread = [&](int64_t n) { return std::to_string((n + wg - 1) / wg); };

  // A Fill operand (the gradient of a sum, say) has no storage: it is a literal.
  auto ld = [&](NodeId n, const std::string& off) {
    const Node& nd = g.node(n);
    return nd.op == Op::Fill ? float_lit(nd.attrs.reals.at(0)) : e.load(n, off);
  };
  std::string& d = e.decls;
  d += "#define AT_HQ " + uint_lit(HQ) + "\n#define AT_HKV " + uint_lit(HKV) + "\n#define AT_G " +
       uint_lit(HQ / HKV) + "\n#define AT_S " + uint_lit(S) + "\n#define AT_T " + uint_lit(T) +
       "\n#define AT_D " + uint_lit(D) + "\n#define AT_DV " + uint_lit(DV) + "\n#define AT_BR " +
       uint_lit(tile) + "\n#define AT_BC " + uint_lit(tile) + "\n#define AT_WG " + uint_lit(wg) +
       "\n#define AT_SCALE " + float_lit(core.attrs.reals.at(0)) +
       // Shared rows padded by one word: a warp reads one column of 32 K rows (the score) or of 32 P rows
       // (the softmax); at a stride that is a multiple of 32 words all of them hit one bank.
       "\n#define AT_DP " + uint_lit(D + 1) + "\n#define AT_DVP " + uint_lit(DV + 1) + "\n#define AT_BCP " +
       uint_lit(tile + 1) + "\n#define AT_NEG_INF uintBitsToFloat(0xFF800000u)\n";
  // Query i sees key j when j <= i + T - S (bottom-right aligned causal mask), and j < T.
  d += "bool visible(uint i, uint j) { return j < AT_T" +
       (causal ? std::string(" && int(j) <= int(i) + ") + ilit(T - S) : std::string()) + "; }\n";
  d += "float ldQ(uint o) { return " + query_load(e, q, "o") + "; }\n";
  d += "float ldK(uint o) { return " + ld(k, "o") + "; }\n";
  d += "float ldV(uint o) { return " + ld(v, "o") + "; }\n";
  // The additive mask broadcast from [B, HQ, S, T].
  std::string mask_term = "0.0";
  if (mask.valid()) {
    const Shape& ms = g.node(mask).shape;
    const Shape full{B, HQ, S, T};
    std::vector<int64_t> st = contiguous_strides(ms);
    const char* coord[4] = {"b", "h", "i", "j"};
    std::string off;
    for (size_t a = 0; a < ms.size(); ++a) {
      size_t fa = a + 4 - ms.size();
      if (ms[a] == 1) continue;
      off += (off.empty() ? "" : " + ") + std::string(coord[fa]) + " * " + uint_lit(st[a]);
    }
    if (off.empty()) off = "0u";
    d += "float ldMask(uint b, uint h, uint i, uint j) { return " + ld(mask, off) + "; }\n";
    mask_term = "ldMask(b, h, i, j)";
  }

  // The per-thread accumulators (acc, acck, accv) are indexed by unrolled loops only: a rolled loop indexes
  // them at run time, which puts them in local memory (the H100's pipeline statistics said 64 bytes a
  // thread).
  e.extensions += "#extension GL_EXT_control_flow_attributes : require\n";
  std::string m;  // main body
  m += "  uint tid = gl_LocalInvocationID.x;\n";
  if (which != 2) m += "  uint qend = AT_S;\n";  // dK/dV: the end of the workgroup's query chunk
  // The scaled, masked score of query row r of Qs against key row c of Ks (query i, key j).
  // A key the mask hides (-inf) is skipped like a key past the causal edge: no product (the reference in
  // ops/attention.cpp agrees), and the forward skips whole hidden tiles, so a KV cache's unwritten rows cost
  // almost nothing.
  auto score_fn = [&]() {
    return "float score(uint b, uint h, uint r, uint c, uint i, uint j) {\n  const float mk = " + mask_term +
           ";\n  if (mk == AT_NEG_INF) return AT_NEG_INF;\n  float s = 0.0;\n"
           "  for (uint x = 0u; x < AT_D; ++x) s += Qs[r * AT_DP + x] * Ks[c * AT_DP + x];\n"
           "  return s * AT_SCALE + mk;\n}\n";
  };
  const std::string load_kv_tile =
      "    for (uint x = tid; x < AT_BC * AT_D; x += AT_WG) { uint c = x / AT_D, j = k0 + c;"
      " Ks[c * AT_DP + x % AT_D] = j < AT_T ? ldK(kbase + j * AT_D + x % AT_D) : 0.0; }\n"
      "    for (uint x = tid; x < AT_BC * AT_DV; x += AT_WG) { uint c = x / AT_DV, j = k0 + c;"
      " Vs[c * AT_DVP + x % AT_DV] = j < AT_T ? ldV(vbase + j * AT_DV + x % AT_DV) : 0.0; }\n";
  const std::string load_q_tile =
      "    for (uint x = tid; x < AT_BR * AT_D; x += AT_WG) { uint r = x / AT_D, i = q0 + r;"
      " Qs[r * AT_DP + x % AT_D] = i < qend ? ldQ(qbase + i * AT_D + x % AT_D) : 0.0; }\n";
  // Keys past the last one a causal query tile can see are skipped.
  const std::string key_end =
      causal ? "  uint kend = uint(clamp(int(q0 + AT_BR) - 1 + " + ilit(T - S) + " + 1, 0, int(AT_T)));\n"
             : "  uint kend = AT_T;\n";

  if (which == 0) {
    d +=
        "shared float Qs[AT_BR * AT_DP];\nshared float Ks[AT_BC * AT_DP];\nshared float Vs[AT_BC * AT_DVP];\n"
        "shared float Ps[AT_BR * AT_BCP];\nshared float m_s[AT_BR];\nshared float l_s[AT_BR];\nshared float "
        "a_s[AT_BR];\nshared uint seen_s;\nshared float red_s[AT_WG];\nshared float sum_s[AT_WG];\n"
        "#define AT_TPR " +
        uint_lit(wg / tile) + "\n";
    d += score_fn();
    const std::string no = per_thread(tile * DV);
    m += "  uint q0 = gl_WorkGroupID.x * AT_BR, bh = gl_WorkGroupID.y;\n  uint b = bh / AT_HQ, h = bh % "
         "AT_HQ;\n";
    m += "  uint qbase = bh * AT_S * AT_D, kbase = (b * AT_HKV + h / AT_G) * AT_T * AT_D;\n";
    m += "  uint vbase = (b * AT_HKV + h / AT_G) * AT_T * AT_DV, obase = bh * AT_S * AT_DV;\n";
    m += load_q_tile;
    m += "  if (tid < AT_BR) { m_s[tid] = AT_NEG_INF; l_s[tid] = 0.0; }\n";
    m += "  float acc[" + no + "];\n  [[unroll]] for (uint x = 0u; x < " + no + "u; ++x) acc[x] = 0.0;\n";
    m += key_end;
    // A tile whose every score is hidden (a cache's unwritten rows behind a -inf mask) changes neither the
    // running max and sum nor the accumulator: seen_s, read after the barrier by every thread alike, skips
    // it.
    m += "  for (uint k0 = 0u; k0 < kend; k0 += AT_BC) {\n    barrier();\n    if (tid == 0u) seen_s = 0u;\n" +
         load_kv_tile + "    barrier();\n";
    m += "    for (uint x = tid; x < AT_BR * AT_BC; x += AT_WG) {\n      uint r = x / AT_BC, c = x % AT_BC, "
         "i = q0 + r, j = k0 + c;\n"
         "      float sc = i < qend && visible(i, j) ? score(b, h, r, c, i, j) : AT_NEG_INF;\n"
         "      Ps[r * AT_BCP + c] = sc;\n      if (sc != AT_NEG_INF) seen_s = 1u;\n    }\n    barrier();\n  "
         "  if (seen_s == 0u) "
         "continue;\n";
    // Online softmax, AT_TPR threads a row (every thread of the workgroup): the row's max from per-thread
    // maxima, P = exp(s - max) and per-thread sums, then one thread a row rescales the running sum (and,
    // below, every thread the accumulator) by exp(m_old - m_new). A row with nothing visible yet keeps
    // max -inf and P = 0.
    m += "    uint sr = tid / AT_TPR, sub = tid % AT_TPR;\n    float pm = AT_NEG_INF;\n"
         "    for (uint c = sub; c < AT_BC; c += AT_TPR) pm = max(pm, Ps[sr * AT_BCP + c]);\n"
         "    red_s[tid] = pm;\n    barrier();\n"
         "    float mo = m_s[sr], mx = mo, ps = 0.0;\n"
         "    for (uint t = 0u; t < AT_TPR; ++t) mx = max(mx, red_s[sr * AT_TPR + t]);\n"
         "    for (uint c = sub; c < AT_BC; c += AT_TPR) {\n"
         "      float p = mx == AT_NEG_INF ? 0.0 : exp(Ps[sr * AT_BCP + c] - mx);\n"
         "      Ps[sr * AT_BCP + c] = p;\n      ps += p;\n    }\n"
         "    sum_s[tid] = ps;\n    barrier();\n"
         "    if (sub == 0u) {\n      float alpha = mx == AT_NEG_INF ? 1.0 : exp(mo - mx), sum = 0.0;\n"
         "      for (uint t = 0u; t < AT_TPR; ++t) sum += sum_s[sr * AT_TPR + t];\n"
         "      m_s[sr] = mx; l_s[sr] = l_s[sr] * alpha + sum; a_s[sr] = alpha;\n    }\n    barrier();\n";
    if (out.out.valid())
      m += "    [[unroll]] for (uint x = 0u; x < " + no +
           "u; ++x) {\n      uint e = tid + x * AT_WG;\n      if (e >= AT_BR * AT_DV) continue;\n"
           "      uint r = e / AT_DV, dd = e % AT_DV;\n      float o = acc[x] * a_s[r];\n"
           "      for (uint c = 0u; c < AT_BC; ++c) o += Ps[r * AT_BCP + c] * Vs[c * AT_DVP + dd];\n      "
           "acc[x] = o;\n    }\n";
    m += "  }\n  barrier();\n";
    if (out.out.valid())
      m += "  [[unroll]] for (uint x = 0u; x < " + no +
           "u; ++x) {\n    uint e = tid + x * AT_WG, r = e / AT_DV, i = q0 + r;\n"
           "    if (e >= AT_BR * AT_DV || i >= AT_S) continue;\n    float l = l_s[r];\n    " +
           e.store(out.out, "obase + i * AT_DV + e % AT_DV", "l > 0.0 ? acc[x] / l : 0.0") + "\n  }\n";
    if (out.lse.valid())
      m += "  if (tid < AT_BR && q0 + tid < AT_S) {\n    float l = l_s[tid];\n    " +
           e.store(out.lse, "bh * AT_S + q0 + tid", "l > 0.0 ? m_s[tid] + log(l) : AT_NEG_INF") + "\n  }\n";
    e.out.grid = {uint32_t((S + tile - 1) / tile), uint32_t(B * HQ), 1};
  } else {
    const NodeId dout = core.inputs[3], o = core.inputs[4], lse = core.inputs[5];
    d += "float ldDO(uint o) { return " + ld(dout, "o") + "; }\n";
    d += "float ldO(uint o) { return " + ld(o, "o") + "; }\n";
    d += "float ldLse(uint o) { return " + ld(lse, "o") + "; }\n";
    d += "shared float Qs[AT_BR * AT_DP];\nshared float dOs[AT_BR * AT_DVP];\nshared float Ks[AT_BC * "
         "AT_DP];\n"
         "shared float Vs[AT_BC * AT_DVP];\nshared float dSs[AT_BR * AT_BC];\nshared float lse_s[AT_BR];\n"
         "shared float dl_s[AT_BR];\n";
    if (which == 2) d += "shared float Ps[AT_BR * AT_BC];\n";
    d += score_fn();
    // Loads the query tile q0.. of head bh: Q, dO, lse and delta = rowsum(dO * O) per row.
    const std::string load_rows =
        load_q_tile +
        "    for (uint x = tid; x < AT_BR * AT_DV; x += AT_WG) { uint r = x / AT_DV, i = q0 + r;"
        " dOs[r * AT_DVP + x % AT_DV] = i < qend ? ldDO(obase + i * AT_DV + x % AT_DV) : 0.0; }\n    "
        "barrier();\n"
        "    if (tid < AT_BR) {\n      uint i = q0 + tid;\n      float dl = 0.0;\n"
        "      if (i < qend) for (uint x = 0u; x < AT_DV; ++x) dl += dOs[tid * AT_DVP + x] * ldO(obase + i * "
        "AT_DV + x);\n"
        "      lse_s[tid] = i < qend ? ldLse(bh * AT_S + i) : AT_NEG_INF;\n      dl_s[tid] = dl;\n    }\n";
    // P and dS of the tile pair; P = 0 where the key is hidden or the row sees no key at all.
    auto probs = [&](bool need_ds, bool keep_p) {
      std::string s =
          "    for (uint x = tid; x < AT_BR * AT_BC; x += AT_WG) {\n      uint r = x / AT_BC, c = x % AT_BC, "
          "i = q0 + r, j = k0 + c;\n"
          "      float p = 0.0, ds = 0.0;\n"
          "      if (i < qend && visible(i, j) && lse_s[r] != AT_NEG_INF) {\n"
          "        p = exp(score(b, h, r, c, i, j) - lse_s[r]);\n";
      if (need_ds)
        s += "        float dp = 0.0;\n        for (uint y = 0u; y < AT_DV; ++y) dp += dOs[r * AT_DVP + y] * "
             "Vs[c * AT_DVP + y];\n"
             "        ds = p * (dp - dl_s[r]);\n";
      s += "      }\n";
      if (keep_p) s += "      Ps[x] = p;\n";
      if (need_ds) s += "      dSs[x] = ds;\n";
      return s + "    }\n    barrier();\n";
    };
    if (which == 1) {
      const std::string nq = per_thread(tile * D);
      m += "  uint q0 = gl_WorkGroupID.x * AT_BR, bh = gl_WorkGroupID.y;\n  uint b = bh / AT_HQ, h = bh % "
           "AT_HQ;\n";
      m += "  uint qbase = bh * AT_S * AT_D, kbase = (b * AT_HKV + h / AT_G) * AT_T * AT_D;\n";
      m += "  uint vbase = (b * AT_HKV + h / AT_G) * AT_T * AT_DV, obase = bh * AT_S * AT_DV;\n";
      m += load_rows;
      m += "  float acc[" + nq + "];\n  [[unroll]] for (uint x = 0u; x < " + nq + "u; ++x) acc[x] = 0.0;\n";
      m += key_end;
      m += "  for (uint k0 = 0u; k0 < kend; k0 += AT_BC) {\n    barrier();\n" + load_kv_tile +
           "    barrier();\n";
      m += probs(true, false);
      m += "    [[unroll]] for (uint x = 0u; x < " + nq +
           "u; ++x) {\n      uint e = tid + x * AT_WG;\n      if (e >= AT_BR * AT_D) continue;\n"
           "      uint r = e / AT_D, dd = e % AT_D;\n      float a = acc[x];\n"
           "      for (uint c = 0u; c < AT_BC; ++c) a += dSs[r * AT_BC + c] * Ks[c * AT_DP + dd];\n      "
           "acc[x] = a;\n    }\n  }\n";
      m += "  [[unroll]] for (uint x = 0u; x < " + nq +
           "u; ++x) {\n    uint e = tid + x * AT_WG, i = q0 + e / AT_D;\n"
           "    if (e >= AT_BR * AT_D || i >= AT_S) continue;\n    " +
           e.store(out.dq, "qbase + i * AT_D + e % AT_D", "AT_SCALE * acc[x]") + "\n  }\n";
      e.out.grid = {uint32_t((S + tile - 1) / tile), uint32_t(B * HQ), 1};
    } else {
      const std::string nk = per_thread(tile * D), nv = per_thread(tile * DV);
      const bool want_k = out.dk.valid(), want_v = out.dv.valid();
      const int64_t per = ((S + tile - 1) / tile + query_chunks - 1) / query_chunks;  // query tiles per chunk
      m += "  uint k0 = gl_WorkGroupID.x * AT_BC, bh = gl_WorkGroupID.y, qc = gl_WorkGroupID.z;\n"
           "  uint b = bh / AT_HQ, h = bh % AT_HQ, kh = h / AT_G, bkh = b * AT_HKV + kh;\n";
      m += "  uint kbase = bkh * AT_T * AT_D, vbase = bkh * AT_T * AT_DV;\n";
      m += "  uint qbase = bh * AT_S * AT_D, obase = bh * AT_S * AT_DV;\n";
      m += "  uint qlo = qc * " + uint_lit(per * tile) + ", qend = min(AT_S, qlo + " + uint_lit(per * tile) +
           ");\n";
      m += load_kv_tile;
      if (want_k)
        m += "  float acck[" + nk + "];\n  [[unroll]] for (uint x = 0u; x < " + nk +
             "u; ++x) acck[x] = 0.0;\n";
      if (want_v)
        m += "  float accv[" + nv + "];\n  [[unroll]] for (uint x = 0u; x < " + nv +
             "u; ++x) accv[x] = 0.0;\n";
      // The first query that a causal mask lets see key k0.
      m +=
          causal ? "  uint qstart = uint(max(int(k0) - " + ilit(T - S) + ", 0));\n" : "  uint qstart = 0u;\n";
      m += "  for (uint q0 = max(qstart, qlo); q0 < qend; q0 += AT_BR) {\n    barrier();\n" + load_rows +
           "    barrier();\n";
      m += probs(want_k, true);
      if (want_v)
        m += "    [[unroll]] for (uint x = 0u; x < " + nv +
             "u; ++x) {\n      uint e = tid + x * AT_WG;\n      if (e >= AT_BC * AT_DV) continue;\n"
             "      uint c = e / AT_DV, dd = e % AT_DV;\n      float a = accv[x];\n"
             "      for (uint r = 0u; r < AT_BR; ++r) a += Ps[r * AT_BC + c] * dOs[r * AT_DVP + dd];\n      "
             "accv[x] = a;\n    }\n";
      if (want_k)
        m += "    [[unroll]] for (uint x = 0u; x < " + nk +
             "u; ++x) {\n      uint e = tid + x * AT_WG;\n      if (e >= AT_BC * AT_D) continue;\n"
             "      uint c = e / AT_D, dd = e % AT_D;\n      float a = acck[x];\n"
             "      for (uint r = 0u; r < AT_BR; ++r) a += dSs[r * AT_BC + c] * Qs[r * AT_DP + dd];\n      "
             "acck[x] = a;\n    }\n";
      m += "  }\n";
      // Partial: part p = (query head in the group, chunk) of element o goes to scratch [p * n + o], dV's
      // after all of dK's.
      const int64_t parts = HQ / HKV * query_chunks, n_k = B * HKV * T * D, n_v = B * HKV * T * DV;
      std::string sb;
      if (partial) {
        sb = "b" + std::to_string(e.bind_scratch(uint64_t(parts * (n_k + n_v)) * 4, true));
        m += "  uint part = (h % AT_G) * " + uint_lit(query_chunks) + " + qc;\n";
      }
      auto put = [&](NodeId node, const std::string& off, const std::string& v, int64_t n, int64_t first) {
        if (!partial) return e.store(node, off, v);
        return sb + ".d[" + uint_lit(first) + " + part * " + uint_lit(n) + " + " + off + "] = " + v + ";";
      };
      if (want_k)
        m += "  [[unroll]] for (uint x = 0u; x < " + nk +
             "u; ++x) {\n    uint e = tid + x * AT_WG, j = k0 + e / AT_D;\n"
             "    if (e >= AT_BC * AT_D || j >= AT_T) continue;\n    " +
             put(out.dk, "kbase + j * AT_D + e % AT_D", "AT_SCALE * acck[x]", n_k, 0) + "\n  }\n";
      if (want_v)
        m += "  [[unroll]] for (uint x = 0u; x < " + nv +
             "u; ++x) {\n    uint e = tid + x * AT_WG, j = k0 + e / AT_DV;\n"
             "    if (e >= AT_BC * AT_DV || j >= AT_T) continue;\n    " +
             put(out.dv, "vbase + j * AT_DV + e % AT_DV", "accv[x]", n_v, parts * n_k) + "\n  }\n";
      e.out.grid = {uint32_t((T + tile - 1) / tile), uint32_t(B * HQ), uint32_t(query_chunks)};
    }
  }
  e.out.spec_constants = {wg};
  e.finish("layout(local_size_x_id = 0) in;\n", m);
}

}  // namespace

}  // namespace meganeura::codegen
