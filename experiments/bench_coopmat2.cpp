// An experiment: f16 matmul from workgroup-scope cooperative matrices (VK_NV_cooperative_matrix2). The whole
// workgroup owns one BM×BN accumulator and multiplies BM×BK by BK×BN tiles, loaded straight from the storage
// buffers ("direct") or from shared memory the workgroup fills ("staged"); the driver may pick instructions
// that a subgroup-scope kernel cannot reach (kernels/matmul/coopmat.comp: ~244 TFLOP/s on an H200). Session 4
// measured "direct" at 57-71 TFLOP/s with 10 dispatches and no warm-up, possibly at the idle clock; now 150
// warm-ups. The GLSL is written against GL_NV_cooperative_matrix with gl_ScopeWorkgroup (glslang 12 has no
// GL_NV_cooperative_matrix2) and rewritten to KHR by shader/coopmat_khr. Sizes must be multiples of the tile.
// Outputs are checked against a CPU dot product on sampled elements (inputs are multiples of 1/4 in [-2, 2],
// so the f32 sums are exact).
//   bench_coopmat2 --sizes 4096,8192 --tiles 128x128x32,128x256x32,256x128x32 --wg 256
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "meganeura/runtime/device.hpp"
#include "meganeura/runtime/statistic_json.hpp"
#include "meganeura/session/session.hpp"
#include "meganeura/shader/coopmat_khr.hpp"
#include "meganeura/shader/shader.hpp"
#include "tensor_loads.hpp"

namespace {

using namespace meganeura;

// "direct": the matrices load straight from the storage buffers; "direct2": the next K tile's are requested
// before the multiply-add. "tensor" / "tensor2": the same with every load rewritten to a tensor load
// (shader::rewrite_loads_to_tensor_nv), the form VK_NV_cooperative_matrix2 stages through shared memory
// itself.
const char* kDirect = R"(#version 450
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = WG) in;
layout(std430, set = 0, binding = 0) readonly buffer A { float16_t a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float16_t b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { float c[]; };
layout(push_constant) uniform P { uint M, N, K; } p;
void main() {
  const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  fcoopmatNV<32, gl_ScopeWorkgroup, BM, BN> acc = fcoopmatNV<32, gl_ScopeWorkgroup, BM, BN>(0.0);
  fcoopmatNV<16, gl_ScopeWorkgroup, BM, BK> fa;
  fcoopmatNV<16, gl_ScopeWorkgroup, BK, BN> fb;
#if PREFETCH
  // The next K tile's matrices are requested before this one's multiply-add.
  fcoopmatNV<16, gl_ScopeWorkgroup, BM, BK> fa2;
  fcoopmatNV<16, gl_ScopeWorkgroup, BK, BN> fb2;
  coopMatLoadNV(fa, a, m0 * p.K, p.K, false);
  coopMatLoadNV(fb, b, n0, p.N, false);
  for (uint k = BK; k < p.K; k += BK) {
    coopMatLoadNV(fa2, a, m0 * p.K + k, p.K, false);
    coopMatLoadNV(fb2, b, k * p.N + n0, p.N, false);
    acc = coopMatMulAddNV(fa, fb, acc);
    fa = fa2;
    fb = fb2;
  }
  acc = coopMatMulAddNV(fa, fb, acc);
#else
  for (uint k = 0u; k < p.K; k += BK) {
    coopMatLoadNV(fa, a, m0 * p.K + k, p.K, false);
    coopMatLoadNV(fb, b, k * p.N + n0, p.N, false);
    acc = coopMatMulAddNV(fa, fb, acc);
  }
#endif
  coopMatStoreNV(acc, c, m0 * p.N + n0, p.N, false);
}
)";

