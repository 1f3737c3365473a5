// Matmul tier selection, kernel building and dispatch recording (see matmul.hpp).
#include "meganeura/kernels/matmul.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "meganeura/core/error.hpp"
#include "meganeura/kernels/matmul_glsl.hpp"
#include "meganeura/shader/coopmat_khr.hpp"

namespace meganeura::kernels {
namespace {

std::string dims(const MatmulShape& s) {
  return std::to_string(s.batch) + "x" + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
}

// Leading dimensions and batch strides with the packed defaults filled in.
MatmulShape resolved(MatmulShape s) {
  if (s.lda == 0) s.lda = s.trans_a ? s.m : s.k;
  if (s.ldb == 0) s.ldb = s.trans_b ? s.k : s.n;
  if (s.ldc == 0) s.ldc = s.n;
  if (s.stride_a == 0) s.stride_a = s.lda * (s.trans_a ? s.k : s.m);
  if (s.stride_b == 0) s.stride_b = s.ldb * (s.trans_b ? s.n : s.k);
  if (s.stride_c == 0) s.stride_c = s.ldc * s.m;
  return s;
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
                     std::to_string(min_lda) + ", ldb >= " + std::to_string(min_ldb) + ", ldc >= " +
                     std::to_string(raw.n) + "), got " + std::to_string(s.lda) + ", " + std::to_string(s.ldb) +
                     ", " + std::to_string(s.ldc));
  }
}

uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

// Scalar tier: outputs of fewer 128x128 tiles than this take the 16x16 tile.
constexpr uint64_t kSmallGrid = 32;

}  // namespace

const char* tier_name(MatmulTier t) {
  switch (t) {
    case MatmulTier::Gemv: return "gemv";
    case MatmulTier::Scalar: return "scalar";
    case MatmulTier::CoopMatNV: return "coopmat-nv";
    case MatmulTier::CoopMatKHR: return "coopmat-khr";
  }
  return "?";
}

MatmulTier parse_tier(const std::string& name) {
  for (MatmulTier t : {MatmulTier::Gemv, MatmulTier::Scalar, MatmulTier::CoopMatNV, MatmulTier::CoopMatKHR}) {
    if (name == tier_name(t)) return t;
  }
  throw ConfigError("[kernels::parse_tier] expected one of gemv, scalar, coopmat-nv, coopmat-khr, got '" + name + "'");
}

uint64_t elements_a(const MatmulShape& raw) {
  const MatmulShape s = resolved(raw);
  return uint64_t(s.stride_a) * (s.batch - 1) + uint64_t(s.lda) * ((s.trans_a ? s.k : s.m) - 1) + (s.trans_a ? s.m : s.k);
}
uint64_t elements_b(const MatmulShape& raw) {
  const MatmulShape s = resolved(raw);
  return uint64_t(s.stride_b) * (s.batch - 1) + uint64_t(s.ldb) * ((s.trans_b ? s.n : s.k) - 1) + (s.trans_b ? s.k : s.n);
}
uint64_t elements_c(const MatmulShape& raw) {
  const MatmulShape s = resolved(raw);
  return uint64_t(s.stride_c) * (s.batch - 1) + uint64_t(s.ldc) * (s.m - 1) + s.n;
}

std::string tier_unavailable(const runtime::DeviceCaps& caps, const MatmulShape& shape, MatmulTier tier) {
  if (shape.input == MatmulInput::F16 && !caps.storage_16bit) return "the device has no 16-bit storage";
  switch (tier) {
    case MatmulTier::Gemv:
      if (shape.m > 8) return "GEMV handles M <= 8, got M = " + std::to_string(shape.m);
      return "";
    case MatmulTier::Scalar: return "";
    case MatmulTier::CoopMatNV:
    case MatmulTier::CoopMatKHR: {
      const bool nv = tier == MatmulTier::CoopMatNV;
      if (nv ? !caps.coopmat_nv : !caps.coopmat_khr) {
        return std::string("the device has no ") + (nv ? "VK_NV_cooperative_matrix" : "VK_KHR_cooperative_matrix");
      }
      if (shape.input == MatmulInput::F32) return "cooperative tiers take f16 inputs, got f32";
      if (!caps.fp16_arithmetic) return "the device has no shaderFloat16";
      if (caps.subgroup_size != 32 && !(caps.subgroup_size_control && caps.min_subgroup_size <= 32 &&
                                        caps.max_subgroup_size >= 32)) {
        return "the kernel needs 32-wide subgroups, got " + std::to_string(caps.subgroup_size);
      }
      if (caps.max_shared_memory < 48 * 1024 - 4096) return "the kernel needs ~42 KiB of shared memory";
      const auto& shapes = nv ? caps.coopmat_nv_shapes : caps.coopmat_khr_shapes;
      const bool has = std::any_of(shapes.begin(), shapes.end(), [](const runtime::CoopMatShape& c) {
        return c.m == 16 && c.n == 8 && c.k == 16 && c.a_type == "f16" && c.b_type == "f16" && c.c_type == "f32" &&
               c.result_type == "f32" && c.scope == "subgroup";
      });
      if (!has) return "the device lists no subgroup f16 x f16 -> f32 16x8x16 shape";
      return "";
    }
  }
  return "unknown tier";
}

