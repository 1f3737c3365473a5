// Flash attention (online softmax; no score matrix is ever stored). Three kernels, chosen by the ops an
// Attention kernel computes (the core and its siblings, see Kernel::siblings):
//   forward   {Attention, AttentionLse}: a workgroup per (query tile of BR rows, batch·head); K/V tiles of
//             BC keys stream through shared memory; per row a running max m and sum l; writes
//             O = acc / l and lse = m + log l (either may be absent).
//   dQ        {AttentionGradQ}: a workgroup per (query tile, batch·head); P = exp(s - lse) recomputed per
//             K/V tile, dS = P (dO·Vᵀ - delta), dQ = scale · dS K, with delta = rowsum(dO ∘ O).
//   dK, dV    {AttentionGradK, AttentionGradV}: a workgroup per (key tile, batch·query head, query chunk)
//             walks the query tiles of its chunk: dV += Pᵀ dO, dK += scale · dSᵀ Q. With one query head per
//             KV head and one chunk it stores dK and dV; otherwise it stores its part into the kernel's
//             scratch and a second dispatch sums the parts of each element in a fixed order (grouped-query
//             sums without atomics, deterministic). A workgroup per (key tile, batch·KV head) walking every
//             query of the group ran 12 workgroups for SmolLM2's S = 128, at 3× the forward's time.
//   rows      {Attention, AttentionLse} with at most kRowsMaxQueries queries (decode): a workgroup of 512
//             threads per (query, batch·head), spread over the keys: every score into shared memory (a
//             thread's K row read in chunks of loads issued together), the row's max and sum by subgroup or
//             tree reductions, then P·V with the threads spread over (key part, four output columns), eight
//             keys an iteration. The tiled forward walks the keys one tile at a time in a handful of
//             workgroups there (one query row of a 16-row tile busy): 0.19 ms a layer for SmolLM2 at 512 keys
//             on the H200.
// A decode step's cache writes join its forward kernel, rows or tiled (schedule.cpp fold_cache_writes): the
// new K/V rows are read from the writes' values (the keys rotated in the kernel) and the first workgroup of
// each KV head stores them into the cache; no dispatch and no barrier between the QKV product and attention.
// The three tiled kernels are register-tiled: 4 to 16 threads share a tile row (16 where the grid is short of
// the device: a short sequence's few workgroups), each holding its share of the row's scores and output
// columns in registers, with Q/K/V/dO rows staged as padded vec4 rows in shared memory (the padding puts
// the rows a row's threads read on different banks). One thread per row with every
// operand in shared memory ran the H200's S = 2048, D = 128 forward in 5.59 ms; this form 3.24 ms.
// Keys past a causal tile's last visible one are skipped; with a mask, the forward and dQ first find the
// tile's visible key range, so K/V tiles the mask hides (padding, a block-diagonal batch) are never loaded.
// Query tiles are the largest that fits shared memory (≤ 32), halved (to 16) while the grid has fewer
// workgroups than the device has compute units; K/V tiles are as long, or up to 64 keys where a row has 8 or
// 16 threads (the forward and dQ of a short sequence). Shapes, scale, causal offset and the mask's broadcast
// strides are baked in as literals.
#include <algorithm>
#include <functional>

#include "meganeura/codegen/emit.hpp"
#include "meganeura/kernels/matmul.hpp"

namespace meganeura::codegen {

namespace {

struct AttnKernel {
  NodeId out, lse, dq, dk, dv;  // the values this kernel writes (invalid when absent)
  NodeId kw, vw;                // folded cache writes (WriteSlice siblings): the K and V operands themselves
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
      case Op::WriteSlice: (n == e.g.node(e.k.core).inputs[1] ? a.kw : a.vw) = n; break;
      default:
        throw GraphError("[codegen] expected an attention op in an attention kernel, got " +
                         std::string(op_name(e.g.node(n).op)) + " at node '" + node_label(e.g, n) + "'");
    }
  }
  return a;
}

std::string ilit(int64_t v) { return v < 0 ? "(" + std::to_string(v) + ")" : std::to_string(v); }

// `float <name>(uint o)`: element o of attention operand K or V ([B, KV heads, T, W]). Where the operand is a
// cache write the kernel takes in (schedule.cpp fold_cache_writes), rows start .. start + rows - 1 of a
// sequence come from the write's value (rotated here when its RoPE is fused) and the others from the state:
// the kernel's own stores of the new rows (cache_stores) are never read back in the same dispatch.
std::string cache_operand_fn(Emitter& e, const std::string& name, NodeId operand, bool folded) {
  const Graph& g = e.g;
  const Node& od = g.node(operand);
  const int64_t T = od.shape[2], W = od.shape[3];
  // <name>_row(bk, st, t, x): element x of row t of batch·KV head bk, st the new rows' first (the rows kernel
  // loads it once: with a division and a start load per element it ran 23.6 µs a layer on the H100, against
  // 15.9 without the fold).
  const std::string row_off = "(bk * " + uint_lit(T) + " + t) * " + uint_lit(W) + " + x";
  if (!folded) {
    const std::string at = od.op == Op::Fill ? float_lit(od.attrs.reals.at(0)) : e.load(operand, "o");
    const std::string at_row = od.op == Op::Fill ? at : e.load(operand, row_off);
    return "float " + name + "(uint o) { return " + at + "; }\nfloat " + name +
           "_row(uint bk, int st, uint t, uint x) { return " + at_row + "; }\n";
  }
  const NodeId value = od.inputs[1], start = od.inputs[2];
  const int64_t HKV = od.shape[1], rows = g.node(value).shape[2];
  std::string f;
  f += "float " + name + "_new(uint ix) { return " + e.load(value, "ix") + "; }\n";  // RoPE'd when fused
  f += "int " + name + "_start(uint bk) { return int(" +
       e.load(start, g.node(start).shape.empty() ? "0u" : "bk / " + uint_lit(HKV)) + "); }\n";
  f += "float " + name +
       "_row(uint bk, int st, uint t, uint x) {\n  int r = int(t) - st;\n  if (r >= 0 && r < " + ilit(rows) +
       ") return " + name + "_new((bk * " + uint_lit(rows) + " + uint(r)) * " + uint_lit(W) +
       " + x);\n  return " + e.load(operand, row_off) + ";\n}\n";
  f += "float " + name + "(uint o) {\n  uint bk = o / " + uint_lit(T * W) + ";\n  return " + name +
       "_row(bk, " + name + "_start(bk), o / " + uint_lit(W) + " % " + uint_lit(T) + ", o % " + uint_lit(W) +
       ");\n}\n";
  return f;
}