// The staged and warp-specialised kernels' start: A and B read as uvec4 (eight halves), C as f32.
const char* kUvec4Head = R"(#version 450
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
layout(local_size_x = WG) in;
layout(std430, set = 0, binding = 0) readonly buffer A { uvec4 a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { uvec4 b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { float c[]; };
layout(push_constant) uniform P { uint M, N, K; } p;
)";

// "staged": the workgroup copies each K tile into shared memory with 16-byte loads and the matrices load from
// there, rows padded by PAD uvec4s. STAGES 2: the next tile's loads stay in registers across the multiply-add
// (one barrier a tile); STAGES 1: load, barrier, store, barrier, multiply (half the shared memory).
// "stagedl2" (an ablation, wrong results by design): every workgroup reads the first block row of A and block
// column of B (K advances as usual), so the loads miss L1 but all hit the same lines in L2; HBM traffic goes.
// "stagedpfD" (one stage only): staged, and each step also touches every 32-byte sector of tile t + D with
// one 4-byte load, so that tile t's 16-byte loads hit in L1 (what "stagedl1" shows is worth 386 against 269).
// "stagedmf" (two stages only): multiply stage t, then request tile t + 1 and store it into the other stage,
// one barrier; no load's registers live across the multiply, and the loads are in flight while the MMAs
// drain. "stagedl1" (an ablation, wrong results by design): every K tile's global loads read the first K
// tile's addresses, so they hit in L1/L2; the loads' issue and registers stay, the traffic from L2 and memory
// goes.
const std::string kStaged =
    std::string(kUvec4Head) +
    R"(const uint AR = BK / 8u + PAD, BR = BN / 8u + PAD;               // row strides in uvec4
const uint AV = BM * BK / 8u / WG, BV = BK * BN / 8u / WG;      // uvec4 per thread
shared uvec4 As[uint(STAGES) * BM * AR];
shared uvec4 Bs[uint(STAGES) * BK * BR];
uvec4 ra[AV], rb[BV];
void fetch(uint m0, uint n0, uint k) {
  [[unroll]] for (uint i = 0u; i < AV; ++i) {
    const uint v = gl_LocalInvocationIndex + i * WG, r = v / (BK / 8u), q = v % (BK / 8u);
    ra[i] = a[((m0 + r) * p.K + k) / 8u + q];
  }
  [[unroll]] for (uint i = 0u; i < BV; ++i) {
    const uint v = gl_LocalInvocationIndex + i * WG, r = v / (BN / 8u), q = v % (BN / 8u);
    rb[i] = b[((k + r) * p.N + n0) / 8u + q];
  }
}
void stash(uint s) {
  [[unroll]] for (uint i = 0u; i < AV; ++i) {
    const uint v = gl_LocalInvocationIndex + i * WG, r = v / (BK / 8u), q = v % (BK / 8u);
    As[s * BM * AR + r * AR + q] = ra[i];
  }
  [[unroll]] for (uint i = 0u; i < BV; ++i) {
    const uint v = gl_LocalInvocationIndex + i * WG, r = v / (BN / 8u), q = v % (BN / 8u);
    Bs[s * BK * BR + r * BR + q] = rb[i];
  }
}
#if PREFETCH_L1
// One 4-byte load per 32-byte sector of tile k: the sectors come into L1 without holding 16 bytes of registers each.
const uint AS = BM * BK / 16u / WG, BS = BK * BN / 16u / WG;   // sectors per thread
uint pf[AS + BS];
void touch(uint m0, uint n0, uint k) {
  [[unroll]] for (uint i = 0u; i < AS; ++i) {
    const uint v = gl_LocalInvocationIndex + i * WG, r = v / (BK / 16u), q = v % (BK / 16u);
    pf[i] = a[((m0 + r) * p.K + k) / 8u + q * 2u].x;
  }
  [[unroll]] for (uint i = 0u; i < BS; ++i) {
    const uint v = gl_LocalInvocationIndex + i * WG, r = v / (BN / 16u), q = v % (BN / 16u);
    pf[AS + i] = b[((k + r) * p.N + n0) / 8u + q * 2u].x;
  }
}
#endif
void main() {
#if SAME_BLOCK
  const uint m0 = 0u, n0 = 0u;
#else
  const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
#endif
  fcoopmatNV<32, gl_ScopeWorkgroup, BM, BN> acc = fcoopmatNV<32, gl_ScopeWorkgroup, BM, BN>(0.0);
  fcoopmatNV<16, gl_ScopeWorkgroup, BM, BK> fa;
  fcoopmatNV<16, gl_ScopeWorkgroup, BK, BN> fb;
  const uint tiles = p.K / BK;
#if STAGES == 1
#if PREFETCH_L1
  uint sink = 0u;
  [[unroll]] for (uint i = 0u; i < AS + BS; ++i) pf[i] = 0u;
  [[unroll]] for (uint d = 0u; d < uint(PREFETCH_L1); ++d)
    if (d < tiles) touch(m0, n0, d * BK);
#endif
  for (uint t = 0u; t < tiles; ++t) {
    fetch(m0, n0, SAME_TILE != 0 ? 0u : t * BK);
#if PREFETCH_L1
    // The previous step's touches have had a whole step to land; consume them, then touch tile t + PREFETCH_L1.
    [[unroll]] for (uint i = 0u; i < AS + BS; ++i) sink ^= pf[i];
    if (t + uint(PREFETCH_L1) < tiles) touch(m0, n0, (t + uint(PREFETCH_L1)) * BK);
#endif
    barrier();
    stash(0u);
    barrier();
    coopMatLoadNV(fa, As, 0u, AR, false);
    coopMatLoadNV(fb, Bs, 0u, BR, false);
    acc = coopMatMulAddNV(fa, fb, acc);
  }
#elif MMA_FIRST
  fetch(m0, n0, 0u);
  stash(0u);
  barrier();
  for (uint t = 0u; t < tiles; ++t) {
    const uint s = t & 1u;
    coopMatLoadNV(fa, As, s * BM * AR, AR, false);
    coopMatLoadNV(fb, Bs, s * BK * BR, BR, false);
    acc = coopMatMulAddNV(fa, fb, acc);
    if (t + 1u < tiles) {
      fetch(m0, n0, SAME_TILE != 0 ? 0u : (t + 1u) * BK);
      stash(s ^ 1u);
    }
    barrier();
  }
#else
  fetch(m0, n0, 0u);
  stash(0u);
  barrier();
  for (uint t = 0u; t < tiles; ++t) {
    const uint s = t & 1u;
    if (t + 1u < tiles) fetch(m0, n0, SAME_TILE != 0 ? 0u : (t + 1u) * BK);
    coopMatLoadNV(fa, As, s * BM * AR, AR, false);
    coopMatLoadNV(fb, Bs, s * BK * BR, BR, false);
    acc = coopMatMulAddNV(fa, fb, acc);
    if (t + 1u < tiles) stash(s ^ 1u);
    barrier();
  }
#endif
  coopMatStoreNV(acc, c, gl_WorkGroupID.y * BM * p.N + gl_WorkGroupID.x * BN, p.N, false);
#if PREFETCH_L1 && STAGES == 1
  if (sink == 0x9E3779B9u && p.M == 1u) c[0] = 1.0;  // keeps the touches alive; never true for the sizes run
#endif
}
)";

