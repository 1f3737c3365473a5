// check_matmul and the start-up self-test probe_matmul_tiers.
#include "meganeura/kernels/matmul_check.hpp"

#include <cmath>
#include <random>
#include <tuple>

#include "meganeura/core/error.hpp"
#include "meganeura/ir/storage.hpp"

namespace meganeura::kernels {
namespace {

// Device bytes for n elements, rounded up to 16 so that vector loads at the end stay inside the buffer.
uint64_t padded_bytes(uint64_t elements, uint32_t elem_size) { return (elements * elem_size + 15) / 16 * 16; }

struct DeviceBuffers {
  runtime::Device& dev;
  std::vector<runtime::Buffer> bufs;
  explicit DeviceBuffers(runtime::Device& d) : dev(d) {}
  ~DeviceBuffers() {
    for (const auto& b : bufs) dev.free(b);
  }
  runtime::Buffer add(uint64_t bytes) {
    bufs.push_back(dev.alloc(bytes));
    return bufs.back();
  }
};

// How an operand is stored for the kernel: f32, f16 (f16 inputs or an F16 load) or bf16 (a BF16 load).
enum class Stored { F32, F16, BF16 };

// x as the stored operand holds it, so that the CPU sees what the GPU sees.
float stored_value(float x, Stored st) {
  if (st == Stored::F16) return half_to_float(float_to_half(x));
  if (st == Stored::BF16) return bf16_bits_to_f32(f32_to_bf16_bits(x));
  return x;
}

std::vector<float> random_values(uint64_t n, std::mt19937& rng, Stored st) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = stored_value(dist(rng), st);
  return v;
}

void upload_operand(runtime::Device& dev, const runtime::Buffer& buf, const std::vector<float>& v,
                    Stored st) {
  if (st == Stored::F32) {
    dev.upload(buf, v.data(), v.size() * 4);
    return;
  }
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    h[i] = st == Stored::F16 ? float_to_half(v[i]) : f32_to_bf16_bits(v[i]);
  dev.upload(buf, h.data(), h.size() * 2);
}

}  // namespace

MatmulCheck check_matmul(runtime::Device& device, const shader::CompileOptions& options,
                         const MatmulShape& shape, MatmulTier tier, const MatmulCheckOptions& check) {
  return check_matmul(device, options, shape, choose_variant(device.caps(), shape, tier, check.tile), check);
}

