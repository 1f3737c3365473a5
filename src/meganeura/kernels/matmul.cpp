// Matmul tier selection, kernel building and dispatch recording (see matmul.hpp); each tier's shader and
// defines live in kernels/matmul/<tier>.cpp.
#include "meganeura/kernels/matmul.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <sstream>

#include "meganeura/core/error.hpp"
#include "meganeura/kernels/matmul/tiers.hpp"
#include "meganeura/shader/coopmat_khr.hpp"

namespace meganeura::kernels {

using tiers::block_code;
using tiers::block_type;
using tiers::ceil_div;
using tiers::cooperative;
using tiers::resolved;

namespace {

std::string dims(const MatmulShape& s) {
  return std::to_string(s.batch) + "x" + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
         std::to_string(s.k);
}

void check_shape(const MatmulShape& raw) {
  if (raw.m == 0 || raw.n == 0 || raw.k == 0 || raw.batch == 0) {
    throw ShapeError("[kernels::select_matmul] expected non-empty batch x M x N x K, got " + dims(raw));
  }
  // Indices are 32-bit in the kernels.
  const uint64_t max_elems = uint64_t(UINT32_MAX);
  const MatmulShape s = resolved(raw);
  if (elements_a(s) > max_elems || elements_b(s) > max_elems || elements_c(s) > max_elems ||
      uint64_t(s.lda) * (s.trans_a ? s.k : s.m) > max_elems) {
    throw ShapeError("[kernels::select_matmul] expected operands of at most 2^32 elements, got " + dims(raw));
  }
  const uint32_t min_lda = raw.trans_a ? raw.m : raw.k, min_ldb = raw.trans_b ? raw.k : raw.n;
  if (s.lda < min_lda || s.ldb < min_ldb || s.ldc < raw.n) {
    throw ShapeError("[kernels::select_matmul] expected leading dimensions covering a row (lda >= " +
                     std::to_string(min_lda) + ", ldb >= " + std::to_string(min_ldb) +
                     ", ldc >= " + std::to_string(raw.n) + "), got " + std::to_string(s.lda) + ", " +
                     std::to_string(s.ldb) + ", " + std::to_string(s.ldc));
  }
}

// `groups` workgroups of a flat launch spread over x (capped by the device) and y.
void flat_grid(const runtime::DeviceCaps& caps, uint64_t groups, uint32_t grid[3]) {
  groups = std::max<uint64_t>(groups, 1);
  const uint64_t max_x = caps.max_workgroup_count[0] ? caps.max_workgroup_count[0] : 65535;
  grid[0] = uint32_t(std::min(groups, max_x));
  grid[1] = uint32_t((groups + grid[0] - 1) / grid[0]);
}

// Assumed compute units where the device reports none (DeviceCaps::compute_units == 0).
constexpr uint32_t kDefaultComputeUnits = 64;

uint64_t output_grid(const MatmulShape& s, uint32_t tm, uint32_t tn) {
  return uint64_t(ceil_div(s.m, tm)) * ceil_div(s.n, tn) * s.batch;
}

}  // namespace

uint64_t elements_a(const MatmulShape& raw) {
  const MatmulShape s = resolved(raw);
  return uint64_t(s.stride_a) * (s.batch - 1) + uint64_t(s.lda) * ((s.trans_a ? s.k : s.m) - 1) +
         (s.trans_a ? s.m : s.k);
}
uint64_t elements_b(const MatmulShape& raw) {
  const MatmulShape s = resolved(raw);
  return uint64_t(s.stride_b) * (s.batch - 1) + uint64_t(s.ldb) * ((s.trans_b ? s.n : s.k) - 1) +
         (s.trans_b ? s.k : s.n);
}
uint64_t elements_c(const MatmulShape& raw) {
  const MatmulShape s = resolved(raw);
  return uint64_t(s.stride_c) * (s.batch - 1) + uint64_t(s.ldc) * (s.m - 1) + s.n;
}

bool is_block_load(MatmulLoad l) { return l >= MatmulLoad::Q4_0; }

uint32_t load_block_elems(MatmulLoad l) {
  switch (l) {
    case MatmulLoad::Q4_K:
    case MatmulLoad::Q5_K:
    case MatmulLoad::Q6_K: return 256;
    default: return is_block_load(l) ? 32 : 1;
  }
}

const char* load_name(MatmulLoad l) {
  static constexpr const char* kNames[] = {"plain", "f16",  "bf16", "q4_0", "q4_1", "q5_0",
                                           "q5_1",  "q8_0", "q4_k", "q5_k", "q6_k"};
  return kNames[size_t(l)];
}

uint64_t operand_bytes(MatmulLoad l, MatmulInput input, uint64_t elements) {
  if (is_block_load(l)) {
    const quant::TypeInfo& t = quant::info(block_type(l));
    return (elements + t.block_elems - 1) / t.block_elems * t.block_bytes;
  }
  if (l != MatmulLoad::Plain || input == MatmulInput::F16) return elements * 2;
  return elements * 4;
}

std::string tier_unavailable(const runtime::DeviceCaps& caps, const MatmulShape& shape, MatmulTier tier) {
  const bool loads = shape.load_a != MatmulLoad::Plain || shape.load_b != MatmulLoad::Plain;
  const bool loads16 = (shape.load_a != MatmulLoad::Plain && !is_block_load(shape.load_a)) ||
                       (shape.load_b != MatmulLoad::Plain && !is_block_load(shape.load_b));
  if ((shape.input == MatmulInput::F16 || loads16) && !caps.storage_16bit)
    return "the device has no 16-bit storage";
  if (loads && tier != MatmulTier::Gemv && tier != MatmulTier::Scalar)
    return "operands of 16-bit storage or block-quantized loads (f16/bf16/q* against another type) take the "
           "scalar "
           "and GEMV tiers";
  // Blocks along each stored row: the contiguous extent and every row start on a block boundary.
  for (int op = 0; op < 2; ++op) {
    const MatmulLoad l = op ? shape.load_b : shape.load_a;
    if (!is_block_load(l)) continue;
    const MatmulShape s = resolved(shape);
    const uint32_t be = load_block_elems(l);
    const uint32_t extent = op ? (s.trans_b ? s.k : s.n) : (s.trans_a ? s.m : s.k);
    const uint32_t ld = op ? s.ldb : s.lda, stride = op ? s.stride_b : s.stride_a;
    if (extent % be || ld % be || stride % be)
      return std::string(op ? "B" : "A") + " of " + load_name(l) + " blocks needs rows of whole " +
             std::to_string(be) + "-element blocks, got rows of " + std::to_string(extent) +
             " (leading dimension " + std::to_string(ld) + ", batch stride " + std::to_string(stride) + ")";
  }
  switch (tier) {
    case MatmulTier::Gemv: return tiers::gemv_unavailable(shape);
    case MatmulTier::Scalar: return "";
    case MatmulTier::CoopMatNV:
    case MatmulTier::CoopMatKHR: return tiers::coopmat_unavailable(caps, shape, tier);
  }
  return "unknown tier";
}

MatmulTier choose_tier(const runtime::DeviceCaps& caps, const MatmulShape& shape, MatmulTier best) {
  if (shape.m <= 8) return MatmulTier::Gemv;
  if (shape.load_a != MatmulLoad::Plain || shape.load_b != MatmulLoad::Plain) return MatmulTier::Scalar;
  if (shape.input == MatmulInput::F32RoundF16 &&
      uint64_t(shape.m) * shape.n * shape.k * std::max<uint32_t>(shape.batch, 1) < kMinCoopRoundedMacs) {
    return MatmulTier::Scalar;
  }
  if ((best == MatmulTier::CoopMatNV || best == MatmulTier::CoopMatKHR) &&
      tier_unavailable(caps, shape, best).empty()) {
    return best;
  }
  return MatmulTier::Scalar;
}

uint32_t target_workgroups(const runtime::DeviceCaps& caps) {
  return caps.compute_units ? caps.compute_units : kDefaultComputeUnits;
}

uint32_t split_chunk(uint32_t k, uint32_t split_k) {
  const uint32_t s = std::max<uint32_t>(split_k, 1);
  return std::max<uint32_t>(32, ((k + s - 1) / s + 31) / 32 * 32);
}

uint32_t split_count(uint32_t k, uint32_t split_k) {
  return std::max<uint32_t>(1, ceil_div(k, split_chunk(k, split_k)));
}

uint32_t choose_split(const runtime::DeviceCaps& caps, const MatmulShape& shape, const MatmulVariant& v) {
  if (v.tier == MatmulTier::Gemv) return 1;
  const uint64_t target = target_workgroups(caps);
  const uint64_t grid = cooperative(v.tier) ? output_grid(shape, v.coop.bm, v.coop.bn)
                                            : output_grid(shape, std::max(v.tile, 1u), std::max(v.tile, 1u));
  if (grid >= target || shape.k < kMinSplitK) return 1;
  // Cooperative tiles: as many slices as fit one wave (floor), so a grid that already keeps half the device
  // busy is not split: 2048x576 outputs (80 tiles of 128x128 on 132 SMs) split in two ran 1.25x slower than
  // unsplit at K = 576 and 1536 (H100, f16), the second wave of slices costing what the split saved. Scalar
  // tiles: enough slices to cover the device (ceiling); two of their workgroups share an SM (2048x576x1536
  // f32: scalar.128.k8 0.167 ms, scalar.64 unsplit 0.196).
  const uint64_t fill =
      cooperative(v.tier) ? std::max<uint64_t>(1, target / grid) : (target + grid - 1) / grid;
  const uint64_t want = std::min<uint64_t>(fill, shape.k / kMinSliceK);
  return split_count(shape.k, uint32_t(want));
}

uint32_t max_fill_split(uint32_t k) { return std::max(kMaxFillSplit, k / kLongSliceK); }

namespace tiers {
uint32_t fill_split(const runtime::DeviceCaps& caps, const MatmulShape& shape, const MatmulVariant& v) {
  return split_count(shape.k, std::min(choose_split(caps, shape, v), max_fill_split(shape.k)));
}
uint64_t fill_workgroups(const runtime::DeviceCaps& caps, const MatmulShape& shape, const MatmulVariant& v) {
  const uint64_t grid = cooperative(v.tier) ? output_grid(shape, v.coop.bm, v.coop.bn)
                                            : output_grid(shape, std::max(v.tile, 1u), std::max(v.tile, 1u));
  return grid * fill_split(caps, shape, v);
}
}  // namespace tiers

MatmulVariant choose_variant(const runtime::DeviceCaps& caps, const MatmulShape& shape, MatmulTier tier,
                             const CoopMatTile& coop) {
  MatmulVariant v;
  v.tier = tier;
  if (tier == MatmulTier::Gemv) return v;
  if (tier == MatmulTier::Scalar) {
    v.tile = 16;
    for (uint32_t t : {128u, 64u}) {
      if (output_grid(shape, t, t) >= target_workgroups(caps)) {
        v.tile = t;
        return v;
      }
    }
    // None fills unsplit: the largest that fits inside the output and, split, keeps at least half the device
    // busy; the 16 tile (a sixteenth of the work per K step) only where short K or a thin output leaves both
    // below that.
    // Of the two, the 64 tile where the 128 one's slices would be shorter than 2 x kMinSliceK: the last
    // workgroup of a tile sums its slices' partials alone (split_fixup.glsl), and a 128x128 tile's sum of six
    // 96-deep slices cost more than the slices (128x1536x576 in the F32 step: 90 x scalar.128.k6 3.66 ms,
    // 90 x scalar.64.k3 2.79, H100, same call). Longer slices keep the 128 tile: 576x576x2048 ran
    // scalar.128.k6 in 0.094 ms, scalar.64.k2 in 0.222 (timed alone).
    // The 128 tile with short slices, taken if the 64 tile does not qualify.
    std::optional<MatmulVariant> held;
    for (uint32_t t : {128u, 64u}) {
      MatmulVariant split = v;
      split.tile = t;
      if (t <= shape.m && t <= shape.n &&
          2 * tiers::fill_workgroups(caps, shape, split) >= target_workgroups(caps)) {
        split.split_k = tiers::fill_split(caps, shape, split);
        const bool short_slices = t == 128 && shape.k / split.split_k < 2 * kMinSliceK;
        if (!short_slices) return split;
        held = split;
      }
    }
    if (held) return *held;
  } else {
    v.coop = coop;
  }
  v.split_k = choose_split(caps, shape, v);
  return v;
}

std::vector<MatmulVariant> matmul_candidates(const runtime::DeviceCaps& caps, const MatmulShape& shape,
                                             MatmulTier best) {
  std::vector<MatmulVariant> out = {choose_variant(caps, shape, choose_tier(caps, shape, best))};
  auto add = [&](MatmulVariant v) {
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  };
  std::vector<MatmulTier> tiers;
  if (tier_unavailable(caps, shape, MatmulTier::Gemv).empty()) tiers.push_back(MatmulTier::Gemv);
  if (cooperative(best) && tier_unavailable(caps, shape, best).empty()) tiers.push_back(best);
  tiers.push_back(MatmulTier::Scalar);
  for (MatmulTier t : tiers) {
    const std::vector<uint32_t> tiles =
        t == MatmulTier::Scalar ? std::vector<uint32_t>{128, 64, 16} : std::vector<uint32_t>{0};
    for (uint32_t tile : tiles) {
      for (uint32_t s = 1; s <= 64; s *= 2) {
        if (s > 1 && (t == MatmulTier::Gemv || shape.k / s < kMinSliceK)) break;
        MatmulVariant v;
        v.tier = t;
        v.tile = tile;
        v.split_k = split_count(shape.k, s);
        add(v);
      }
    }
  }
  return out;
}

std::string MatmulVariant::to_string() const {
  std::string s = tier_name(tier);
  if (tier == MatmulTier::Scalar) s += "." + std::to_string(tile);
  if (cooperative(tier)) s += "." + coop.to_string();
  if (split_k > 1) s += ".k" + std::to_string(split_k);
  return s;
}

MatmulVariant MatmulVariant::parse(const std::string& text) {
  auto fail = [&]() -> MatmulVariant {
    throw ConfigError(
        "[kernels::MatmulVariant::parse] expected <tier>[.<tile>][.k<slices>] like scalar.64, "
        "scalar.16.k9, gemv or coopmat-nv.128x128x32/2x4.k2, got '" +
        text + "'");
  };
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, '.');) parts.push_back(part);
  if (parts.empty()) return fail();
  MatmulVariant v;
  v.tier = parse_tier(parts[0]);
  size_t next = 1;
  try {
    if (v.tier == MatmulTier::Scalar) {
      if (parts.size() < 2) return fail();
      v.tile = uint32_t(std::stoul(parts[next++]));
    } else if (cooperative(v.tier) && parts.size() > next && parts[next][0] != 'k') {
      v.coop = CoopMatTile::parse(parts[next++]);
    }
    if (parts.size() > next) {
      if (parts[next].size() < 2 || parts[next][0] != 'k') return fail();
      v.split_k = uint32_t(std::stoul(parts[next++].substr(1)));
    }
  } catch (const std::logic_error&) {
    return fail();
  }
  if (parts.size() != next || v.split_k == 0) return fail();
  return v;
}