// "wsWMxWNpPWdD" (warp-specialised, subgroup scope): WM x WN consumer subgroups multiply (BM/WM) x (BN/WN)
// patches of 16x8 accumulators from shared memory; PW producer subgroups copy the K tiles from the storage
// buffers through D register sets (d1 if left out). STAGES shared stages form a ring: at step t the consumers
// multiply tile t while the producers store tile t + STAGES - 1 (requested D steps earlier) and request tile
// t + STAGES - 1 + D into the set it leaves; one barrier a step. The consumers hold no load registers and the
// producers no accumulators, so a load has D whole steps of multiplies to arrive in. (Vulkan has no
// asynchronous copy; this is the register-staged form of one.)
const std::string kWarpSpecialised =
    std::string(kUvec4Head) + R"(const uint S = uint(STAGES), D = uint(DEPTH);
const uint AR = BK / 8u + PAD, BR = BN / 8u + PAD;             // row strides in uvec4
const uint PT = PW * 32u;                                        // producer invocations
const uint AV = BM * BK / 8u / PT, BV = BK * BN / 8u / PT;      // uvec4 per producer invocation
const uint WTM = BM / WM, WTN = BN / WN, TM = WTM / 16u, TN = WTN / 8u;
shared uvec4 As[S * BM * AR];
shared uvec4 Bs[S * BK * BR];
uvec4 ra[D][AV], rb[D][BV];
void fetch(uint set, uint i0, uint m0, uint n0, uint k) {
  [[unroll]] for (uint i = 0u; i < AV; ++i) {
    const uint v = i0 + i * PT, r = v / (BK / 8u), q = v % (BK / 8u);
    ra[set][i] = a[((m0 + r) * p.K + k) / 8u + q];
  }
  [[unroll]] for (uint i = 0u; i < BV; ++i) {
    const uint v = i0 + i * PT, r = v / (BN / 8u), q = v % (BN / 8u);
    rb[set][i] = b[((k + r) * p.N + n0) / 8u + q];
  }
}
void stash(uint set, uint i0, uint s) {
  [[unroll]] for (uint i = 0u; i < AV; ++i) {
    const uint v = i0 + i * PT, r = v / (BK / 8u), q = v % (BK / 8u);
    As[s * BM * AR + r * AR + q] = ra[set][i];
  }
  [[unroll]] for (uint i = 0u; i < BV; ++i) {
    const uint v = i0 + i * PT, r = v / (BN / 8u), q = v % (BN / 8u);
    Bs[s * BK * BR + r * BR + q] = rb[set][i];
  }
}
void main() {
  const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  const uint sg = gl_SubgroupID, tiles = p.K / BK;
  const bool producer = sg >= WM * WN;
  const uint pi = gl_LocalInvocationIndex - WM * WN * 32u;  // producer invocation index
  const uint wm = sg / WN, wn = sg % WN;
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 8> acc[TM][TN];
  [[unroll]] for (uint i = 0u; i < TM; ++i) [[unroll]] for (uint j = 0u; j < TN; ++j)
    acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>(0.0);
  fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[TM];
  fcoopmatNV<16, gl_ScopeSubgroup, 16, 8> fb[TN];
  if (producer) {
    // Tiles 0 .. S-2 go straight to their stages; tiles S-1 .. S-2+D wait in the register sets.
    for (uint t = 0u; t + 1u < S && t < tiles; ++t) {
      fetch(0u, pi, m0, n0, t * BK);
      stash(0u, pi, t);
    }
    [[unroll]] for (uint u = 0u; u < D; ++u)
      if (S - 1u + u < tiles) fetch((S - 1u + u) % D, pi, m0, n0, (S - 1u + u) * BK);
  }
  barrier();
  for (uint t0 = 0u; t0 < tiles; t0 += D) {
    [[unroll]] for (uint u = 0u; u < D; ++u) {
      const uint t = t0 + u;
      if (t < tiles) {
        if (producer) {
          const uint set = (u + S - 1u) % D;  // a constant once unrolled: t0 is a multiple of D
          if (t + S - 1u < tiles) stash(set, pi, (t + S - 1u) % S);
          if (t + S - 1u + D < tiles) fetch(set, pi, m0, n0, (t + S - 1u + D) * BK);
        } else {
          const uint ao = (t % S) * BM * AR, bo = (t % S) * BK * BR;
          [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
            [[unroll]] for (uint i = 0u; i < TM; ++i)
              coopMatLoadNV(fa[i], As, ao + (wm * WTM + i * 16u) * AR + kk / 8u, AR, false);
            [[unroll]] for (uint j = 0u; j < TN; ++j)
              coopMatLoadNV(fb[j], Bs, bo + kk * BR + (wn * WTN + j * 8u) / 8u, BR, false);
            [[unroll]] for (uint i = 0u; i < TM; ++i) [[unroll]] for (uint j = 0u; j < TN; ++j)
              acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
          }
        }
        barrier();
      }
    }
  }
  if (!producer) {
    [[unroll]] for (uint i = 0u; i < TM; ++i) [[unroll]] for (uint j = 0u; j < TN; ++j)
      coopMatStoreNV(acc[i][j], c, (m0 + wm * WTM + i * 16u) * p.N + n0 + wn * WTN + j * 8u, p.N, false);
  }
}
)";