MatmulCheck check_matmul(runtime::Device& device, const shader::CompileOptions& options,
                         const MatmulShape& shape, const MatmulVariant& variant,
                         const MatmulCheckOptions& check) {
  MatmulCheck result;
  try {
    const MatmulKernel kernel =
        select_matmul(check.caps ? *check.caps : device.caps(), shape, variant, check.epilogue);
    result.variant = kernel.variant;
    // An operand is stored as f16 with f16 inputs or an F16 load, as bf16 with a BF16 load (a 16-bit weight
    // against f32 values).
    for (MatmulLoad l : {shape.load_a, shape.load_b})
      if (l != MatmulLoad::Plain && l != MatmulLoad::F16 && l != MatmulLoad::BF16)
        throw ConfigError(
            std::string("[kernels::check_matmul] expected plain, f16 or bf16 operand loads, got ") +
            load_name(l));
    auto stored = [&](MatmulLoad l) {
      return shape.input == MatmulInput::F16 || l == MatmulLoad::F16 ? Stored::F16
             : l == MatmulLoad::BF16                                 ? Stored::BF16
                                                                     : Stored::F32;
    };
    const Stored st_a = stored(shape.load_a), st_b = stored(shape.load_b);
    std::mt19937 rng(check.seed);
    std::vector<float> a = random_values(elements_a(shape), rng, st_a);
    std::vector<float> b = random_values(elements_b(shape), rng, st_b);
    for (auto [given, op, name, st] :
         {std::tuple{&check.a_values, &a, "A", st_a}, {&check.b_values, &b, "B", st_b}}) {
      if (given->empty()) continue;
      if (given->size() != op->size())
        throw ShapeError(std::string("[kernels::check_matmul] expected ") + std::to_string(op->size()) +
                         " values of " + name + ", got " + std::to_string(given->size()));
      for (size_t i = 0; i < op->size(); ++i) (*op)[i] = stored_value((*given)[i], st);
    }
    const uint64_t nc = elements_c(shape);
    DeviceBuffers mem(device);
    const runtime::Buffer da = mem.add(padded_bytes(a.size(), st_a == Stored::F32 ? 4 : 2));
    const runtime::Buffer db = mem.add(padded_bytes(b.size(), st_b == Stored::F32 ? 4 : 2));
    const runtime::Buffer dc = mem.add(padded_bytes(nc, 4));
    upload_operand(device, da, a, st_a);
    upload_operand(device, db, b, st_b);
    if (shape.input == MatmulInput::F32RoundF16) {  // uploaded as f32; the kernel multiplies them rounded
      for (float& x : a) x = half_to_float(float_to_half(x));
      for (float& x : b) x = half_to_float(float_to_half(x));
    }
    device.fill_zero(dc);
    std::vector<runtime::Buffer> extra;
    for (const auto& e : check.extra) {
      extra.push_back(mem.add(padded_bytes(e.size(), 4)));
      device.upload(extra.back(), e.data(), e.size() * 4);
    }
    const runtime::KernelId id = device.create_kernel(build_matmul_kernel(kernel.pass, options));
    // The partials start as NaN, so that a partial product the fix-up reads but no slice wrote shows; the
    // tickets start at zero and must end there (the next dispatch's fix-up depends on it).
    SplitBuffers split;
    if (kernel.scratch_bytes > 0) {
      split.partials = mem.add(kernel.scratch_bytes);
      const std::vector<float> nan(kernel.scratch_bytes / 4, NAN);
      device.upload(split.partials, nan.data(), kernel.scratch_bytes);
      split.tickets = mem.add(kernel.ticket_bytes);
      device.fill_zero(split.tickets);
    }
    auto list = device.record();
    record_matmul(*list, id, kernel, da, db, dc, extra, split);
    list->finish();
    device.submit(*list);
    device.wait();
    std::vector<float> got(nc);
    device.download(dc, got.data(), nc * 4);
    if (kernel.ticket_bytes > 0) {
      std::vector<uint32_t> tickets(kernel.ticket_bytes / 4);
      device.download(split.tickets, tickets.data(), kernel.ticket_bytes);
      for (size_t t = 0; t < tickets.size(); ++t)
        if (tickets[t] != 0)
          throw DeviceError(
              "[kernels::check_matmul] expected every split-K ticket back at zero, got ticket " +
              std::to_string(t) + " at " + std::to_string(tickets[t]));
    }

    std::vector<float> want(nc, 0.0f);
    matmul_reference(shape, a.data(), b.data(), want.data());
    // |a||b| summed per output bounds the rounding error of any summation order.
    std::vector<float> abs_a(a.size()), abs_b(b.size()), scale(nc, 0.0f);
    for (size_t i = 0; i < a.size(); ++i) abs_a[i] = std::fabs(a[i]);
    for (size_t i = 0; i < b.size(); ++i) abs_b[i] = std::fabs(b[i]);
    matmul_reference(shape, abs_a.data(), abs_b.data(), scale.data());
    const MatmulPush& p = kernel.pass.push;
    result.ok = true;
    for (uint32_t q = 0; q < shape.batch && result.ok; ++q) {
      for (uint32_t i = 0; i < shape.m && result.ok; ++i) {
        for (uint32_t j = 0; j < shape.n; ++j) {
          const uint64_t at = uint64_t(q) * p.stride_c + uint64_t(i) * p.ldc + j;
          const float w = check.host_epilogue ? check.host_epilogue(want[at], i, j, q) : want[at];
          const double err = std::fabs(double(got[at]) - double(w)) / (double(scale[at]) + 1e-3);
          result.max_err = std::max(result.max_err, std::isnan(err) ? INFINITY : err);
          if (!(err <= check.tolerance)) {
            result.ok = false;
            result.detail = "C[" + std::to_string(q) + "][" + std::to_string(i) + "][" + std::to_string(j) +
                            "] = " + std::to_string(got[at]) + ", expected " + std::to_string(w);
            break;
          }
        }
      }
    }
    // Bytes outside the logical C (ldc padding) must stay untouched.
    for (uint64_t at = 0; at < nc && result.ok; ++at) {
      const uint64_t q = at / p.stride_c, r = at % p.stride_c;
      if (q < shape.batch && r / p.ldc < shape.m && r % p.ldc < shape.n) continue;
      if (got[at] != 0.0f) {
        result.ok = false;
        result.detail = "wrote outside C at element " + std::to_string(at);
      }
    }
    if (result.ok) result.detail = "max relative error " + std::to_string(result.max_err);
  } catch (const Error& e) {
    result.ok = false;
    result.detail = e.what();
  }
  return result;
}

