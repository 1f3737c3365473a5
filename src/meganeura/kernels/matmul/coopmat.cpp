// The cooperative tiers: GL_NV_cooperative_matrix, f16 inputs, f32 accumulation (coopmat.comp and its
// pieces); CoopMatKHR is the same GLSL compiled to NV SPIR-V, validated, then rewritten to
// SPV_KHR_cooperative_matrix (shader/coopmat_khr.hpp). The tile (CoopMatTile) sets the defines; the K loop is
// written out by coopmat_ring_loop (two shared stages) or taken from coopmat_one_stage.glsl /
// coopmat_workgroup.glsl.
#include <algorithm>
#include <sstream>

#include "meganeura/core/error.hpp"
#include "meganeura/kernels/matmul/shaders.hpp"  // generated from kernels/matmul/*.comp, *.glsl
#include "meganeura/kernels/matmul/tiers.hpp"

namespace meganeura::kernels {

namespace glsl {
namespace {

std::string each_set(const std::string& text, uint32_t u) {
  std::string out;
  for (char ch : text) out += ch == '@' ? std::to_string(u) : std::string(1, ch);
  return out;
}

// coopmat_set.glsl as one array of a single set indexed by a `set` argument: ra[1][A_VPT], fetch(uint set,
// ..).
std::string indexed_set() {
  std::string out = shaders::coopmat_set_glsl;
  auto all = [&out](const std::string& from, const std::string& to) {
    for (size_t at = out.find(from); at != std::string::npos; at = out.find(from, at + to.size()))
      out.replace(at, from.size(), to);
  };
  all("uvec4 ra@[A_VPT], rb@[B_VPT];", "uvec4 ra[1][A_VPT], rb[1][B_VPT];");
  all("ra@[", "ra[set][");
  all("rb@[", "rb[set][");
  all("fetch@(", "fetch(uint set, ");
  all("stash@(", "stash(uint set, ");
  all("@", "`set`");  // comments
  return out;
}

// The two-stage K loop over `tiles` tiles of BK from kb, with a ring of `depth` register sets. Tile t comes
// through set t % depth, so the loop is written out `depth` times per trip with t0 + u for t: refill set u
// `depth` tiles ahead, multiply stage t & 1, store set (u + 1) % depth (tile t + 1) into the other stage
// (last read before the previous barrier), one barrier. Full trips run unguarded (guarding each tile inside
// the trip compiles to slower code); the last tiles % depth follow one by one.
std::string coopmat_ring_loop(uint32_t depth) {
  const std::string d = std::to_string(depth);
  std::string s;
  for (uint32_t u = 0; u < depth; ++u) {
    const std::string us = std::to_string(u);
    s += "  if (" + us + "u < tiles) fetch" + us + "(abase, bbase, m0, n0, kb + " + us + "u * BK);\n";
  }
  auto tile = [&](uint32_t u) {
    const std::string us = std::to_string(u), next = std::to_string((u + 1) % depth);
    return "        const uint t = t0 + " + us + "u;\n        if (t + " + d + "u < tiles) fetch" + us +
           "(abase, bbase, m0, n0, kb + (t + " + d + "u) * BK);\n        const uint cur = t & 1u;\n" +
           shaders::coopmat_multiply_glsl + "        if (t + 1u < tiles) stash" + next +
           "((t + 1u) & 1u);\n        barrier();\n";
  };
  s += "  stash0(0u);\n  barrier();\n  uint t0 = 0u;\n";
  s += "  for (; t0 + " + d + "u <= tiles; t0 += " + d + "u) {\n";
  for (uint32_t u = 0; u < depth; ++u) s += "      {\n" + tile(u) + "      }\n";
  s += "  }\n";
  for (uint32_t u = 0; u + 1 < depth; ++u)
    s += "  if (t0 + " + std::to_string(u) + "u < tiles) {\n" + tile(u) + "  }\n";
  return s;
}

}  // namespace

std::string coopmat_nv(const MatmulEpilogue& epilogue, uint32_t stages, uint32_t depth, bool workgroup) {
  std::string body = shaders::coopmat_comp, sets, loop;
  auto put = [](std::string& text, const std::string& key, const std::string& with) {
    text.replace(text.find(key), key.size(), with);
  };
  if (stages == 1) {
    sets = indexed_set();
    loop = workgroup ? shaders::coopmat_workgroup_glsl : shaders::coopmat_one_stage_glsl;
    put(loop, "@MULTIPLY@", shaders::coopmat_multiply_glsl);
  } else {
    for (uint32_t u = 0; u < depth; ++u) sets += each_set(shaders::coopmat_set_glsl, u);
    loop = coopmat_ring_loop(depth);
  }
  put(body, "@SETS@", sets);
  put(body, "@KLOOP@", loop);
  return common(epilogue, true) + shaders::split_glsl + body + shaders::split_fixup_glsl;
}
}  // namespace glsl

using tiers::ceil_div;
using tiers::resolved;
using tiers::row_starts_aligned;

std::string CoopMatTile::to_string() const {
  std::string s = std::to_string(bm) + "x" + std::to_string(bn) + "x" + std::to_string(bk) + "/" +
                  std::to_string(warps_m) + "x" + std::to_string(warps_n);
  if (group != 0) s += "/g" + std::to_string(group);
  if (stages != 2) s += "/s" + std::to_string(stages);
  if (depth != 1) s += "/d" + std::to_string(depth);
  if (workgroup) s += "/w";
  return s;
}

CoopMatTile CoopMatTile::parse(const std::string& s) {
  CoopMatTile t;
  char x1, x2, slash, x3;
  std::istringstream in(s);
  auto bad = [&] {
    return ConfigError(
        "[kernels::CoopMatTile::parse] expected BMxBNxBK/WMxWN[/gG][/sS][/dD][/w] like 128x128x32/2x4/g8, "
        "got '" +
        s + "'");
  };
  if (!(in >> t.bm >> x1 >> t.bn >> x2 >> t.bk >> slash >> t.warps_m >> x3 >> t.warps_n) || x1 != 'x' ||
      x2 != 'x' || slash != '/' || x3 != 'x') {
    throw bad();
  }
  char key;
  while (in >> slash) {
    uint32_t v;
    if (slash != '/' || !(in >> key)) throw bad();
    if (key == 'w' && !t.workgroup && (in.peek() == '/' || in.peek() == EOF)) {
      t.workgroup = true;
      continue;
    }
    if (!(in >> v)) throw bad();
    if (key == 'g') {
      t.group = v;
    } else if (key == 's' && (v == 1 || v == 2)) {
      t.stages = v;
    } else if (key == 'd' && v >= 1 && v <= 3) {
      t.depth = v;
    } else {
      throw bad();
    }
  }
  return t;
}

CoopMatTile default_coopmat_tile(const MatmulShape& s) {
  if (uint64_t(ceil_div(s.m, 128)) * ceil_div(s.n, 256) * s.batch < 256) return {};
  CoopMatTile t;
  t.bn = 256;
  t.warps_m = 4;
  t.group = 4;
  t.stages = 1;
  return t;
}

namespace {

// Bytes of shared memory the cooperative kernel declares for `tile` (see the GLSL: `stages` copies of each
// padded tile, in 16-byte units, plus 128 floats of edge staging per subgroup).
uint32_t coopmat_shared_bytes(const CoopMatTile& t, bool trans_a, bool trans_b) {
  const uint32_t a_rows = trans_a ? t.bk : t.bm, a_cols = trans_a ? t.bm : t.bk;
  const uint32_t b_rows = trans_b ? t.bn : t.bk, b_cols = trans_b ? t.bk : t.bn;
  return t.stages * 16 * (a_rows * ((a_cols + 8) / 8) + b_rows * ((b_cols + 8) / 8)) +
         (t.workgroup ? 0 : 512 * t.warps_m * t.warps_n);
}

// coopMatStore to global memory writes whole 16x8 tiles: only with 16-byte aligned rows and no epilogue.
bool stores_direct(const MatmulShape& ps, const MatmulEpilogue& pe) {
  return pe.expr.empty() && pe.store.empty() && pe.c_type == "float" && ps.ldc % 4 == 0 &&
         ps.stride_c % 4 == 0;
}

// Whether a workgroup-scope tile's loads go unguarded (FULL_TILES): M, N and K multiples of the tile, 16-byte
// aligned rows, one K slice.
bool full_tiles(const MatmulShape& s, const CoopMatTile& t, uint32_t split) {
  return t.workgroup && split == 1 && s.m % t.bm == 0 && s.n % t.bn == 0 && s.k % t.bk == 0 &&
         row_starts_aligned(s, 8);
}

std::string tile_problem(const runtime::DeviceCaps& caps, const CoopMatTile& t, bool trans_a, bool trans_b) {
  const uint32_t warps = t.warps_m * t.warps_n;
  if (warps != 4 && warps != 8 && warps != 16)
    return "the tile needs 4, 8 or 16 subgroups, got " + t.to_string();
  if (caps.max_workgroup_invocations != 0 && t.threads() > caps.max_workgroup_invocations) {
    return "tile " + t.to_string() + " needs " + std::to_string(t.threads()) +
           " invocations, the device allows " + std::to_string(caps.max_workgroup_invocations);
  }
  if (t.stages == 1 && t.depth != 1) return "one shared stage takes depth 1, got " + t.to_string();
  if (t.workgroup) {
    // A flexible f16 x f16 -> f32 workgroup-scope shape for this many invocations whose granularities divide
    // the tile.
    const auto fits = [&](const runtime::CoopMatShape& f) {
      return f.scope == "workgroup" && f.a_type == "f16" && f.b_type == "f16" && f.c_type == "f32" &&
             f.workgroup_invocations == t.threads() && f.m && f.n && f.k && t.bm % f.m == 0 &&
             t.bn % f.n == 0 && t.bk % f.k == 0;
    };
    if (!caps.coopmat2_workgroup)
      return "tile " + t.to_string() +
             " needs workgroup-scope cooperative matrices (VK_NV_cooperative_matrix2)";
    if (std::none_of(caps.coopmat2_flexible_shapes.begin(), caps.coopmat2_flexible_shapes.end(), fits)) {
      return "tile " + t.to_string() +
             " is no multiple of a workgroup-scope f16 shape the device lists for " +
             std::to_string(t.threads()) + " invocations";
    }
  } else if (t.bm % (16 * t.warps_m) != 0 || t.bn % (8 * t.warps_n) != 0 || t.bk % 16 != 0) {
    return "each subgroup patch must be a multiple of 16x8 and BK of 16, got " + t.to_string();
  }
  if ((t.bm * t.bk) % (8 * t.threads()) != 0 || (t.bn * t.bk) % (8 * t.threads()) != 0) {
    return "each shared tile must be whole 16-byte loads for " + std::to_string(t.threads()) +
           " invocations, got " + t.to_string();
  }
  const uint32_t bytes = coopmat_shared_bytes(t, trans_a, trans_b);
  if (bytes > caps.max_shared_memory) {
    return "tile " + t.to_string() + " needs " + std::to_string(bytes) +
           " bytes of shared memory, the device has " + std::to_string(caps.max_shared_memory);
  }
  return "";
}

}  // namespace

CoopMatTile default_coopmat_tile(const runtime::DeviceCaps& caps, const MatmulShape& raw, MatmulTier tier,
                                 const MatmulEpilogue& epilogue) {
  const CoopMatTile t = default_coopmat_tile(raw);
  const MatmulShape s = resolved(raw);
  const CoopMatTile w = CoopMatTile::parse("128x128x32/2x2/s1/w");
  // A·Bᵀ gains with guarded loads too; A·B and Aᵀ·B only when the loads go unguarded. f16 buffers only:
  // rounding f32 buffers on load (Mixed16) runs at half the subgroup tile's speed.
  const bool ab_t = s.trans_b && !s.trans_a;
  // Small outputs (SmolLM2's M = 128 rows against N = 576 .. 1536): where even split 128x128 tiles leave more
  // than half the device idle, the 64x64 tile (4 subgroups) gives four times the workgroups.
  if (tiers::cooperative(tier) && t == CoopMatTile{} && s.m >= 64 && s.n >= 64) {
    MatmulVariant v;
    v.tier = tier;
    v.coop = t;
    if (2 * tiers::fill_workgroups(caps, s, v) < target_workgroups(caps)) {
      const CoopMatTile small = CoopMatTile::parse("64x64x32/2x2");
      if (tile_problem(caps, small, s.trans_a, s.trans_b).empty()) return small;
    }
  }
  if (t.bn != 256 || tier != MatmulTier::CoopMatKHR || !caps.coopmat2_workgroup ||
      s.input != MatmulInput::F16 || s.m % w.bm || s.n % w.bn || !stores_direct(s, epilogue) ||
      !(ab_t || full_tiles(s, w, 1))) {
    return t;
  }
  return tile_problem(caps, w, s.trans_a, s.trans_b).empty() ? w : t;
}

namespace tiers {

std::string coopmat_unavailable(const runtime::DeviceCaps& caps, const MatmulShape& shape, MatmulTier tier) {
  const bool nv = tier == MatmulTier::CoopMatNV;
  if (nv ? !caps.coopmat_nv : !caps.coopmat_khr) {
    return std::string("the device has no ") +
           (nv ? "VK_NV_cooperative_matrix" : "VK_KHR_cooperative_matrix");
  }
  if (shape.input == MatmulInput::F32) return "cooperative tiers take f16 inputs, got f32";
  if (!caps.fp16_arithmetic) return "the device has no shaderFloat16";
  if (caps.subgroup_size != 32 &&
      !(caps.subgroup_size_control && caps.min_subgroup_size <= 32 && caps.max_subgroup_size >= 32)) {
    return "the kernel needs 32-wide subgroups, got " + std::to_string(caps.subgroup_size);
  }
  if (caps.max_shared_memory < 48 * 1024 - 4096) return "the kernel needs ~42 KiB of shared memory";
  const auto& shapes = nv ? caps.coopmat_nv_shapes : caps.coopmat_khr_shapes;
  const bool has = std::any_of(shapes.begin(), shapes.end(), [](const runtime::CoopMatShape& c) {
    return c.m == 16 && c.n == 8 && c.k == 16 && c.a_type == "f16" && c.b_type == "f16" &&
           c.c_type == "f32" && c.result_type == "f32" && c.scope == "subgroup";
  });
  if (!has) return "the device lists no subgroup f16 x f16 -> f32 16x8x16 shape";
  return "";
}

void coopmat_pass(const runtime::DeviceCaps& caps, MatmulTier tier, const MatmulShape& s,
                  const MatmulShape& ps, const MatmulEpilogue& pe, const CoopMatTile& tile, uint32_t split,
                  MatmulPass& pass, std::string& label) {
  auto flag = [](bool b) { return std::string(b ? "1" : "0"); };
  // 16-byte loads need every row start of A and B on an 8-half boundary: the contiguous extent, the
  // leading dimension and the batch stride all multiples of 8. Otherwise halves are loaded one by one.
  const bool vec = row_starts_aligned(s, 8);
  // Split, the tile's raw partial products go to the scratch (ps's C) and the epilogue runs in the fix-up.
  const bool direct = stores_direct(ps, split > 1 ? MatmulEpilogue{} : pe);
  if (const std::string why = tile_problem(caps, tile, s.trans_a, s.trans_b); !why.empty()) {
    throw ConfigError("[kernels::select_matmul] expected a cooperative tile that fits, got: " + why);
  }
  if (tile.workgroup && (tier != MatmulTier::CoopMatKHR || !direct || s.m % tile.bm || s.n % tile.bn)) {
    throw ConfigError("[kernels::select_matmul] expected, for the workgroup-scope tile " + tile.to_string() +
                      ", the coopmat-khr tier, no epilogue and M, N multiples of the tile; got " +
                      tier_name(tier) + (direct ? "" : " with an epilogue or an unaligned C") + ", M " +
                      std::to_string(s.m) + ", N " + std::to_string(s.n));
  }
  pass.source.glsl = glsl::coopmat_nv(pe, tile.stages, tile.depth, tile.workgroup);
  for (const auto& [name, v] : {std::pair{"BM", tile.bm},
                                {"BN", tile.bn},
                                {"BK", tile.bk},
                                {"WARPS_M", tile.warps_m},
                                {"WARPS_N", tile.warps_n}}) {
    pass.source.defines.push_back({name, std::to_string(v) + "u"});
  }
  pass.source.defines.push_back({"GROUP", std::to_string(tile.group)});  // tested by #if: no suffix
  pass.source.defines.push_back({"STAGES", std::to_string(tile.stages)});
  pass.source.defines.push_back({"LOCAL_SIZE", std::to_string(tile.threads())});
  pass.local_size = tile.threads();
  pass.source.defines.push_back({"VEC_LOADS", flag(vec)});
  pass.source.defines.push_back({"DIRECT_STORE", flag(direct)});
  pass.source.defines.push_back({"WG_SCOPE", flag(tile.workgroup)});
  pass.source.defines.push_back({"FULL_TILES", flag(full_tiles(s, tile, split))});
  // f32 rounded on 16-byte loads: the conversion itself rounds (ties to even, denormals kept) where the
  // device lets a shader ask for it, instead of to_in's integer arithmetic.
  pass.source.defines.push_back(
      {"RTE_F16", flag(vec && s.input == MatmulInput::F32RoundF16 && caps.f16_rte_conversion)});
  pass.rewrite_to_khr = tier == MatmulTier::CoopMatKHR;
  pass.grid[0] = ceil_div(s.n, tile.bn);
  pass.grid[1] = ceil_div(s.m, tile.bm);
  if (caps.subgroup_size != 32) pass.required_subgroup_size = 32;
  label += (vec ? "_v_" : "_s_") + std::to_string(tile.bm) + "x" + std::to_string(tile.bn) + "x" +
           std::to_string(tile.bk) + "w" + std::to_string(tile.warps_m) + "x" + std::to_string(tile.warps_n) +
           (tile.group ? "g" + std::to_string(tile.group) : "") +
           (tile.stages != 2 ? "s" + std::to_string(tile.stages) : "") +
           (tile.depth != 1 ? "d" + std::to_string(tile.depth) : "") + (tile.workgroup ? "w" : "");
}

}  // namespace tiers

}  // namespace meganeura::kernels