// Statements storing a folded cache write's new rows of batch·KV head `bk` into its state, spread over the
// workgroup's threads (`tid`, AT_WG); only the workgroups `who` (one per bk) run them. Rows past the state's
// end are dropped, as WriteSlice's own kernel drops them.
std::string cache_stores(Emitter& e, NodeId write, const std::string& name, const std::string& who,
                         const std::string& bk) {
  const Node& wn = e.g.node(write);
  const int64_t T = wn.shape[2], W = wn.shape[3], rows = e.g.node(wn.inputs[1]).shape[2];
  return "  if (" + who + ") {\n    int st = " + name + "_start(" + bk + ");\n    for (uint x = tid; x < " +
         uint_lit(rows * W) + "; x += AT_WG) {\n      int at = int(x / " + uint_lit(W) +
         ") + st;\n      if (at >= 0 && at < " + ilit(T) + ") " +
         e.store(write,
                 "(" + bk + " * " + uint_lit(T) + " + uint(at)) * " + uint_lit(W) + " + x % " + uint_lit(W),
                 name + "_new(" + bk + " * " + uint_lit(rows * W) + " + x)") +
         "\n    }\n  }\n";
}

// Floats of shared memory a workgroup may take (the spec's 16 KiB where the device says nothing).
int64_t shared_budget(const Emitter& e) {
  return std::max<int64_t>(e.caps.max_shared_memory ? e.caps.max_shared_memory : 16384, 1024) / 4;
}