std::string MatmulTierChoice::to_text() const {
  std::string s = std::string("matmul tier: ") + tier_name(best) + "\n";
  for (const TierProbe& p : probes) {
    s += std::string("  ") + tier_name(p.tier) + (p.ok ? ": ok, " : ": failed, ") + p.detail + "\n";
  }
  return s;
}

MatmulTierChoice probe_matmul_tiers(runtime::Device& device, const shader::CompileOptions& options,
                                    std::optional<MatmulTier> forced) {
  std::vector<MatmulTier> candidates;
  if (!forced) {
    // KHR first: the same kernel runs faster through it on NVIDIA (docs/performance.md), and KHR is what
    // other vendors expose.
    candidates = {MatmulTier::CoopMatKHR, MatmulTier::CoopMatNV};
  } else if (*forced == MatmulTier::CoopMatNV || *forced == MatmulTier::CoopMatKHR) {
    candidates = {*forced};
  }  // scalar or gemv: nothing cooperative to probe
  candidates.push_back(MatmulTier::Scalar);
  MatmulTierChoice choice;
  bool chosen = false;
  for (MatmulTier tier : candidates) {
    TierProbe probe{tier, true, ""};
    // Cooperative tiers read f16 buffers (benchmarks) and f32 buffers rounded on load (Mixed16 sessions).
    const std::vector<MatmulInput> inputs =
        tier == MatmulTier::Scalar ? std::vector<MatmulInput>{MatmulInput::F32}
                                   : std::vector<MatmulInput>{MatmulInput::F16, MatmulInput::F32RoundF16};
    // Aligned (16-byte loads, direct stores) and ragged (element loads, masked stores) in every transpose.
    uint32_t seed = 7;
    for (size_t q = 0; q < 2 * inputs.size(); ++q) {
      const bool ragged = q % 2 == 1;
      const MatmulInput input = inputs[q / 2];
      for (int t = 0; t < 3 && probe.ok; ++t) {
        MatmulShape s;
        s.m = ragged ? 70 : 128;
        s.n = ragged ? 45 : 128;
        s.k = ragged ? 83 : 64;
        s.batch = ragged ? 2 : 1;
        s.trans_a = t == 1;
        s.trans_b = t == 2;
        s.input = input;
        if (const std::string why = tier_unavailable(device.caps(), s, tier); !why.empty()) {
          probe.ok = false;
          probe.detail = why;
          break;
        }
        MatmulCheckOptions opt;
        opt.seed = seed++;
        // Ragged problems also run split into 3 slices of K (83 = 32 + 32 + 19).
        MatmulVariant v = choose_variant(device.caps(), s, tier);
        v.split_k = ragged ? 3 : 1;
        const MatmulCheck r = check_matmul(device, options, s, v, opt);
        probe.detail = r.detail;
        if (!r.ok) {
          probe.ok = false;
          probe.detail = (ragged ? "ragged " : "aligned ") +
                         std::string(t == 0   ? "A*B"
                                     : t == 1 ? "At*B"
                                              : "A*Bt") +
                         " " + v.to_string() + ": " + r.detail;
        }
      }
    }
    if (probe.ok && !chosen) {
      choice.best = tier;
      chosen = true;
    }
    choice.probes.push_back(probe);
  }
  return choice;
}

}  // namespace meganeura::kernels