MatmulTier choose_tier(const runtime::DeviceCaps& caps, const MatmulShape& shape, MatmulTier best) {
  if (shape.m <= 8) return MatmulTier::Gemv;
  if ((best == MatmulTier::CoopMatNV || best == MatmulTier::CoopMatKHR) && tier_unavailable(caps, shape, best).empty()) {
    return best;
  }
  return MatmulTier::Scalar;
}

std::string CoopMatTile::to_string() const {
  return std::to_string(bm) + "x" + std::to_string(bn) + "x" + std::to_string(bk) + "/" + std::to_string(warps_m) +
         "x" + std::to_string(warps_n);
}

CoopMatTile CoopMatTile::parse(const std::string& s) {
  CoopMatTile t;
  char x1, x2, slash, x3;
  std::istringstream in(s);
  if (!(in >> t.bm >> x1 >> t.bn >> x2 >> t.bk >> slash >> t.warps_m >> x3 >> t.warps_n) || x1 != 'x' || x2 != 'x' ||
      slash != '/' || x3 != 'x') {
    throw ConfigError("[kernels::CoopMatTile::parse] expected BMxBNxBK/WMxWN like 128x128x32/2x4, got '" + s + "'");
  }
  return t;
}

namespace {

// Bytes of shared memory the cooperative kernel declares for `tile` (see the GLSL: two stages of each
// padded tile, in 16-byte units, plus the 8 x 128 floats of edge staging).
uint32_t coopmat_shared_bytes(const CoopMatTile& t, bool trans_a, bool trans_b) {
  const uint32_t a_rows = trans_a ? t.bk : t.bm, a_cols = trans_a ? t.bm : t.bk;
  const uint32_t b_rows = trans_b ? t.bn : t.bk, b_cols = trans_b ? t.bk : t.bn;
  return 2 * 16 * (a_rows * ((a_cols + 8) / 8) + b_rows * ((b_cols + 8) / 8)) + 4096;
}

std::string tile_problem(const runtime::DeviceCaps& caps, const CoopMatTile& t, bool trans_a, bool trans_b) {
  if (t.warps_m * t.warps_n != 8) return "the tile needs 8 subgroups, got " + t.to_string();
  if (t.bm % (16 * t.warps_m) != 0 || t.bn % (8 * t.warps_n) != 0 || t.bk % 16 != 0) {
    return "each subgroup patch must be a multiple of 16x8 and BK of 16, got " + t.to_string();
  }
  if ((t.bm * t.bk) % 2048 != 0 || (t.bn * t.bk) % 2048 != 0) {
    return "each shared tile must be whole 16-byte loads for 256 threads, got " + t.to_string();
  }
  const uint32_t bytes = coopmat_shared_bytes(t, trans_a, trans_b);
  if (bytes > caps.max_shared_memory) {
    return "tile " + t.to_string() + " needs " + std::to_string(bytes) + " bytes of shared memory, the device has " +
           std::to_string(caps.max_shared_memory);
  }
  return "";
}

}  // namespace