MatmulKernel select_matmul(const runtime::DeviceCaps& caps, const MatmulShape& raw, MatmulTier tier,
                           const MatmulEpilogue& epilogue, const CoopMatTile& tile) {
  return select_matmul(caps, raw, choose_variant(caps, raw, tier, tile), epilogue);
}

MatmulKernel select_matmul(const runtime::DeviceCaps& caps, const MatmulShape& raw,
                           const MatmulVariant& variant, const MatmulEpilogue& epilogue) {
  check_shape(raw);
  const MatmulTier tier = variant.tier;
  if (const std::string why = tier_unavailable(caps, raw, tier); !why.empty()) {
    throw ConfigError(std::string("[kernels::select_matmul] expected a tier that can run ") + dims(raw) +
                      ", got " + tier_name(tier) + ": " + why);
  }
  const bool tile_ok = tier == MatmulTier::Scalar
                           ? variant.tile == 128 || variant.tile == 64 || variant.tile == 16
                           : variant.tile == 0;
  if (!tile_ok || variant.split_k == 0 || (tier == MatmulTier::Gemv && variant.split_k != 1)) {
    throw ConfigError(
        "[kernels::select_matmul] expected a variant of the family (scalar tile 128, 64 or 16; "
        "split_k >= 1; gemv unsplit), got " +
        variant.to_string());
  }
  const MatmulShape s = resolved(raw);
  MatmulKernel k;
  k.tier = tier;
  k.variant = variant;
  // Slices are normalised so that none is empty.
  const uint32_t split = split_count(s.k, variant.split_k);
  k.variant.split_k = split;
  if (split > 1) k.scratch_bytes = 4ull * split * s.batch * s.m * s.n;

  // One pass. Split, each slice stores its raw partial products packed [slice][batch][M][N] in the scratch
  // and the last slice to finish a tile sums them into C through the epilogue (split.glsl).
  MatmulShape ps = s;
  if (split > 1) {
    ps.ldc = s.n;
    ps.stride_c = s.m * s.n;
  }
  MatmulPass pass;
  pass.num_buffers = 3 + epilogue.extra_buffers + (split > 1 ? 2 : 0);
  pass.push = {s.m, s.n, s.k, s.lda, s.ldb, s.ldc, s.stride_a, s.stride_b, s.stride_c};
  auto flag = [](bool b) { return std::string(b ? "1" : "0"); };
  pass.source.defines = {{"TRANS_A", flag(s.trans_a)},
                         {"TRANS_B", flag(s.trans_b)},
                         {"INPUT_F16", flag(s.input == MatmulInput::F16)},
                         {"INPUT_ROUND_F16", flag(s.input == MatmulInput::F32RoundF16)},
                         {"A_LOAD", std::to_string(int(s.load_a))},
                         {"B_LOAD", std::to_string(int(s.load_b))},
                         {"HAS_EPILOGUE", flag(!epilogue.expr.empty())},
                         {"SPLIT_K", std::to_string(split)}};
  if (split > 1) {
    pass.source.defines.push_back({"SPLIT_PART", std::to_string(3 + epilogue.extra_buffers)});
    pass.source.defines.push_back({"SPLIT_TICKET", std::to_string(4 + epilogue.extra_buffers)});
  }
  std::string label = std::string(s.trans_a ? "t" : "n") + (s.trans_b ? "t" : "n");
  switch (tier) {
    case MatmulTier::Gemv: tiers::gemv_pass(caps, s, epilogue, pass, label); break;
    case MatmulTier::Scalar: tiers::scalar_pass(caps, s, variant.tile, epilogue, pass, label); break;
    case MatmulTier::CoopMatNV:
    case MatmulTier::CoopMatKHR:
      tiers::coopmat_pass(caps, tier, s, ps, epilogue, variant.coop, split, pass, label);
      break;
  }
  if (split > 1) k.ticket_bytes = 4ull * pass.grid[0] * pass.grid[1] * s.batch;
  pass.grid[2] = s.batch * split;
  if (split > 1) label += "_k" + std::to_string(split);
  pass.source.label = std::string("matmul_") + tier_name(tier) + "_" + label;
  if (pass.grid[0] > caps.max_workgroup_count[0] || pass.grid[1] > caps.max_workgroup_count[1] ||
      pass.grid[2] > caps.max_workgroup_count[2]) {
    throw ShapeError("[kernels::select_matmul] expected a grid within the device's workgroup counts, got " +
                     dims(raw) + " as " + k.variant.to_string());
  }
  k.pass = std::move(pass);
  return k;
}

