// Op::Sample (ops/sample.cpp states the rules): a workgroup per row of logits. Thresholds are found by a
// search over the row, never by sorting it: each filter's threshold is the largest value t of the row for
// which {z >= t} still holds k tokens (top-k) or p of the probability (top-p), found by bisection over
// floats mapped to order-preserving 32-bit keys (at most 32 passes over the row, each a workgroup sum in a
// fixed order, so the result is deterministic). The draw is Gumbel-max: one pass, an argmax with ties to
// the lowest id, the same rule as greedy decoding.
#include <algorithm>

#include "meganeura/codegen/emit.hpp"
#include "meganeura/ops/sample.hpp"

namespace meganeura::codegen {

namespace {

// Order-preserving keys of floats (larger float, larger key; -inf above every NaN with the sign bit set).
const char* kSampleKeys = R"(uint mn_key(float f) {
  uint b = floatBitsToUint(f);
  return (b & 0x80000000u) != 0u ? ~b : (b | 0x80000000u);
}
)";

}  // namespace

void emit_sample(Emitter& e) {
  const Node& core = e.g.node(e.k.core);
  const Shape& ls = e.g.node(core.inputs[0]).shape;
  const int64_t B = ls[0], V = ls[1];
  const NodeId logits = core.inputs[0], seen = core.inputs[1], params = core.inputs[2], rng = core.inputs[3];
  e.decls += workgroup_reductions_glsl();
  e.decls += ops::sample_glsl();
  e.decls += kSampleKeys;
  const std::string Vs = uint_lit(V);
  // the row's penalised, tempered logit of token r (globals set once per row)
  e.decls += "uint g_base;\nfloat g_pen, g_inv_t;\n";
  e.decls += "float mn_raw(uint r) {\n  float l = " + e.load(logits, "g_base + r") +
             ";\n  if (g_pen != 1.0 && " + e.load(seen, "g_base + r") +
             " > 0.0) l = l < 0.0 ? l * g_pen : l / g_pen;\n  return l;\n}\n";
  e.decls += "float mn_z(uint r) { return mn_raw(r) * g_inv_t; }\n";
  const std::string rng_b = "b" + std::to_string(e.bind_value(rng, false));
  auto param = [&](int i) {
    return e.load(params, "o * " + uint_lit(ops::kSampleParams) + " + " + uint_lit(i));
  };
  auto rng_at = [&](int i) {
    return "uint(" + rng_b + ".d[o * " + uint_lit(ops::kSampleRng) + " + " + uint_lit(i) + "])";
  };
  const std::string epi = e.region_fn(e.k.root, e.k.epilogue, e.g.node(e.k.root).shape, e.k.core);
  const std::string loop = "for (uint r = t; r < " + Vs + "; r += gl_WorkGroupSize.x)";

  std::string b = "  uint t = gl_LocalInvocationID.x;\n";
  b += "  uint o = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;\n  if (o >= " + uint_lit(B) +
       ") return;\n";
  b += "  g_base = o * " + Vs + ";\n";
  b += "  float temperature = " + param(ops::kTemperature) + ", top_k = " + param(ops::kTopK) +
       ", top_p = " + param(ops::kTopP) + ", min_p = " + param(ops::kMinP) + ";\n";
  b += "  g_pen = " + param(ops::kPenalty) + ";\n  g_inv_t = 1.0;\n  top_k = floor(top_k);\n";
  // greedy: the first maximum of the penalised logits
  b += "  if (!(temperature > 0.0)) {\n";
  b += "    float a = uintBitsToFloat(0xFF800000u);\n    uint ai = 0xFFFFFFFFu;\n";
  b += "    " + loop +
       " { float x = mn_raw(r); if (ai == 0xFFFFFFFFu || x > a || (isnan(x) && !isnan(a))) { a = x; ai = r; "
       "} }\n";
  b += "    uint w = wg_argmax(ai == 0xFFFFFFFFu ? uintBitsToFloat(0xFF800000u) : a, ai);\n";
  b += "    if (t == 0u) " + e.store(e.k.root, "o", epi + "(o, float(w))") + "\n    return;\n  }\n";
  b += "  g_inv_t = 1.0 / temperature;\n";
  b +=
      "  float m = uintBitsToFloat(0xFF800000u);\n  " + loop + " m = mn_max(m, mn_z(r));\n  m = wg_max(m);\n";
  b += "  uint top = mn_key(m), thr = 0u;\n";
  // top-k: the largest key with at least k tokens at or above it
  b += "  if (top_k >= 1.0 && top_k < " + float_lit(double(V)) + ") {\n";
  b += "    uint lo = 0u, hi = top;\n    while (lo < hi) {\n      uint mid = lo + (hi - lo) / 2u + 1u;\n";
  b += "      float c = 0.0;\n      " + loop + " if (mn_key(mn_z(r)) >= mid) c += 1.0;\n";
  b += "      if (wg_sum(c) >= top_k) lo = mid; else hi = mid - 1u;\n    }\n    thr = lo;\n  }\n";
  // top-p over the top-k survivors: the largest key whose set holds at least p of their probability
  b += "  if (top_p < 1.0) {\n";
  b += "    float s = 0.0;\n    " + loop + " { float z = mn_z(r); if (mn_key(z) >= thr) s += exp(z - m); }\n";
  b += "    float target = top_p * wg_sum(s);\n";
  b += "    uint lo = thr, hi = top;\n    while (lo < hi) {\n      uint mid = lo + (hi - lo) / 2u + 1u;\n";
  b += "      float c = 0.0;\n      " + loop +
       " { float z = mn_z(r); if (mn_key(z) >= mid) c += exp(z - m); }\n";
  b += "      if (wg_sum(c) >= target) lo = mid; else hi = mid - 1u;\n    }\n    thr = lo;\n  }\n";
  b += "  if (min_p > 0.0) thr = max(thr, mn_key(m + log(min_p)));\n";
  // Gumbel-max over the survivors
  b += "  uint key = mn_sample_key(" + rng_at(ops::kSeedLo) + ", " + rng_at(ops::kSeedHi) + ", " +
       rng_at(ops::kStep) + ", o);\n";
  b += "  float a = uintBitsToFloat(0xFF800000u);\n  uint ai = 0xFFFFFFFFu;\n";
  b += "  " + loop + " {\n    float z = mn_z(r);\n    if (mn_key(z) < thr) continue;\n";
  b += "    float s = z - log(-log(mn_sample_u(key, r)));\n";
  b += "    if (ai == 0xFFFFFFFFu || s > a) { a = s; ai = r; }\n  }\n";
  b += "  uint w = wg_argmax(ai == 0xFFFFFFFFu ? uintBitsToFloat(0xFF800000u) : a, ai == 0xFFFFFFFFu ? "
       "0xFFFFFFFFu : ai);\n";
  b += "  if (t == 0u) " + e.store(e.k.root, "o", epi + "(o, float(w))") + "\n";
  const uint32_t max_x = e.caps.max_workgroup_size[0] ? e.caps.max_workgroup_size[0] : 1024;
  const uint32_t max_inv = e.caps.max_workgroup_invocations ? e.caps.max_workgroup_invocations : 1024;
  // a long row (a vocabulary) is walked once per bisection step: more threads than the default workgroup
  // (a short row takes a smaller power of two: idle threads still wait at every barrier)
  uint32_t fit = 32;
  while (fit < 256 && int64_t(fit) < V) fit *= 2;
  const uint32_t wg = e.variant.workgroup ? e.variant.workgroup : std::min({fit, max_x, max_inv});
  e.out.spec_constants = {wg};
  e.out.grid = element_grid(B, 1, e.caps);
  e.finish("layout(local_size_x_id = 0) in;\n", b);
}

}  // namespace meganeura::codegen