// "ws2x2p4d2" -> consumer grid 2 x 2, 4 producer subgroups, 2 register sets; false if `v` is no ws variant.
bool ws_variant(const std::string& v, uint32_t& wm, uint32_t& wn, uint32_t& pw, uint32_t& depth) {
  depth = 1;
  const int got = std::sscanf(v.c_str(), "ws%ux%up%ud%u", &wm, &wn, &pw, &depth);
  return v.rfind("ws", 0) == 0 && got >= 3 && wm && wn && pw && depth >= 1 && depth <= 4;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string tok; std::getline(ss, tok, ',');) out.push_back(tok);
  return out;
}

bool tensor_variant(const std::string& v) { return v == "tensor" || v == "tensor2"; }

uint16_t to_half(float f) {  // exact for the multiples of 1/4 used here (normal or zero)
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  if ((x & 0x7FFFFFFFu) == 0) return static_cast<uint16_t>(sign);
  const int e = int((x >> 23) & 0xFF) - 127 + 15;
  return static_cast<uint16_t>(sign | (uint32_t(e) << 10) | ((x >> 13) & 0x3FFu));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<uint32_t> sizes = {4096, 8192};
  std::vector<std::string> tiles = {"128x128x32", "128x256x32", "256x128x32", "128x128x64"};
  std::vector<uint32_t> wgs;  // default: every workgroup size the device lists for f16 x f16 + f32
  std::vector<std::string> variants = {"direct", "staged"};
  uint32_t reps = 20, warmup = 150, pad = 1, stages = 2;
  bool compile_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool v = i + 1 < argc;
    if (arg == "--sizes" && v) {
      sizes.clear();
      for (const auto& t : split(argv[++i])) sizes.push_back(static_cast<uint32_t>(std::stoul(t)));
    } else if (arg == "--tiles" && v) {
      tiles = split(argv[++i]);
    } else if (arg == "--wg" && v) {
      for (const auto& t : split(argv[++i])) wgs.push_back(static_cast<uint32_t>(std::stoul(t)));
    } else if (arg == "--variants" && v) {
      variants = split(argv[++i]);
    } else if (arg == "--warmup" && v) {
      warmup = static_cast<uint32_t>(std::stoul(argv[++i]));
    } else if (arg == "--stages" && v) {
      stages = static_cast<uint32_t>(std::stoul(argv[++i]));
    } else if (arg == "--pad" && v) {
      pad = static_cast<uint32_t>(std::stoul(argv[++i]));
    } else if (arg == "--reps" && v) {
      reps = static_cast<uint32_t>(std::stoul(argv[++i]));
    } else if (arg == "--compile-only") {
      compile_only = true;
    } else {
      std::fprintf(
          stderr,
          "usage: bench_coopmat2 [--sizes 4096,8192] [--tiles 128x128x32,...] [--wg 256] [--variants "
          "direct,direct2,tensor,tensor2,staged,stagedl1,stagedl2,stagedpf1,stagedmf,stagedmfl1,ws2x2p4d2] "
          "[--reps 20] [--warmup 150] [--pad 1] [--stages 2] [--compile-only]\n");
      return 2;
    }
  }
  try {
    // staged, stagedl1 (see kStaged); direct, direct2, tensor, tensor2 (see kDirect).
    auto compile = [&](const std::string& variant, uint32_t bm, uint32_t bn, uint32_t bk, uint32_t wg,
                       const std::string& label, const std::string& key) {
      uint32_t wm = 0, wn = 0, pw = 0, depth = 1;
      if (ws_variant(variant, wm, wn, pw, depth)) {
        if (stages < 2) throw ConfigError("[bench_coopmat2] " + variant + " needs --stages 2 or more");
        shader::CompileOptions copt;
        copt.device_key = key;
        shader::ShaderSource s{label,
                               kWarpSpecialised,
                               {{"WG", std::to_string(32 * (wm * wn + pw)) + "u"},
                                {"BM", std::to_string(bm) + "u"},
                                {"BN", std::to_string(bn) + "u"},
                                {"BK", std::to_string(bk) + "u"},
                                {"PAD", std::to_string(pad) + "u"},
                                {"STAGES", std::to_string(stages)},
                                {"WM", std::to_string(wm) + "u"},
                                {"WN", std::to_string(wn) + "u"},
                                {"PW", std::to_string(pw) + "u"},
                                {"DEPTH", std::to_string(depth)}}};
        return shader::rewrite_coopmat_nv_to_khr(shader::compile_glsl(s, copt).spirv, label);
      }
      const bool mma_first = variant == "stagedmf" || variant == "stagedmfl1";
      const bool same_tile = variant == "stagedl1" || variant == "stagedmfl1";
      const uint32_t prefetch_l1 =
          variant.rfind("stagedpf", 0) == 0 ? static_cast<uint32_t>(std::atoi(variant.c_str() + 8)) : 0;
      if (variant.rfind("stagedpf", 0) == 0 && (prefetch_l1 < 1 || prefetch_l1 > 4 || stages != 1))
        throw ConfigError("[bench_coopmat2] " + variant + " needs a distance 1..4 and --stages 1");
      const bool staged =
          variant == "staged" || variant == "stagedl1" || variant == "stagedl2" || mma_first || prefetch_l1;
      if (mma_first && stages != 2) throw ConfigError("[bench_coopmat2] " + variant + " needs --stages 2");
      const bool tensor = tensor_variant(variant);
      const bool prefetch = variant == "direct2" || variant == "tensor2";
      if (!staged && variant != "direct" && variant != "direct2" && !tensor)
        throw ConfigError("[bench_coopmat2] unknown variant " + variant);
      shader::CompileOptions copt;
      copt.device_key = key;
      shader::ShaderSource s{label,
                             staged ? kStaged : kDirect,
                             {{"WG", std::to_string(wg) + "u"},
                              {"BM", std::to_string(bm) + "u"},
                              {"BN", std::to_string(bn) + "u"},
                              {"BK", std::to_string(bk) + "u"},
                              {"PAD", std::to_string(pad) + "u"},
                              {"STAGES", std::to_string(stages)},
                              {"PREFETCH", prefetch ? "1" : "0"},
                              {"SAME_TILE", same_tile ? "1" : "0"},
                              {"MMA_FIRST", mma_first ? "1" : "0"},
                              {"SAME_BLOCK", variant == "stagedl2" ? "1" : "0"},
                              {"PREFETCH_L1", std::to_string(prefetch_l1)}}};
      std::vector<uint32_t> khr =
          shader::rewrite_coopmat_nv_to_khr(shader::compile_glsl(s, copt).spirv, label);
      if (!tensor) return khr;
      uint32_t n = 0;
      khr = shader::rewrite_loads_to_tensor_nv(khr, label, {}, &n);
      if (n != (prefetch ? 4u : 2u))
        throw ConfigError("[bench_coopmat2] expected 2 tensor loads in " + label + ", got " +
                          std::to_string(n));
      return khr;
    };
    if (compile_only) {
      int n = 0;
      for (const std::string& var : variants)
        for (const std::string& t : tiles) {
          uint32_t bm = 0, bn = 0, bk = 0;
          if (std::sscanf(t.c_str(), "%ux%ux%u", &bm, &bn, &bk) != 3)
            throw ConfigError("[bench_coopmat2] bad tile " + t);
          n += !compile(var, bm, bn, bk, wgs.empty() ? 256 : wgs[0], "coopmat2", "").empty();
        }
      std::printf("{\"bench\":\"vk_coopmat2\",\"compiled\":%d}\n", n);
      return 0;
    }
    const SessionConfig config = SessionConfig::from_env();
    runtime::DeviceOptions opt;
    opt.device_id = config.device_id;
    opt.validation = config.validation;
    auto dev = runtime::open_device(opt);
    const runtime::DeviceCaps& caps = dev->caps();
    std::string flex;
    for (const auto& s : caps.coopmat2_flexible_shapes)
      flex += (flex.empty() ? "" : ",") + std::string("\"") + std::to_string(s.m) + "x" +
              std::to_string(s.n) + "x" + std::to_string(s.k) + " " + s.a_type + "*" + s.b_type + "+" +
              s.c_type + " " + s.scope + " wg" + std::to_string(s.workgroup_invocations) + "\"";
    std::printf(
        "{\"bench\":\"vk_coopmat2_caps\",\"device\":\"%s\",\"workgroup_scope\":%s,\"tensor_addressing\":%s,"
        "\"flexible\":[%s]}\n",
        caps.name.c_str(), caps.coopmat2_workgroup ? "true" : "false",
        caps.coopmat2_tensor_addressing ? "true" : "false", flex.c_str());
    if (!caps.coopmat2_workgroup || !caps.timestamps) {
      std::printf(
          "{\"bench\":\"vk_coopmat2\",\"device\":\"%s\",\"skipped\":\"no workgroup-scope cooperative "
          "matrices (VK_NV_cooperative_matrix2) or no timestamps\"}\n",
          caps.name.c_str());
      return 0;
    }
    if (wgs.empty())
      for (const auto& s : caps.coopmat2_flexible_shapes)
        if (s.a_type == "f16" && s.c_type == "f32" && s.scope == "workgroup" &&
            std::find(wgs.begin(), wgs.end(), s.workgroup_invocations) == wgs.end())
          wgs.push_back(s.workgroup_invocations);
    std::mt19937 rng(3);
    for (uint32_t n : sizes) {
      const uint64_t elems = uint64_t(n) * n;
      std::vector<float> ha(elems), hb(elems);
      std::vector<uint16_t> a16(elems), b16(elems);
      for (uint64_t i = 0; i < elems; ++i) {
        ha[i] = float(int(rng() % 17) - 8) / 4.0f;
        hb[i] = float(int(rng() % 17) - 8) / 4.0f;
        a16[i] = to_half(ha[i]);
        b16[i] = to_half(hb[i]);
      }
      runtime::Buffer A = dev->alloc(elems * 2), B = dev->alloc(elems * 2), C = dev->alloc(elems * 4);
      dev->upload(A, a16.data(), elems * 2);
      dev->upload(B, b16.data(), elems * 2);
      for (uint32_t wg : wgs) {
        for (const std::string& var : variants)
          for (const std::string& t : tiles) {
            uint32_t bm = 0, bn = 0, bk = 0;
            if (std::sscanf(t.c_str(), "%ux%ux%u", &bm, &bn, &bk) != 3)
              throw ConfigError("[bench_coopmat2] bad tile " + t);
            uint32_t wm = 0, wn = 0, pw = 0, depth = 1;
            const bool ws = ws_variant(var, wm, wn, pw, depth);
            if (ws && wg != wgs.front()) continue;  // its own invocation count, run once
            const uint32_t threads = ws ? 32 * (wm * wn + pw) : wg;
            const std::string label = "coopmat2_" + var + "_" + t + "_wg" + std::to_string(threads);
            std::string head = "{\"bench\":\"vk_coopmat2\",\"device\":\"" + caps.name +
                               "\",\"size\":" + std::to_string(n) + ",\"variant\":\"" + var +
                               "\",\"tile\":\"" + t + "\",\"workgroup\":" + std::to_string(threads) +
                               ",\"pad\":" + std::to_string(pad) + ",\"stages\":" + std::to_string(stages);
            if (n % bm || n % bn || n % bk) continue;
            if (ws) {
              if ((bm * bk / 8) % (32 * pw) || (bk * bn / 8) % (32 * pw) || bm % (16 * wm) || bn % (8 * wn) ||
                  bk % 16) {
                std::printf("%s,\"skipped\":\"tile and subgroups do not divide\"}\n", head.c_str());
                continue;
              }
            }
            if (var.rfind("staged", 0) == 0 || ws) {
              if (!ws && ((bm * bk / 8) % wg || (bk * bn / 8) % wg)) continue;  // whole uvec4s per thread
              // A workgroup over the device's shared memory lost the device on the H200 (stagedmf
              // 128x128x64).
              const uint64_t bytes = uint64_t(stages) * (bm * (bk / 8 + pad) + bk * (bn / 8 + pad)) * 16;
              if (bytes > caps.max_shared_memory) {
                std::printf("%s,\"skipped\":\"%llu bytes of shared memory, the device allows %u\"}\n",
                            head.c_str(), static_cast<unsigned long long>(bytes), caps.max_shared_memory);
                continue;
              }
            }
            if (tensor_variant(var) && !caps.coopmat2_tensor_addressing) {
              std::printf("%s,\"skipped\":\"no cooperativeMatrixTensorAddressing\"}\n", head.c_str());
              continue;
            }
            try {
              runtime::KernelDesc desc;
              desc.label = label;
              desc.spirv = compile(var, bm, bn, bk, wg, label, caps.fingerprint());
              desc.num_buffers = 3;
              desc.push_constant_bytes = 12;
              desc.capture =
                  runtime::PipelineCapture::Statistics;  // registers, where the driver reports them
              const runtime::KernelId kernel = dev->create_kernel(desc);
              for (const runtime::PipelineExecutable& ex : dev->pipeline_executables(kernel)) {
                for (const runtime::PipelineStatistic& st : ex.statistics)
                  if (st.name == "Register Count" || st.name == "Shared Memory Size")
                    head += ",\"" + st.name + "\":" + runtime::statistic_value(st).dump();
                break;
              }
              const uint32_t push[3] = {n, n, n};
              // Warm-up dispatches first in the same command buffer: the H200 idles at 345 MHz and short
              // bursts can run entirely at that clock (docs/performance.md, session 4's clock finding).
              const uint32_t total = reps + 1;
              auto list = dev->record(2 * total);
              runtime::Buffer bufs[3] = {A, B, C};
              for (uint32_t i = 0; i < warmup; ++i) {
                list->dispatch(kernel, bufs, std::as_bytes(std::span(push)), n / bn, n / bm);
                list->barrier();
              }
              for (uint32_t i = 0; i < total; ++i) {
                list->timestamp(2 * i);
                list->dispatch(kernel, bufs, std::as_bytes(std::span(push)), n / bn, n / bm);
                list->timestamp(2 * i + 1);
                list->barrier();
              }
              list->finish();
              dev->submit(*list);
              dev->wait();
              const std::vector<double> ts = dev->timestamps(*list);
              std::vector<double> ns;
              for (uint32_t i = 1; i < total; ++i) ns.push_back(ts[2 * i + 1] - ts[2 * i]);
              std::sort(ns.begin(), ns.end());
              // spot check 64 outputs
              std::vector<float> hc(elems);
              dev->download(C, hc.data(), elems * 4);
              int bad = 0;
              for (int s = 0; s < 64; ++s) {
                const uint64_t r = rng() % n, col = rng() % n;
                double ref = 0;
                for (uint32_t k = 0; k < n; ++k)
                  ref += double(ha[r * n + k]) * double(hb[uint64_t(k) * n + col]);
                if (std::fabs(ref - double(hc[r * n + col])) > 1e-3 * (1 + std::fabs(ref))) ++bad;
              }
              const double flops = 2.0 * double(n) * n * n;
              std::printf("%s,\"median_ms\":%.4f,\"tflops\":%.1f,\"spot_check_bad\":%d}\n", head.c_str(),
                          ns[ns.size() / 2] * 1e-6, flops / ns[ns.size() / 2] * 1e-3, bad);
            } catch (const Error& e) {
              std::string msg = e.what();
              for (char& ch : msg)
                if (ch == '"' || ch == '\n' || ch == '\\') ch = ' ';
              std::printf("%s,\"error\":\"%s\"}\n", head.c_str(), msg.substr(0, 300).c_str());
            }
            std::fflush(stdout);
          }
      }
      dev->free(A);
      dev->free(B);
      dev->free(C);
    }
    for (const std::string& m : dev->validation_messages()) std::fprintf(stderr, "%s\n", m.c_str());
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_coopmat2: %s\n", e.what());
    return 1;
  }
}