// Floats of shared memory kernel `which` (0 forward, 1 dQ, 2 dK/dV) needs for tiles of `t` rows (queries;
// keys in dK/dV) against `bc` keys (forward and dQ; dK/dV's tiles are square) with `tpr` threads a row: Q, K,
// V (and dO) as vec4 rows padded by one vec4; P (forward, dK/dV) and dS (backward) rows padded by one word;
// the exchange of the threads of a row (a workgroup's floats); lse; the visible key range.
int64_t shared_floats(int which, int64_t t, int64_t bc, int64_t tpr, int64_t d, int64_t dv) {
  const int64_t qk = 4 * ((d + 3) / 4 + 1), vo = 4 * ((dv + 3) / 4 + 1), p = t * (bc + 1);
  const int64_t common = tpr * t + 2;
  switch (which) {
    case 0: return t * qk + bc * (qk + vo) + p + common;
    case 1: return t * (qk + vo) + bc * (qk + vo) + p + t + common;
    default: return t * (2 * qk + 2 * vo) + 2 * p + t + common;
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
  const int64_t budget = shared_budget(e);
  const int64_t units = kernels::target_workgroups(e.caps);
  const int64_t rows = which == 2 ? T : S;
  int64_t tile = 32;
  while (tile > 4 && (shared_floats(which, tile, tile, 4, D, DV) > budget || tile / 2 >= std::max(S, T) ||
                      (tile > 16 && (rows + tile - 1) / tile * B * HQ < units)))
    tile /= 2;
  if (shared_floats(which, tile, tile, 4, D, DV) > budget)
    throw GraphError("[codegen] expected attention head sizes whose tiles fit in " +
                     std::to_string(budget * 4) + " bytes of shared memory, got D = " + std::to_string(D) +
                     ", Dv = " + std::to_string(DV) + " at node '" + node_label(e.g, e.k.core) + "'");
  return tile;
}

// Threads a tile row: four, doubled (up to 16, and to the tile's side) while the grid holds fewer than 1024
// threads a compute unit. SmolLM2's S = 128 step has 72 workgroups of a 16-row tile: with four threads a row,
// 64 threads an SM, each a serial chain of 64 four-wide dots a key tile (the H100: dQ 51 µs a layer).
int64_t attention_tpr(const Emitter& e, int which, int64_t tile, int64_t grid, int64_t d, int64_t dv) {
  const int64_t budget = shared_budget(e);
  const int64_t max_wg = std::max<int64_t>(e.caps.max_workgroup_invocations, 128);
  const int64_t threads = int64_t(kernels::target_workgroups(e.caps)) * 1024;
  int64_t tpr = 4;
  while (tpr < 16 && 2 * tpr <= tile && 2 * tpr * tile <= max_wg && grid * tile * tpr < threads &&
         shared_floats(which, tile, tile, 2 * tpr, d, dv) <= budget)
    tpr *= 2;
  return tpr;
}

// Keys a K/V tile of the forward and dQ: the query tile's side, doubled up to 64 (and past the keys no
// further) where a row has 8 or 16 threads and shared memory allows, so that a short sequence's key loop is
// a few iterations of many loads in flight rather than T / 16 iterations of one load latency each.
int64_t attention_key_tile(const Emitter& e, int which, int64_t tile, int64_t tpr, int64_t t, int64_t d,
                           int64_t dv) {
  const int64_t budget = shared_budget(e);
  int64_t bc = tile;
  if (which == 2 || tpr < 8) return bc;
  while (bc < 64 && bc < t && shared_floats(which, tile, 2 * bc, tpr, d, dv) <= budget) bc *= 2;
  return bc;
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
  // Parts into scratch; the last of a key tile's HQ / HKV · chunks workgroups sums them
  // (emit_attention_body).
  emit_attention_body(e, chunks, true);
  e.out.variant = "attention.dkdv-parts";
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
  // 512 threads where the device allows (the spec's floor is 128): one decode query's keys and P·V parts
  // spread over four times the threads of 128 cut this kernel 0.83 → 0.52 ms a token for SmolLM2 on the
  // H100 (30 layers, ~160 keys, 9 workgroups; 256 threads: 0.61).
  const int64_t wg =
      std::min<int64_t>(512, std::max<int64_t>(e.caps.max_workgroup_invocations, 128) / 128 * 128);
  // P·V: each thread sums VW adjacent output columns (4 where DV allows) over every PARTS-th key, so that 512
  // threads cover DV = 64 with 32 key parts and a thread's loads for eight keys (32 values) issue together.
  const int64_t vw = DV % 4 == 0 ? 4 : 1, parts = std::max<int64_t>(1, wg / (DV / vw));
  // Scores: a thread's K row read as chunks of KC values whose loads issue together (one latency a chunk; a
  // loop of a load and a multiply-add a value ran at the memory's latency per few values).
  int64_t kc = 1;
  for (int64_t c = std::min<int64_t>(D, 64); c > 1; --c)
    if (D % c == 0) {
      kc = c;
      break;
    }
  const int64_t budget = shared_budget(e);
  if (S > kRowsMaxQueries || D + T + wg + parts * DV > budget) return false;
  define_moved(e);  // operand chains computed here (a decode query's RoPE)
  const bool causal = core.attrs.flag_a;
  auto ld = [&](NodeId n, const std::string& off) {
    const Node& nd = g.node(n);
    return nd.op == Op::Fill ? float_lit(nd.attrs.reals.at(0)) : e.load(n, off);
  };
  std::string& d = e.decls;
  d += "#define AT_HQ " + uint_lit(HQ) + "\n#define AT_G " + uint_lit(HQ / HKV) + "\n#define AT_HKV " +
       uint_lit(HKV) + "\n#define AT_S " + uint_lit(S) + "\n#define AT_T " + uint_lit(T) + "\n#define AT_D " +
       uint_lit(D) + "\n#define AT_DV " + uint_lit(DV) + "\n#define AT_WG " + uint_lit(wg) +
       "\n#define AT_PARTS " + uint_lit(parts) + "\n#define AT_VW " + uint_lit(vw) + "\n#define AT_KC " +
       uint_lit(kc) + "\n#define AT_SCALE " + float_lit(core.attrs.reals.at(0)) +
       "\n#define AT_NEG_INF uintBitsToFloat(0xFF800000u)\n";
  d += cache_operand_fn(e, "ldK", k, out.kw.valid());
  d += cache_operand_fn(e, "ldV", v, out.vw.valid());
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
  // Workgroup reductions of each thread's `v`, every thread getting the result: by subgroup operations and
  // one partial a subgroup where the device has them (two barriers), else a tree over `red` (log2 AT_WG).
  const bool sg = e.caps.subgroup_arithmetic && e.caps.min_subgroup_size >= 4;
  e.extensions += "#extension GL_EXT_control_flow_attributes : require\n";
  if (sg) e.extensions += "#extension GL_KHR_shader_subgroup_arithmetic : require\n";
  // Threads a key in the scores (8 where D allows: a 32-byte sector of f32 K values a key and load).
  const int64_t lk = D % 8 == 0 ? 8 : 1;
  const bool shuffle = lk > 1 && e.caps.subgroup_shuffle && e.caps.min_subgroup_size >= uint32_t(lk);
  if (shuffle) e.extensions += "#extension GL_KHR_shader_subgroup_shuffle : require\n";
  // Keys a thread takes a pass: its loads of them issued together, up to 32 values.
  const int64_t kp = lk > 1 ? std::clamp<int64_t>(32 / (D / lk), 1, 4) : 1;
  d += "#define AT_LK " + uint_lit(lk) + "\n#define AT_KP " + uint_lit(kp) + "\n";
  auto reduce = [&](const std::string& name, const std::string& sub, const std::string& op) {
    if (sg)
      return "float " + name + "(float v) {\n  v = " + sub +
             "(v);\n  if (gl_SubgroupInvocationID == 0u) red[gl_SubgroupID] = v;\n  barrier();\n"
             "  float r = red[0];\n  for (uint q = 1u; q < gl_NumSubgroups; ++q) r = " +
             op + ";\n  barrier();\n  return r;\n}\n";
    return "float " + name +
           "(float v) {\n  uint tid = gl_LocalInvocationID.x;\n  red[tid] = v;\n  barrier();\n"
           "  for (uint s = AT_WG / 2u; s > 0u; s >>= 1u) {\n    if (tid < s) {\n      float r = red[tid], q "
           "= red[tid + s];\n"
           "      red[tid] = " +
           op + ";\n    }\n    barrier();\n  }\n  float r = red[0];\n  barrier();\n  return r;\n}\n";
  };
  d += reduce("reduce_max", "subgroupMax", sg ? "max(r, red[q])" : "max(r, q)");
  d += reduce("reduce_sum", "subgroupAdd", sg ? "r + red[q]" : "r + q");
  std::string m;
  m += "  uint tid = gl_LocalInvocationID.x, i = gl_WorkGroupID.x, bh = gl_WorkGroupID.y;\n"
       "  uint b = bh / AT_HQ, h = bh % AT_HQ, bkh = b * AT_HKV + h / AT_G;\n";
  m += "  int kst = " + std::string(out.kw.valid() ? "ldK_start(bkh)" : "0") +
       ", vst = " + (out.vw.valid() ? "ldV_start(bkh)" : "0") + ";\n";
  // The new cache rows, by the first query row's workgroup of each KV head's first query head.
  if (out.kw.valid()) m += cache_stores(e, out.kw, "ldK", "i == 0u && h % AT_G == 0u", "bkh");
  if (out.vw.valid()) m += cache_stores(e, out.vw, "ldV", "i == 0u && h % AT_G == 0u", "bkh");
  m += "  for (uint x = tid; x < AT_D; x += AT_WG) q_s[x] = " + ld(q, "(bh * AT_S + i) * AT_D + x") +
       ";\n  barrier();\n";
  // Query i sees key j when j <= i + T - S (bottom-right aligned causal mask).
  m += causal ? "  uint kend = uint(clamp(int(i) + " + ilit(T - S + 1) + ", 0, int(AT_T)));\n"
              : "  uint kend = AT_T;\n";
  // A key the mask hides (-inf: cache rows past a sequence's length in decode) is skipped before its K row is
  // read; P·V reads V rows only below the last key with a nonzero weight (kvis), so a step reads only the
  // valid part of the cache.
  if (lk > 1) {
    // AT_LK adjacent threads a key, lane l reading values l, l + AT_LK, ...: one warp load instruction covers
    // AT_LK consecutive values of each of its keys, where a thread a key read one value of each of 32 rows
    // (32 sectors an instruction). On the H100, with the fold's per-element index arithmetic still in, this
    // layout ran 14.6 µs a layer against 23.6 for a thread a key. A thread takes AT_KP keys a pass, AT_WG /
    // AT_LK apart, their loads issued together (with one key a pass generation over ~600 keys was 4 %
    // slower). The lanes' partial dots are summed by shuffles (a key's lanes share a subgroup), else in
    // `red`; every thread runs the same number of passes, so both stay in uniform control flow.
    m +=
        "  float mx = AT_NEG_INF;\n  uint lane = tid % AT_LK;\n"
        "  for (uint j0 = 0u; j0 < kend; j0 += AT_WG / AT_LK * AT_KP) {\n"
        "    float mk[AT_KP], s[AT_KP], kv[AT_KP * (AT_D / AT_LK)];\n"
        "    [[unroll]] for (uint u = 0u; u < AT_KP; ++u) {\n      uint j = j0 + tid / AT_LK + u * (AT_WG / "
        "AT_LK);\n"
        "      mk[u] = j < kend ? " +
        mask_term +
        " : AT_NEG_INF;\n      s[u] = 0.0;\n"
        "      [[unroll]] for (uint c = 0u; c < AT_D / AT_LK; ++c)\n"
        "        kv[u * (AT_D / AT_LK) + c] = mk[u] != AT_NEG_INF ? ldK_row(bkh, kst, j, c * AT_LK + lane) : "
        "0.0;\n    }\n"
        "    [[unroll]] for (uint u = 0u; u < AT_KP; ++u)\n"
        "      [[unroll]] for (uint c = 0u; c < AT_D / AT_LK; ++c) s[u] += q_s[c * AT_LK + lane] * kv[u * "
        "(AT_D / "
        "AT_LK) + c];\n";
    if (shuffle)
      m += "    [[unroll]] for (uint u = 0u; u < AT_KP; ++u)\n"
           "      [[unroll]] for (uint o = 1u; o < AT_LK; o <<= 1u) s[u] += subgroupShuffleXor(s[u], o);\n";
    else
      m += "    [[unroll]] for (uint u = 0u; u < AT_KP; ++u) {\n      red[tid] = s[u];\n      barrier();\n"
           "      s[u] = 0.0;\n      [[unroll]] for (uint o = 0u; o < AT_LK; ++o) s[u] += red[tid - lane + "
           "o];\n"
           "      barrier();\n    }\n";
    m += "    [[unroll]] for (uint u = 0u; u < AT_KP; ++u) {\n      uint j = j0 + tid / AT_LK + u * (AT_WG / "
         "AT_LK);\n"
         "      if (j < kend && lane == 0u) {\n"
         "        float v = mk[u] == AT_NEG_INF ? AT_NEG_INF : s[u] * AT_SCALE + mk[u];\n"
         "        p_s[j] = v;\n        mx = max(mx, v);\n      }\n    }\n  }\n";
  } else {
    m += "  float mx = AT_NEG_INF;\n  for (uint j = tid; j < kend; j += AT_WG) {\n    float mk = " +
         mask_term +
         ";\n    if (mk == AT_NEG_INF) { p_s[j] = AT_NEG_INF; continue; }\n    float s = 0.0;\n"
         "    for (uint x0 = 0u; x0 < AT_D; x0 += AT_KC) {\n      float kv[AT_KC];\n"
         "      [[unroll]] for (uint x = 0u; x < AT_KC; ++x) kv[x] = ldK_row(bkh, kst, j, x0 + x);\n"
         "      [[unroll]] for (uint x = 0u; x < AT_KC; ++x) s += q_s[x0 + x] * kv[x];\n    }\n"
         "    s = s * AT_SCALE + mk;\n    p_s[j] = s;\n    mx = max(mx, s);\n  }\n";
  }
  m += "  mx = reduce_max(mx);\n";
  m += "  float sum = 0.0, last = 0.0;\n  for (uint j = tid; j < kend; j += AT_WG) {\n"
       "    float p = mx == AT_NEG_INF ? 0.0 : exp(p_s[j] - mx);\n    p_s[j] = p;\n    sum += p;\n"
       "    if (p != 0.0) last = float(j + 1u);\n  }\n";
  m += "  float l = reduce_sum(sum);\n";  // its barriers also publish p_s
  m += "  uint kvis = uint(reduce_max(last));\n";
  if (out.out.valid()) {
    // Eight keys an iteration with their V loads issued together (a loop of one dependent load a key ran at
    // the memory's latency); an index past kvis reads row kvis - 1 and weighs it 0. A zero weight never
    // multiplies its row, whatever the row holds.
    m += "  for (uint e = tid; e < AT_PARTS * (AT_DV / AT_VW); e += AT_WG) {\n"
         "    uint part = e / (AT_DV / AT_VW), d0 = e % (AT_DV / AT_VW) * AT_VW;\n"
         "    float a[AT_VW];\n    [[unroll]] for (uint c = 0u; c < AT_VW; ++c) a[c] = 0.0;\n"
         "    for (uint j0 = part; j0 < kvis; j0 += 8u * AT_PARTS) {\n      float w[8], x[8 * AT_VW];\n"
         "      [[unroll]] for (uint u = 0u; u < 8u; ++u) {\n        uint j = j0 + u * AT_PARTS;\n"
         "        w[u] = j < kvis ? p_s[j] : 0.0;\n"
         "        [[unroll]] for (uint c = 0u; c < AT_VW; ++c) x[u * AT_VW + c] = ldV_row(bkh, vst, min(j, "
         "kvis - 1u), d0 + "
         "c);\n      }\n"
         "      [[unroll]] for (uint u = 0u; u < 8u; ++u) if (w[u] != 0.0) {\n"
         "        [[unroll]] for (uint c = 0u; c < AT_VW; ++c) a[c] += w[u] * x[u * AT_VW + c];\n      }\n   "
         " }\n"
         "    [[unroll]] for (uint c = 0u; c < AT_VW; ++c) acc_s[part * AT_DV + d0 + c] = a[c];\n  }\n  "
         "barrier();\n";
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
  const int64_t tpr = attention_tpr(
      e, which, tile, ((which == 2 ? T : S) + tile - 1) / tile * B * HQ * (which == 2 ? query_chunks : 1), D,
      DV);
  const uint32_t wg = uint32_t(tpr * tile);
  const int64_t bc = attention_key_tile(e, which, tile, tpr, T, D, DV);
  define_moved(e);  // operand chains computed here: the heads of the QKV product, dO's heads
  // A Fill operand (the gradient of a sum, say) has no storage: it is a literal.
  auto ld = [&](NodeId n, const std::string& off) {
    const Node& nd = g.node(n);
    return nd.op == Op::Fill ? float_lit(nd.attrs.reals.at(0)) : e.load(n, off);
  };
  std::string& d = e.decls;
  d += "#define AT_HQ " + uint_lit(HQ) + "\n#define AT_HKV " + uint_lit(HKV) + "\n#define AT_G " +
       uint_lit(HQ / HKV) + "\n#define AT_S " + uint_lit(S) + "\n#define AT_T " + uint_lit(T) +
       "\n#define AT_D " + uint_lit(D) + "\n#define AT_DV " + uint_lit(DV) + "\n#define AT_BR " +
       uint_lit(tile) + "\n#define AT_BC " + uint_lit(bc) + "\n#define AT_WG " + uint_lit(wg) +
       "\n#define AT_SCALE " + float_lit(core.attrs.reals.at(0)) +
       // Shared rows padded by one word: a warp reads one column of 32 K rows (the score) or of 32 P rows
       // (the softmax); at a stride that is a multiple of 32 words all of them hit one bank.
       "\n#define AT_DP " + uint_lit(D + 1) + "\n#define AT_DVP " + uint_lit(DV + 1) + "\n#define AT_BCP " +
       uint_lit(bc + 1) + "\n#define AT_NEG_INF uintBitsToFloat(0xFF800000u)\n";
  // Query i sees key j when j <= i + T - S (bottom-right aligned causal mask), and j < T.
  d += "bool visible(uint i, uint j) { return j < AT_T" +
       (causal ? std::string(" && int(j) <= int(i) + ") + ilit(T - S) : std::string()) + "; }\n";
  d += "float ldQ(uint o) { return " + ld(q, "o") + "; }\n";
  d += cache_operand_fn(e, "ldK", k, out.kw.valid());
  d += cache_operand_fn(e, "ldV", v, out.vw.valid());
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

  // The per-thread accumulators (acc, dq, dk, dv) and scores are indexed by unrolled loops only: a rolled
  // loop indexes them at run time, which puts them in local memory (the H100's pipeline statistics said 64
  // bytes a thread).
  e.extensions += "#extension GL_EXT_control_flow_attributes : require\n";
  // Register tiles: AT_TPR threads (4 to 16, attention_tpr) share a row of the tile (a query row; a key row
  // in dK/dV). A thread keeps the scores of its row against the other side's rows sub, sub + AT_TPR, ...
  // (AT_KPT of them) and output columns 4·(sub + AT_TPR·o) .. + 3 (vec4 accumulators) in registers. Q, K, V
  // and dO rows are vec4s in shared memory, zero-padded to a multiple of four and padded by one vec4 (rows 17
  // vec4s apart start 4 banks apart). The scalar kernels before them read two shared floats a product: 0.56
  // ms a layer for SmolLM2's batch-16 prefill on the H200.
  const int64_t d4 = (D + 3) / 4, dv4 = (DV + 3) / 4;
  d += "#define AT_D4 " + uint_lit(d4) + "\n#define AT_DV4 " + uint_lit(dv4) + "\n#define AT_DP4 " +
       uint_lit(d4 + 1) + "\n#define AT_DVP4 " + uint_lit(dv4 + 1) + "\n#define AT_TPR " + uint_lit(tpr) +
       "\n#define AT_KPT " + uint_lit(bc / tpr) + "\n#define AT_OQ " + uint_lit((d4 + tpr - 1) / tpr) +
       "\n#define AT_OV " + uint_lit((dv4 + tpr - 1) / tpr) + "\n";
  // `count` rows of a vec4 tile from rows row0.. of n floats each at `base` (zeros past a row's end and for
  // rows at or past `rows`).
  auto load4 = [&](const std::string& arr, const std::string& fn, const std::string& base,
                   const std::string& n, const std::string& n4, const std::string& p4,
                   const std::string& row0, const std::string& rows, const std::string& count,
                   const std::string& indent) {
    std::string s = "for (uint x = tid; x < " + count + " * " + n4 + "; x += AT_WG) {\n  uint r = x / " + n4 +
                    ", c = x % " + n4 + " * 4u, i = " + row0 + " + r;\n  vec4 v = vec4(0.0);\n  if (i < " +
                    rows + ") {\n    [[unroll]] for (uint y = 0u; y < 4u; ++y)\n      if (c + y < " + n +
                    ") v[y] = " + fn + "(" + base + " + i * " + n + " + c + y);\n  }\n  " + arr + "[r * " +
                    p4 + " + x % " + n4 + "] = v;\n}\n";
    std::string out;
    for (size_t at = 0, nl; at < s.size(); at = nl + 1) {
      nl = s.find('\n', at);
      out += indent + s.substr(at, nl - at + 1);
    }
    return out;
  };
  // Accumulators acc[AT_O] += Σ_c w(c) · rows[c][sub + 4·o], the weights read by `weight` at shared index c.
  auto accumulate = [&](const std::string& acc, const std::string& o_count, const std::string& n4,
                        const std::string& weight, const std::string& rows, const std::string& p4,
                        const std::string& count) {
    return "    for (uint c = 0u; c < " + count + "; ++c) {\n      float w = " + weight +
           ";\n      [[unroll]] for (uint o = 0u; o < " + o_count +
           "; ++o)\n        if (sub + o * AT_TPR < " + n4 + ") " + acc + "[o] += w * " + rows + "[c * " + p4 +
           " + sub + o * AT_TPR];\n    }\n";
  };
  // Stores vec4 accumulators acc[o] of row `row` (n floats a row at `base`) as value(acc[o][y]).
  auto store4 = [&](const std::string& acc, const std::string& o_count, const std::string& n,
                    const std::function<std::string(const std::string&, const std::string&)>& put) {
    return "    [[unroll]] for (uint o = 0u; o < " + o_count +
           "; ++o) {\n      uint c = (sub + o * AT_TPR) * "
           "4u;\n      [[unroll]] for (uint y = 0u; y < 4u; ++y)\n        if (c + y < " +
           n + ") " + put("c + y", acc + "[o][y]") + "\n    }\n";
  };
  // Zeroed vec4 accumulators.
  auto zeros = [&](const std::string& acc, const std::string& o_count) {
    return "  vec4 " + acc + "[" + o_count + "];\n  [[unroll]] for (uint o = 0u; o < " + o_count + "; ++o) " +
           acc + "[o] = vec4(0.0);\n";
  };
  // Σ over the tile's vec4 columns of a[ra] · b[rb] (n4 vec4s, row pitch p4 both).
  auto dots = [&](const std::string& out, const std::string& a, const std::string& ra, const std::string& b,
                  const std::string& rb, const std::string& n4, const std::string& p4) {
    return "    [[unroll]] for (uint k = 0u; k < AT_KPT; ++k) " + out +
           "[k] = 0.0;\n    for (uint x = 0u; x < " + n4 + "; ++x) {\n      vec4 a = " + a + "[" + ra +
           " * " + p4 +
           " + x];\n      [[unroll]] for (uint k = "
           "0u; k < AT_KPT; ++k) " +
           out + "[k] += dot(a, " + b + "[(" + rb + ") * " + p4 + " + x]);\n    }\n";
  };
  std::string m;  // main body
  m += "  uint tid = gl_LocalInvocationID.x, sub = tid % AT_TPR;\n";
  if (which != 2) m += "  uint qend = AT_S;\n";  // dK/dV: the end of the workgroup's query chunk
  // Keys past the last one a causal query tile can see are skipped; with a mask, the query tile's visible
  // keys are found first (every (row, key) the tile could see, as the score loop would evaluate them), so K/V
  // tiles outside [first, last] visible key are never loaded: a prefill through a 512-row cache sees 1 to 4
  // of its 16 tiles. A hidden key scores -inf without its product mattering (the reference in
  // ops/attention.cpp skips it: a NaN in its K row does not reach the output).
  std::string key_range =
      causal ? "  uint kend = uint(clamp(int(q0 + AT_BR) - 1 + " + ilit(T - S) + " + 1, 0, int(AT_T)));\n"
             : "  uint kend = AT_T;\n";
  key_range += "  uint kbeg = 0u;\n";
  if (mask.valid()) {
    d += "shared int lo_s, hi_s;\n";
    key_range +=
        "  if (tid == 0u) { lo_s = int(AT_T); hi_s = -1; }\n  barrier();\n  int lo = int(AT_T), hi = -1;\n"
        "  for (uint x = tid; x < AT_BR * kend; x += AT_WG) {\n    uint r = x / kend, j = x % kend, i = "
        "q0 + r;\n    if (i < qend && visible(i, j) && " +
        mask_term +
        " != AT_NEG_INF) { lo = min(lo, int(j)); hi = max(hi, int(j)); }\n  }\n"
        "  atomicMin(lo_s, lo);\n  atomicMax(hi_s, hi);\n  barrier();\n"
        "  kbeg = uint(min(lo_s, int(kend))) / AT_BC * AT_BC;\n  kend = uint(hi_s + 1);\n";
  }
  // Score of query i against key j from the tile's dot product s; -inf where hidden.
  const std::string masked =
      "float masked(float s, uint b, uint h, uint i, uint j) {\n  if (i >= AT_S || !visible(i, j)) return "
      "AT_NEG_INF;\n  float mk = " +
      mask_term + ";\n  return mk == AT_NEG_INF ? AT_NEG_INF : s * AT_SCALE + mk;\n}\n";

  if (which == 0) {
    d +=
        "shared vec4 Qs[AT_BR * AT_DP4];\nshared vec4 Ks[AT_BC * AT_DP4];\nshared vec4 Vs[AT_BC * AT_DVP4];\n"
        "shared float Ps[AT_BR * AT_BCP];\nshared float red_s[AT_WG];\n" +
        masked;
    m += "  uint q0 = gl_WorkGroupID.x * AT_BR, bh = gl_WorkGroupID.y;\n  uint b = bh / AT_HQ, h = bh % "
         "AT_HQ;\n";
    m += "  uint qbase = bh * AT_S * AT_D, kbase = (b * AT_HKV + h / AT_G) * AT_T * AT_D;\n";
    m += "  uint vbase = (b * AT_HKV + h / AT_G) * AT_T * AT_DV, obase = bh * AT_S * AT_DV;\n";
    // The new cache rows, by the first query tile's workgroup of each KV head's first query head.
    const std::string first = "gl_WorkGroupID.x == 0u && h % AT_G == 0u", bk = "(b * AT_HKV + h / AT_G)";
    if (out.kw.valid()) m += cache_stores(e, out.kw, "ldK", first, bk);
    if (out.vw.valid()) m += cache_stores(e, out.vw, "ldV", first, bk);
    m += "  uint sr = tid / AT_TPR, i = q0 + sr;\n";
    m += load4("Qs", "ldQ", "qbase", "AT_D", "AT_D4", "AT_DP4", "q0", "qend", "AT_BR", "  ");
    m += key_range;
    // Per thread: the row's running max (the same in its four threads), its share of the running sum.
    m += "  float mrow = AT_NEG_INF, lpart = 0.0;\n" + zeros("acc", "AT_OV");
    m += "  for (uint k0 = kbeg; k0 < kend; k0 += AT_BC) {\n    barrier();\n" +
         load4("Ks", "ldK", "kbase", "AT_D", "AT_D4", "AT_DP4", "k0", "AT_T", "AT_BC", "    ") +
         load4("Vs", "ldV", "vbase", "AT_DV", "AT_DV4", "AT_DVP4", "k0", "AT_T", "AT_BC", "    ") +
         "    barrier();\n    float sc[AT_KPT];\n" +
         dots("sc", "Qs", "sr", "Ks", "sub + k * AT_TPR", "AT_D4", "AT_DP4");
    m += "    float pm = AT_NEG_INF;\n    [[unroll]] for (uint k = 0u; k < AT_KPT; ++k) {\n"
         "      sc[k] = masked(sc[k], b, h, i, k0 + sub + k * AT_TPR);\n      pm = max(pm, sc[k]);\n    }\n"
         "    red_s[tid] = pm;\n    barrier();\n";
    // The row's new max from its four threads' maxima; P into shared memory; each thread rescales its share
    // of the running sum and its accumulators by exp(m_old - m_new). A row with nothing visible yet keeps max
    // -inf and P = 0.
    m += "    float mx = mrow;\n    [[unroll]] for (uint t = 0u; t < AT_TPR; ++t) mx = max(mx, red_s[sr * "
         "AT_TPR + "
         "t]);\n"
         "    float alpha = mx == AT_NEG_INF ? 1.0 : exp(mrow - mx), ps = 0.0;\n    mrow = mx;\n"
         "    [[unroll]] for (uint k = 0u; k < AT_KPT; ++k) {\n"
         "      float p = mx == AT_NEG_INF ? 0.0 : exp(sc[k] - mx);\n"
         "      Ps[sr * AT_BCP + sub + k * AT_TPR] = p;\n      ps += p;\n    }\n"
         "    lpart = lpart * alpha + ps;\n    barrier();\n";
    if (out.out.valid())
      m += "    [[unroll]] for (uint o = 0u; o < AT_OV; ++o) acc[o] *= alpha;\n" +
           accumulate("acc", "AT_OV", "AT_DV4", "Ps[sr * AT_BCP + c]", "Vs", "AT_DVP4", "AT_BC");
    m += "  }\n  barrier();\n  red_s[tid] = lpart;\n  barrier();\n"
         "  float l = 0.0;\n  [[unroll]] for (uint t = 0u; t < AT_TPR; ++t) l += red_s[sr * AT_TPR + t];\n";
    if (out.out.valid())
      m += "  if (i < AT_S) {\n" +
           store4("acc", "AT_OV", "AT_DV",
                  [&](const std::string& col, const std::string& v) {
                    return e.store(out.out, "obase + i * AT_DV + " + col, "l > 0.0 ? " + v + " / l : 0.0");
                  }) +
           "  }\n";
    if (out.lse.valid())
      m += "  if (sub == 0u && i < AT_S) " +
           e.store(out.lse, "bh * AT_S + i", "l > 0.0 ? mrow + log(l) : AT_NEG_INF") + "\n";
    e.out.grid = {uint32_t((S + tile - 1) / tile), uint32_t(B * HQ), 1};
  } else {
    const NodeId dout = core.inputs[3], o = core.inputs[4], lse = core.inputs[5];
    d += "float ldDO(uint o) { return " + ld(dout, "o") + "; }\n";
    d += "float ldO(uint o) { return " + ld(o, "o") + "; }\n";
    d += "float ldLse(uint o) { return " + ld(lse, "o") + "; }\n";
    d += "shared vec4 Qs[AT_BR * AT_DP4];\nshared vec4 dOs[AT_BR * AT_DVP4];\nshared vec4 Ks[AT_BC * "
         "AT_DP4];\n"
         "shared vec4 Vs[AT_BC * AT_DVP4];\nshared float dSs[AT_BR * AT_BCP];\nshared float lse_s[AT_BR];\n"
         "shared float red_s[AT_WG];\n" +
         masked;
    // The query tile q0.., head bh: Q, dO and lse, then each thread's part of delta = rowsum(dO ∘ O) for row
    // tid / AT_TPR into red_s (delta_of(r) sums the row's AT_TPR parts, after the caller's barrier). The
    // thread's O values (columns 4·(sub + AT_TPR·o) ..) go into registers with the shared rows' loads, before
    // the barrier: loaded after it, they were a round trip of their own every query tile of dK/dV.
    const std::string ind = which == 1 ? "  " : "    ";
    const std::string load_rows =
        ind + "vec4 orow[AT_OV];\n" + ind + "{\n" + ind + "  uint r = tid / AT_TPR, i = q0 + r;\n" + ind +
        "  [[unroll]] for (uint o = 0u; o < AT_OV; ++o) {\n" + ind + "    uint x = sub + o * AT_TPR;\n" +
        ind + "    orow[o] = vec4(0.0);\n" + ind + "    if (r < AT_BR && i < qend && x < AT_DV4)\n" + ind +
        "      [[unroll]] for (uint y = 0u; y < 4u; ++y)\n" + ind +
        "        if (x * 4u + y < AT_DV) orow[o][y] = ldO(obase + i * AT_DV + x * 4u + y);\n" + ind +
        "  }\n" + ind + "}\n" +
        load4("Qs", "ldQ", "qbase", "AT_D", "AT_D4", "AT_DP4", "q0", "qend", "AT_BR", ind) +
        load4("dOs", "ldDO", "obase", "AT_DV", "AT_DV4", "AT_DVP4", "q0", "qend", "AT_BR", ind) + ind +
        "if (tid < AT_BR) lse_s[tid] = q0 + tid < qend ? ldLse(bh * AT_S + q0 + tid) : AT_NEG_INF;\n" + ind +
        "barrier();\n" + ind + "{\n" + ind + "  uint r = tid / AT_TPR, i = q0 + r;\n" + ind +
        "  float dl = 0.0;\n" + ind + "  if (r < AT_BR && i < qend)\n" + ind +
        "    [[unroll]] for (uint o = 0u; o < AT_OV; ++o)\n" + ind +
        "      if (sub + o * AT_TPR < AT_DV4) dl += dot(dOs[r * AT_DVP4 + sub + o * AT_TPR], orow[o]);\n" +
        ind + "  red_s[tid] = dl;\n" + ind + "}\n";
    d += "float delta_of(uint r) {\n  float s = 0.0;\n  [[unroll]] for (uint t = 0u; t < AT_TPR; ++t) s += "
         "red_s[r * AT_TPR + t];\n  return s;\n}\n";
    // P = exp(s - lse) and dS = P (dP - delta) of query row `qr` (query i) against key row `kr` (key j); P =
    // 0 where the key is hidden or the row sees no key at all.
    d += "void probs(float s, float dp, uint qr, uint b, uint h, uint i, uint j, out float p, out float ds) "
         "{\n"
         "  p = 0.0;\n  ds = 0.0;\n  float sc = masked(s, b, h, i, j);\n"
         "  if (sc == AT_NEG_INF || lse_s[qr] == AT_NEG_INF) return;\n"
         "  p = exp(sc - lse_s[qr]);\n  ds = p * (dp - delta_of(qr));\n}\n";
    if (which == 1) {
      m += "  uint q0 = gl_WorkGroupID.x * AT_BR, bh = gl_WorkGroupID.y;\n  uint b = bh / AT_HQ, h = bh % "
           "AT_HQ;\n";
      m += "  uint qbase = bh * AT_S * AT_D, kbase = (b * AT_HKV + h / AT_G) * AT_T * AT_D;\n";
      m += "  uint vbase = (b * AT_HKV + h / AT_G) * AT_T * AT_DV, obase = bh * AT_S * AT_DV;\n";
      m += "  uint sr = tid / AT_TPR, i = q0 + sr;\n";
      m += load_rows + "  barrier();\n" + key_range + zeros("dq", "AT_OQ");
      m += "  for (uint k0 = kbeg; k0 < kend; k0 += AT_BC) {\n    barrier();\n" +
           load4("Ks", "ldK", "kbase", "AT_D", "AT_D4", "AT_DP4", "k0", "AT_T", "AT_BC", "    ") +
           load4("Vs", "ldV", "vbase", "AT_DV", "AT_DV4", "AT_DVP4", "k0", "AT_T", "AT_BC", "    ") +
           "    barrier();\n    float sc[AT_KPT], dp[AT_KPT];\n" +
           dots("sc", "Qs", "sr", "Ks", "sub + k * AT_TPR", "AT_D4", "AT_DP4") +
           dots("dp", "dOs", "sr", "Vs", "sub + k * AT_TPR", "AT_DV4", "AT_DVP4");
      m += "    [[unroll]] for (uint k = 0u; k < AT_KPT; ++k) {\n      float p, ds;\n"
           "      probs(sc[k], dp[k], sr, b, h, i, k0 + sub + k * AT_TPR, p, ds);\n"
           "      dSs[sr * AT_BCP + sub + k * AT_TPR] = ds;\n    }\n    barrier();\n" +
           accumulate("dq", "AT_OQ", "AT_D4", "dSs[sr * AT_BCP + c]", "Ks", "AT_DP4", "AT_BC") + "  }\n";
      m += "  if (i < AT_S) {\n" +
           store4("dq", "AT_OQ", "AT_D",
                  [&](const std::string& col, const std::string& v) {
                    return e.store(out.dq, "qbase + i * AT_D + " + col, "AT_SCALE * " + v);
                  }) +
           "  }\n";
      e.out.grid = {uint32_t((S + tile - 1) / tile), uint32_t(B * HQ), 1};
    } else {
      // A thread a share of key row kr = tid / AT_TPR against queries sub, sub + AT_TPR, ... of each query
      // tile.
      d += "shared float Ps[AT_BC * AT_BCP];\n";
      const bool want_k = out.dk.valid(), want_v = out.dv.valid();
      const int64_t per = ((S + tile - 1) / tile + query_chunks - 1) / query_chunks;  // query tiles per chunk
      m += "  uint k0 = gl_WorkGroupID.x * AT_BC, bh = gl_WorkGroupID.y, qc = gl_WorkGroupID.z;\n"
           "  uint b = bh / AT_HQ, h = bh % AT_HQ, kh = h / AT_G, bkh = b * AT_HKV + kh;\n";
      m += "  uint kbase = bkh * AT_T * AT_D, vbase = bkh * AT_T * AT_DV;\n";
      m += "  uint qbase = bh * AT_S * AT_D, obase = bh * AT_S * AT_DV;\n";
      m += "  uint kr = tid / AT_TPR, j = k0 + kr;\n";
      m += "  uint qlo = qc * " + uint_lit(per * tile) + ", qend = min(AT_S, qlo + " + uint_lit(per * tile) +
           ");\n";
      m += load4("Ks", "ldK", "kbase", "AT_D", "AT_D4", "AT_DP4", "k0", "AT_T", "AT_BC", "  ") +
           load4("Vs", "ldV", "vbase", "AT_DV", "AT_DV4", "AT_DVP4", "k0", "AT_T", "AT_BC", "  ");
      if (want_k) m += zeros("dk", "AT_OQ");
      if (want_v) m += zeros("dv", "AT_OV");
      // The first query that a causal mask lets see key k0.
      m +=
          causal ? "  uint qstart = uint(max(int(k0) - " + ilit(T - S) + ", 0));\n" : "  uint qstart = 0u;\n";
      m += "  for (uint q0 = max(qstart, qlo) / AT_BR * AT_BR; q0 < qend; q0 += AT_BR) {\n    barrier();\n" +
           load_rows + "    barrier();\n    float sc[AT_KPT], dp[AT_KPT];\n" +
           dots("sc", "Ks", "kr", "Qs", "sub + k * AT_TPR", "AT_D4", "AT_DP4");
      if (want_k) m += dots("dp", "Vs", "kr", "dOs", "sub + k * AT_TPR", "AT_DV4", "AT_DVP4");
      // P and dS stored transposed: row kr of Ps and dSs holds the key's column of the tile pair.
      m += "    [[unroll]] for (uint k = 0u; k < AT_KPT; ++k) {\n      uint qr = sub + k * AT_TPR;\n"
           "      float p, ds;\n      probs(sc[k], " +
           std::string(want_k ? "dp[k]" : "0.0") +
           ", qr, b, h, q0 + qr, j, p, ds);\n      Ps[kr * AT_BCP + qr] = p;\n      dSs[kr * AT_BCP + qr] = "
           "ds;\n"
           "    }\n    barrier();\n";
      if (want_v) m += accumulate("dv", "AT_OV", "AT_DV4", "Ps[kr * AT_BCP + c]", "dOs", "AT_DVP4", "AT_BR");
      if (want_k) m += accumulate("dk", "AT_OQ", "AT_D4", "dSs[kr * AT_BCP + c]", "Qs", "AT_DP4", "AT_BR");
      m += "  }\n";
      // Partial: part p = (query head in the group, chunk) of element o goes to scratch [p * n + o], dV's
      // after all of dK's.
      const int64_t parts = HQ / HKV * query_chunks, n_k = B * HKV * T * D, n_v = B * HKV * T * DV;
      std::string sb;
      if (partial) {
        const uint32_t at = e.bind_scratch(uint64_t(parts * (n_k + n_v)) * 4, true);
        e.out.bindings[at].coherent = true;
        sb = "b" + std::to_string(at);
        m += "  uint part = (h % AT_G) * " + uint_lit(query_chunks) + " + qc;\n";
      }
      auto put = [&](NodeId node, const std::string& off, const std::string& v, int64_t n, int64_t first) {
        if (!partial) return e.store(node, off, v);
        return sb + ".d[" + uint_lit(first) + " + part * " + uint_lit(n) + " + " + off + "] = " + v + ";";
      };
      m += "  if (j < AT_T) {\n";
      if (want_k)
        m += store4("dk", "AT_OQ", "AT_D", [&](const std::string& col, const std::string& v) {
          return put(out.dk, "kbase + j * AT_D + " + col, "AT_SCALE * " + v, n_k, 0);
        });
      if (want_v)
        m += store4("dv", "AT_OV", "AT_DV", [&](const std::string& col, const std::string& v) {
          return put(out.dv, "vbase + j * AT_DV + " + col, v, n_v, parts * n_k);
        });
      m += "  }\n";
      const int64_t key_tiles = (T + tile - 1) / tile;
      if (partial) {
        // The fix-up (as split-K's, kernels/matmul/split_fixup.glsl): each workgroup's parts are made visible
        // device-wide before it takes a ticket of its key tile (one a batch, KV head and key tile); the one
        // that takes the last adds the tile's parts in part order, as the separate summing pass did, and
        // stores dK and dV. Its flag is Ps[0]: the tile is dead by then, and shared memory is sized exactly.
        const std::string tb = "b" + std::to_string(e.bind_tickets(uint64_t(B * HKV * key_tiles) * 4));
        m += "  memoryBarrierBuffer();\n  barrier();\n  if (tid == 0u) {\n    uint t = bkh * " +
             uint_lit(key_tiles) + " + gl_WorkGroupID.x;\n    bool last = atomicAdd(" + tb +
             ".d[t], 1u) == " + uint_lit(parts) + " - 1u;\n    if (last) " + tb +
             ".d[t] = 0u;  // the next dispatch to use it follows a barrier\n    Ps[0] = last ? 1.0 : 0.0;\n"
             "  }\n  barrier();\n  if (Ps[0] == 0.0) return;\n  memoryBarrierBuffer();\n";
        // Four outputs an invocation at a time, every part's load issued before any is added (as split-K's
        // fix-up: one workgroup sums a whole key tile). An output past the keys reads the tile's first.
        auto fix = [&](NodeId node, const std::string& w, const std::string& base, int64_t n, int64_t first) {
          return "  for (uint x0 = tid; x0 < AT_BC * " + w +
                 "; x0 += AT_WG * 4u) {\n    float a[4];\n"
                 "    uint o[4];\n    bool in_t[4];\n    [[unroll]] for (uint q = 0u; q < 4u; ++q) {\n"
                 "      uint x = x0 + q * AT_WG, jj = k0 + x / " +
                 w + ";\n      in_t[q] = x < AT_BC * " + w + " && jj < AT_T;\n      o[q] = " + base +
                 " + (in_t[q] ? jj * " + w + " + x % " + w + " : k0 * " + w +
                 ");\n      a[q] = 0.0;\n    }\n    for (uint pp = 0u; pp < " + uint_lit(parts) +
                 "; ++pp)\n      [[unroll]] for (uint q = 0u; q < 4u; ++q) a[q] += " + sb + ".d[" +
                 uint_lit(first) + " + pp * " + uint_lit(n) + " + o[q]];\n" +
                 "    [[unroll]] for (uint q = 0u; q < 4u; ++q)\n      if (in_t[q]) " +
                 e.store(node, "o[q]", "a[q]") + "\n  }\n";
        };
        if (want_k) m += fix(out.dk, "AT_D", "kbase", n_k, 0);
        if (want_v) m += fix(out.dv, "AT_DV", "vbase", n_v, parts * n_k);
      }
      e.out.grid = {uint32_t(key_tiles), uint32_t(B * HQ), uint32_t(query_chunks)};
    }
  }
  e.out.spec_constants = {wg};
  e.finish("layout(local_size_x_id = 0) in;\n", m);
}

}  // namespace

}  // namespace meganeura::codegen