MatmulKernel select_matmul(const runtime::DeviceCaps& caps, const MatmulShape& raw, MatmulTier tier,
                           const MatmulEpilogue& epilogue, const CoopMatTile& tile) {
  check_shape(raw);
  if (const std::string why = tier_unavailable(caps, raw, tier); !why.empty()) {
    throw ConfigError(std::string("[kernels::select_matmul] expected a tier that can run ") + dims(raw) + ", got " +
                      tier_name(tier) + ": " + why);
  }
  const MatmulShape s = resolved(raw);
  MatmulKernel k;
  k.tier = tier;
  k.num_buffers = 3 + epilogue.extra_buffers;
  k.push = {s.m, s.n, s.k, s.lda, s.ldb, s.ldc, s.stride_a, s.stride_b, s.stride_c};
  auto flag = [](bool b) { return std::string(b ? "1" : "0"); };
  k.source.defines = {{"TRANS_A", flag(s.trans_a)},
                      {"TRANS_B", flag(s.trans_b)},
                      {"INPUT_F16", flag(s.input == MatmulInput::F16)},
                      {"INPUT_ROUND_F16", flag(s.input == MatmulInput::F32RoundF16)},
                      {"HAS_EPILOGUE", flag(!epilogue.expr.empty())}};
  std::string variant = std::string(s.trans_a ? "t" : "n") + (s.trans_b ? "t" : "n");
  switch (tier) {
    case MatmulTier::Gemv:
      k.source.glsl = glsl::gemv(epilogue);
      k.grid[0] = ceil_div(s.n, s.trans_b ? 8 : 64);
      break;
    case MatmulTier::Scalar: {
      // A 128x128 tile leaves most of a large GPU idle when the output is small (the MLP's 32x128 layer is one
      // workgroup walking K alone); below kSmallGrid such tiles, 16x16 tiles of one output per thread.
      const bool small = uint64_t(ceil_div(s.m, 128)) * ceil_div(s.n, 128) * s.batch < kSmallGrid;
      const uint32_t t = small ? 16 : 128;
      k.source.glsl = small ? glsl::scalar_small(epilogue) : glsl::scalar(epilogue);
      k.grid[0] = ceil_div(s.n, t);
      k.grid[1] = ceil_div(s.m, t);
      variant += small ? "_16" : "_128";
      break;
    }
    case MatmulTier::CoopMatNV:
    case MatmulTier::CoopMatKHR: {
      // 16-byte loads need every row start of A and B on an 8-half boundary: the contiguous extent, the
      // leading dimension and the batch stride all multiples of 8. Otherwise halves are loaded one by one.
      const bool vec = (s.trans_a ? s.m : s.k) % 8 == 0 && s.lda % 8 == 0 && s.stride_a % 8 == 0 &&
                       (s.trans_b ? s.k : s.n) % 8 == 0 && s.ldb % 8 == 0 && s.stride_b % 8 == 0;
      // coopMatStore to global memory writes whole 16x8 tiles: only with 16-byte aligned rows and no epilogue.
      const bool direct = epilogue.expr.empty() && epilogue.c_type == "float" && s.ldc % 4 == 0 && s.stride_c % 4 == 0;
      if (const std::string why = tile_problem(caps, tile, s.trans_a, s.trans_b); !why.empty()) {
        throw ConfigError("[kernels::select_matmul] expected a cooperative tile that fits, got: " + why);
      }
      k.source.glsl = glsl::coopmat_nv(epilogue);
      for (const auto& [name, v] : {std::pair{"BM", tile.bm}, {"BN", tile.bn}, {"BK", tile.bk},
                                    {"WARPS_M", tile.warps_m}, {"WARPS_N", tile.warps_n}}) {
        k.source.defines.push_back({name, std::to_string(v) + "u"});
      }
      k.source.defines.push_back({"VEC_LOADS", flag(vec)});
      k.source.defines.push_back({"DIRECT_STORE", flag(direct)});
      k.rewrite_to_khr = tier == MatmulTier::CoopMatKHR;
      k.grid[0] = ceil_div(s.n, tile.bn);
      k.grid[1] = ceil_div(s.m, tile.bm);
      if (caps.subgroup_size != 32) k.required_subgroup_size = 32;
      variant += (vec ? "_v_" : "_s_") + std::to_string(tile.bm) + "x" + std::to_string(tile.bn) + "x" +
                 std::to_string(tile.bk) + "w" + std::to_string(tile.warps_m) + "x" + std::to_string(tile.warps_n);
      break;
    }
  }
  k.grid[2] = s.batch;
  if (k.grid[1] > caps.max_workgroup_count[1] || k.grid[2] > caps.max_workgroup_count[2] ||
      k.grid[0] > caps.max_workgroup_count[0]) {
    throw ShapeError("[kernels::select_matmul] expected a grid within the device's workgroup counts, got " + dims(raw));
  }
  k.source.label = std::string("matmul_") + tier_name(tier) + "_" + variant;
  return k;
}

runtime::KernelDesc build_matmul_kernel(const MatmulKernel& kernel, const shader::CompileOptions& options) {
  runtime::KernelDesc d;
  d.label = kernel.source.label;
  d.spirv = shader::compile_glsl(kernel.source, options).spirv;  // validated, NV for the cooperative tiers
  if (kernel.rewrite_to_khr) d.spirv = shader::rewrite_coopmat_nv_to_khr(d.spirv, d.label);
  d.num_buffers = kernel.num_buffers;
  d.push_constant_bytes = kernel.push_constant_bytes;
  d.spec_constants = kernel.spec_constants;
  d.required_subgroup_size = kernel.required_subgroup_size;
  return d;
}

void record_matmul(runtime::CommandList& list, runtime::KernelId id, const MatmulKernel& kernel,
                   const runtime::Buffer& a, const runtime::Buffer& b, const runtime::Buffer& c,
                   std::span<const runtime::Buffer> extra) {
  if (extra.size() + 3 != kernel.num_buffers) {
    throw DeviceError("[kernels::record_matmul] expected " + std::to_string(kernel.num_buffers - 3) +
                      " epilogue buffers for '" + kernel.source.label + "', got " + std::to_string(extra.size()));
  }
  std::vector<runtime::Buffer> bufs = {a, b, c};
  bufs.insert(bufs.end(), extra.begin(), extra.end());
  list.dispatch(id, bufs, std::as_bytes(std::span(&kernel.push, 1)), kernel.grid[0], kernel.grid[1], kernel.grid[2]);
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