MatmulPass f16_copy_pass(const runtime::DeviceCaps& caps, uint64_t na, uint64_t nb, uint64_t b_offset,
                         MatmulLoad load_b) {
  if (b_offset % 8 != 0 || b_offset < na || b_offset + nb >= (uint64_t(1) << 32))
    throw ShapeError("[kernels::f16_copy_pass] expected B's offset to be a multiple of 8 halves after A's " +
                     std::to_string(na) + " and below 2^32 with B's " + std::to_string(nb) + ", got " +
                     std::to_string(b_offset));
  MatmulPass pass;
  pass.source.label = "matmul_f16_copy";
  pass.source.glsl = glsl::f16_copy(na, nb, b_offset, load_b);
  pass.push_constant_bytes = 0;
  pass.local_size = 256;
  flat_grid(caps, ((na + 1) / 2 + (nb + 1) / 2 + 255) / 256, pass.grid);
  return pass;
}

runtime::KernelDesc build_matmul_kernel(const MatmulPass& pass, const shader::CompileOptions& options) {
  runtime::KernelDesc d;
  d.label = pass.source.label;
  d.spirv = shader::compile_glsl(pass.source, options).spirv;  // validated, NV for the cooperative tiers
  if (pass.rewrite_to_khr) d.spirv = shader::rewrite_coopmat_nv_to_khr(d.spirv, d.label);
  d.num_buffers = pass.num_buffers;
  d.push_constant_bytes = pass.push_constant_bytes;
  d.spec_constants = pass.spec_constants;
  d.required_subgroup_size = pass.required_subgroup_size;
  return d;
}

void record_matmul(runtime::CommandList& list, runtime::KernelId id, const MatmulKernel& kernel,
                   const runtime::Buffer& a, const runtime::Buffer& b, const runtime::Buffer& c,
                   std::span<const runtime::Buffer> extra, const SplitBuffers& split) {
  const MatmulPass& p = kernel.pass;
  const std::string& name = p.source.label;
  const uint32_t split_bindings = kernel.scratch_bytes > 0 ? 2 : 0;
  if (extra.size() + 3 + split_bindings != p.num_buffers) {
    throw DeviceError("[kernels::record_matmul] expected " +
                      std::to_string(p.num_buffers - 3 - split_bindings) + " epilogue buffers for '" + name +
                      "', got " + std::to_string(extra.size()));
  }
  if (split_bindings && (!split.partials.valid() || split.partials.size < kernel.scratch_bytes ||
                         !split.tickets.valid() || split.tickets.size < kernel.ticket_bytes)) {
    throw DeviceError("[kernels::record_matmul] expected split-K buffers of " +
                      std::to_string(kernel.scratch_bytes) + " and " + std::to_string(kernel.ticket_bytes) +
                      " bytes (partials, zeroed tickets) for '" + name + "', got " +
                      std::to_string(split.partials.size) + " and " + std::to_string(split.tickets.size));
  }
  std::vector<runtime::Buffer> bufs = {a, b, c};
  bufs.insert(bufs.end(), extra.begin(), extra.end());
  if (split_bindings) {
    bufs.push_back(split.partials);
    bufs.push_back(split.tickets);
  }
  list.dispatch(id, bufs, std::as_bytes(std::span(&p.push, 1)), p.grid[0], p.grid[1], p.grid[2]);
}

void matmul_reference(const MatmulShape& raw, const float* a, const float* b, float* c) {
  const MatmulShape s = resolved(raw);
  for (uint32_t q = 0; q < s.batch; ++q) {
    const float* A = a + uint64_t(q) * s.stride_a;
    const float* B = b + uint64_t(q) * s.stride_b;
    float* C = c + uint64_t(q) * s.stride_c;
    for (uint32_t i = 0; i < s.m; ++i) {
      for (uint32_t j = 0; j < s.n; ++j) {
        double acc = 0;
        for (uint32_t l = 0; l < s.k; ++l) {
          const float av = s.trans_a ? A[uint64_t(l) * s.lda + i] : A[uint64_t(i) * s.lda + l];
          const float bv = s.trans_b ? B[uint64_t(j) * s.ldb + l] : B[uint64_t(l) * s.ldb + j];
          acc += double(av) * double(bv);
        }
        C[uint64_t(i) * s.ldc + j] = static_cast<float>(acc);
      }
    }
  }
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  const int e = int(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {  // subnormal or zero: shift the implicit bit in, round to nearest even
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const uint32_t shift = uint32_t(14 - e);
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (uint32_t(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: still correct
  return static_cast<uint16_t>(sign | h);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {
      const float v = std::ldexp(float(mant), -24);
      std::memcpy(&x, &v, 4);
      x |= sign;
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace meganeura::kernels
