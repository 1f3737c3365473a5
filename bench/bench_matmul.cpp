// Matmul throughput per tier, timed with GPU timestamps; one JSON line per (tier, size, layout). Each result
// is spot-checked against a double-precision CPU dot product on sampled outputs. The torch twin is
// scripts/device/matmul_torch.py; scripts/device/matmul.sh runs both and prints the ratio table.
//   bench_matmul                                   1024, 4096, 8192; scalar (f32), coopmat-nv and coopmat-khr
//   (f16) bench_matmul --sizes 256 --tiers scalar --iters 3   (lavapipe smoke test) bench_matmul --tune
//   [--mixed16]                a one-matmul session per size and layout, GPU time before and after
//                                                  Session::tune_with (gpu_ms_untuned, gpu_ms_tuned, the
//                                                  variants)
//   options: --layouts nn,nt,tn  --tiles 128x128x32/2x4,128x256x16/2x4  --warmup N  --optimize (spirv-opt -O)
//   --no-probe
//            --variants scalar.64,scalar.128.k2,...  (kernels::MatmulVariant strings, instead of the tiers'
//            defaults; each line's "variant" says what ran)
//   bench_matmul --shapes smollm2 --tiers auto [--mixed16] [--candidates]
//                                                  SmolLM2-135M's products (GEMV at M = 1, 4, 8 in nn and nt;
//                                                  M = 128, 512, 2048 against N, K = 192 .. 1536 and the
//                                                  49152-wide head, forward and both gradients' layouts);
//                                                  --shapes MxNxK[:layout],... names others. `auto` is the
//                                                  tier a session takes (choose_tier against the self-test's
//                                                  best);
//                                                  --candidates times every variant
//                                                  kernels::matmul_candidates lists ("rule": true on the one
//                                                  choose_variant picks)
//   bench_matmul --dtype q4_1 [--mnk 1x576x576,16x1536x576]   x·Wᵀ with W [N, K] in GGUF blocks (q4_0 ..
//   q6_k),
//                                                  dequantized in the kernel; default shapes: SmolLM2-135M's
//                                                  products (N x K = 576x576, 1536x576, 576x1536, 49152x576)
//                                                  at M = 1 and 16; reports the weights' GB/s
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "meganeura/ir/storage.hpp"
#include "meganeura/kernels/matmul.hpp"
#include "meganeura/kernels/matmul_check.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/runtime/statistic_json.hpp"
#include "meganeura/session/session.hpp"
#include "timed_device.hpp"

namespace {

using namespace meganeura;
using kernels::MatmulTier;

struct Args {
  std::vector<uint32_t> sizes = {1024, 4096, 8192};
  std::vector<std::string> tiers = {"scalar", "coopmat-nv", "coopmat-khr"};
  std::vector<std::string> layouts = {"nn"};
  std::vector<std::string> tiles = {""};  // cooperative tiles, "" = the default
  std::vector<std::string> variants;      // forced variants; empty: choose_variant per tier
  uint32_t iters = 20, warmup = 5;
  bool optimize = false, probe = true;
  bool mixed16 = false;  // every tier but GEMV reads f32 buffers rounded to f16 on load (Mixed16 sessions)
  bool no_rte =
      false;  // --no-rte: round by integer arithmetic even where the conversion could (f16_rte_conversion)
  bool tune = false;  // one-matmul session timed before and after Session::tune_with
  std::string dtype;  // --dtype: a block-quantized weight (q4_0 .. q6_k) times f32 activations
  struct Shape {
    uint32_t m, n, k;
    std::string layout;  // "" = every --layouts
  };
  std::vector<Shape> shapes;  // --shapes: rectangular products instead of --sizes cubes
  bool candidates = false;    // --candidates: every variant of matmul_candidates
  std::vector<std::array<uint32_t, 3>> mnk = {{1, 576, 576},   {1, 1536, 576},  {1, 576, 1536},
                                              {1, 49152, 576}, {16, 576, 576},  {16, 1536, 576},
                                              {16, 576, 1536}, {16, 49152, 576}};
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string tok; std::getline(ss, tok, ',');) out.push_back(tok);
  return out;
}

// SmolLM2-135M's products (hidden 576, KV 192, SwiGLU 1536, vocabulary 49152) at the token counts of the
// issue-29 figures (batch x sequence = 128, 512 = 1 x 512, 2048 = 4 x 512) and GEMV's M = 1, 4, 8. nn layers
// store weights [in, out]: the forward is nn (X·W), the input gradient nt (dY·Wᵀ), the weight gradient tn
// (Xᵀ·dY over K = tokens); the tied head is X·Eᵀ (nt), its input gradient nn and its weight gradient tn.
std::vector<Args::Shape> smollm2_shapes() {
  std::vector<Args::Shape> out;
  const uint32_t nk[][2] = {{576, 576}, {192, 576}, {1536, 576}, {576, 1536}};
  for (uint32_t m : {1u, 4u, 8u}) {
    for (const auto& p : nk) {
      out.push_back({m, p[0], p[1], "nn"});
      out.push_back({m, p[0], p[1], "nt"});
    }
    out.push_back({m, 49152, 576, "nt"});
  }
  for (uint32_t m : {128u, 512u, 2048u}) {
    for (const auto& p : nk) {
      out.push_back({m, p[0], p[1], "nn"});  // forward
      out.push_back({m, p[1], p[0], "nt"});  // input gradient: dY [m, N] · Wᵀ
      out.push_back({p[1], p[0], m, "tn"});  // weight gradient: Xᵀ · dY, K = tokens
    }
    out.push_back({m, 49152, 576, "nt"});  // the tied head
    out.push_back({m, 576, 49152, "nn"});  // its input gradient
    out.push_back({49152, 576, m, "tn"});  // its weight gradient
  }
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--sizes" && has_value) {
      a.sizes.clear();
      for (const auto& t : split(argv[++i])) a.sizes.push_back(static_cast<uint32_t>(std::stoul(t)));
    } else if (arg == "--tiers" && has_value) {
      a.tiers = split(argv[++i]);
    } else if (arg == "--variants" && has_value) {
      a.variants = split(argv[++i]);
    } else if (arg == "--tiles" && has_value) {
      a.tiles = split(argv[++i]);
    } else if (arg == "--layouts" && has_value) {
      a.layouts = split(argv[++i]);
    } else if (arg == "--iters" && has_value) {
      a.iters = static_cast<uint32_t>(std::stoul(argv[++i]));
    } else if (arg == "--warmup" && has_value) {
      a.warmup = static_cast<uint32_t>(std::stoul(argv[++i]));
    } else if (arg == "--optimize") {
      a.optimize = true;
    } else if (arg == "--dtype" && has_value) {
      a.dtype = argv[++i];
    } else if (arg == "--mnk" && has_value) {
      a.mnk.clear();
      for (const auto& t : split(argv[++i])) {
        std::array<uint32_t, 3> v{};
        if (std::sscanf(t.c_str(), "%ux%ux%u", &v[0], &v[1], &v[2]) != 3) {
          std::fprintf(stderr, "bench_matmul: --mnk expects MxNxK[,..], got %s\n", t.c_str());
          std::exit(2);
        }
        a.mnk.push_back(v);
      }
    } else if (arg == "--shapes" && has_value) {
      for (const auto& t : split(argv[++i])) {
        if (t == "smollm2") {
          for (const Args::Shape& sh : smollm2_shapes()) a.shapes.push_back(sh);
          continue;
        }
        Args::Shape sh{};
        char layout[3] = {0, 0, 0};
        const int got = std::sscanf(t.c_str(), "%ux%ux%u:%2s", &sh.m, &sh.n, &sh.k, layout);
        if (got < 3 || sh.m == 0 || sh.n == 0 || sh.k == 0) {
          std::fprintf(stderr, "bench_matmul: --shapes expects smollm2 or MxNxK[:nn|nt|tn],.. got %s\n",
                       t.c_str());
          std::exit(2);
        }
        sh.layout = layout;
        a.shapes.push_back(sh);
      }
    } else if (arg == "--candidates") {
      a.candidates = true;
    } else if (arg == "--no-rte") {
      a.no_rte = true;
    } else if (arg == "--mixed16") {
      a.mixed16 = true;
    } else if (arg == "--tune") {
      a.tune = true;
    } else if (arg == "--no-probe") {
      a.probe = false;
    } else {
      std::fprintf(stderr,
                   "usage: bench_matmul [--sizes 1024,4096] [--tiers scalar,coopmat-nv,coopmat-khr] "
                   "[--layouts nn,nt,tn] [--tiles 128x128x32/2x4,...] [--variants scalar.64,...] [--iters N] "
                   "[--warmup N] [--optimize] [--mixed16] [--no-rte] [--no-probe] [--tune] [--shapes "
                   "smollm2|MxNxK[:nt],..] "
                   "[--candidates] [--dtype q4_1 "
                   "[--mnk MxNxK,..]]\n");
      std::exit(2);
    }
  }
  return a;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// Cheap deterministic values in [-1, 1): filling 8192^2 operands with mt19937 would dominate the run.
// The split-K buffers of `kern` (none unsplit), owned by `bufs`: partial products, and tickets zeroed once.
kernels::SplitBuffers split_buffers(runtime::Device& dev, const kernels::MatmulKernel& kern,
                                    std::vector<runtime::Buffer>& bufs) {
  if (kern.scratch_bytes == 0) return {};
  bufs.push_back(dev.alloc(kern.scratch_bytes));
  bufs.push_back(dev.alloc(kern.ticket_bytes));
  dev.fill_zero(bufs.back());
  return {bufs[bufs.size() - 2], bufs.back()};
}

float value(uint64_t i, uint32_t salt) {
  uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t(salt) << 32);
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return float(x & 0xffffff) / float(1 << 23) - 1.0f;
}

// The operands' element type for `tier`: Mixed16 rounds f32 buffers on load in every tier but GEMV; the
// cooperative tiers otherwise take f16 buffers.
kernels::MatmulInput input_for(MatmulTier tier, bool mixed16) {
  if (mixed16 && tier != MatmulTier::Gemv) return kernels::MatmulInput::F32RoundF16;
  if (tier == MatmulTier::CoopMatNV || tier == MatmulTier::CoopMatKHR) return kernels::MatmulInput::F16;
  return kernels::MatmulInput::F32;
}

kernels::MatmulShape make_shape(uint32_t m, uint32_t n, uint32_t k, const std::string& layout) {
  kernels::MatmulShape s;
  s.m = m;
  s.n = n;
  s.k = k;
  s.trans_a = layout[0] == 't';
  s.trans_b = layout[1] == 't';
  return s;
}

// The tier a session gives `s` (tier "auto"): choose_tier against the self-test's best, the input as Mixed16
// or F32 sessions store it.
MatmulTier auto_tier(const runtime::DeviceCaps& caps, kernels::MatmulShape s, MatmulTier best, bool mixed16) {
  s.input = mixed16 ? kernels::MatmulInput::F32RoundF16 : kernels::MatmulInput::F32;
  const MatmulTier t = kernels::choose_tier(caps, s, best);
  // f32 sessions never take a cooperative tier (choose_tier sends f32 inputs to scalar already).
  return t;
}

// `forced`: a MatmulVariant string, or "" for the tier's choose_variant. `rule`: whether `forced` is the
// variant choose_variant picks (--candidates), reported as "rule".
void run(runtime::Device& dev, const shader::CompileOptions& copt, std::string tier_name, uint32_t m,
         uint32_t n, uint32_t k, const std::string& layout, const std::string& tile,
         const std::string& forced, const Args& args, MatmulTier best = MatmulTier::Scalar,
         bool rule = false) {
  kernels::MatmulShape s = make_shape(m, n, k, layout);
  if (!forced.empty()) tier_name = kernels::tier_name(kernels::MatmulVariant::parse(forced).tier);
  if (tier_name == "auto") tier_name = kernels::tier_name(auto_tier(dev.caps(), s, best, args.mixed16));
  const MatmulTier tier = kernels::parse_tier(tier_name);
  const bool f16 = tier == MatmulTier::CoopMatNV || tier == MatmulTier::CoopMatKHR;
  const bool round =
      args.mixed16 && tier != MatmulTier::Gemv;  // scalar too: Mixed16 rounds on load in every tier
  s.input = round ? kernels::MatmulInput::F32RoundF16
            : f16 ? kernels::MatmulInput::F16
                  : kernels::MatmulInput::F32;
  runtime::DeviceCaps caps = dev.caps();
  if (args.no_rte) caps.f16_rte_conversion = false;
  std::string head = "{\"bench\":\"vk_matmul\",\"device\":\"" + escape(dev.caps().name) + "\",\"tier\":\"" +
                     tier_name + "\",\"dtype\":\"" + (f16 ? "f16" : "f32") + "\",\"layout\":\"" + layout +
                     "\",\"m\":" + std::to_string(m) + ",\"n\":" + std::to_string(n) +
                     ",\"k\":" + std::to_string(k) + ",\"mixed16\":" + (args.mixed16 ? "true" : "false");
  if (rule) head += ",\"rule\":true";
  std::vector<runtime::Buffer> bufs;
  try {
    const kernels::MatmulVariant variant =
        forced.empty() ? kernels::choose_variant(caps, s, tier,
                                                 tile.empty() ? kernels::default_coopmat_tile(caps, s, tier)
                                                              : kernels::CoopMatTile::parse(tile))
                       : kernels::MatmulVariant::parse(forced);
    head += ",\"variant\":\"" + variant.to_string() + "\"";
    const kernels::MatmulKernel kern = kernels::select_matmul(caps, s, variant);
    const auto& defs = kern.pass.source.defines;
    const bool rte = std::any_of(defs.begin(), defs.end(), [](const shader::Define& d) {
      return d.name == "RTE_F16" && d.value == "1";
    });
    head += std::string(",\"rte_f16\":") + (rte ? "true" : "false");
    runtime::KernelDesc desc = kernels::build_matmul_kernel(kern.pass, copt);
    desc.capture = runtime::PipelineCapture::Statistics;  // registers etc., where the driver reports them
    const runtime::KernelId id = dev.create_kernel(desc);
    std::string stats;  // the driver's statistics of the pass, as "name":value
    for (const runtime::PipelineExecutable& ex : dev.pipeline_executables(id)) {
      for (const runtime::PipelineStatistic& st : ex.statistics) {
        stats +=
            (stats.empty() ? "\"" : ",\"") + escape(st.name) + "\":" + runtime::statistic_value(st).dump();
      }
      break;
    }
    head += ",\"stats\":{" + stats + "}";
    const uint64_t esize = f16 && !round ? 2 : 4;
    const uint64_t sizes[2] = {uint64_t(m) * k, uint64_t(k) * n};
    std::vector<float> host[2];
    for (int op = 0; op < 2; ++op) {
      const uint64_t elems = sizes[op];
      host[op].resize(elems);
      for (uint64_t i = 0; i < elems; ++i) {
        const float v = value(i, op + 1);
        host[op][i] = f16 || round ? kernels::half_to_float(kernels::float_to_half(v)) : v;
      }
      bufs.push_back(dev.alloc(elems * esize));
      if (f16 && !round) {
        std::vector<uint16_t> h(elems);
        for (uint64_t i = 0; i < elems; ++i) h[i] = kernels::float_to_half(host[op][i]);
        dev.upload(bufs.back(), h.data(), elems * 2);
      } else {
        dev.upload(bufs.back(), host[op].data(), elems * 4);
      }
    }
    const uint64_t elems = uint64_t(m) * n;
    bufs.push_back(dev.alloc(elems * 4));
    const kernels::SplitBuffers split = split_buffers(dev, kern, bufs);
    const uint32_t total = args.warmup + args.iters;
    auto list = dev.record(2 * total);
    for (uint32_t i = 0; i < total; ++i) {
      list->timestamp(2 * i);
      kernels::record_matmul(*list, id, kern, bufs[0], bufs[1], bufs[2], {}, split);
      list->timestamp(2 * i + 1);
      list->barrier();
    }
    list->finish();
    dev.submit(*list);
    dev.wait();
    const std::vector<double> t = dev.timestamps(*list);
    std::vector<double> ms;
    for (uint32_t i = args.warmup; i < total; ++i) ms.push_back((t[2 * i + 1] - t[2 * i]) * 1e-6);
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2], best = ms.front();
    const double flop = 2.0 * double(m) * n * k;
    // Spot check: 64 sampled outputs against double-precision dot products.
    std::vector<float> c(elems);
    dev.download(bufs[2], c.data(), elems * 4);
    double worst = 0;
    for (uint32_t q = 0; q < 64; ++q) {
      const uint32_t i = (q * 2654435761u) % m, j = (q * 40503u + 17u) % n;
      double acc = 0, mag = 0;
      for (uint32_t l = 0; l < k; ++l) {
        const double av = s.trans_a ? host[0][uint64_t(l) * m + i] : host[0][uint64_t(i) * k + l];
        const double bv = s.trans_b ? host[1][uint64_t(j) * k + l] : host[1][uint64_t(l) * n + j];
        acc += av * bv;
        mag += std::fabs(av * bv);
      }
      worst = std::max(worst, std::fabs(c[uint64_t(i) * n + j] - acc) / (mag + 1e-3));
    }
    std::printf(
        "%s,\"iters\":%u,\"median_ms\":%.4f,\"best_ms\":%.4f,\"tflops_median\":%.2f,\"tflops_best\":%.2f,"
        "\"max_rel_err\":%.3g,\"correct\":%s,\"kernel\":\"%s\",\"spirv_opt\":%s,"
        "\"workgroups\":%llu}\n",
        head.c_str(), args.iters, median, best, flop / (median * 1e9), flop / (best * 1e9), worst,
        worst < 1e-4 ? "true" : "false", (kern.pass.source.label + (round ? " f32-in" : "")).c_str(),
        args.optimize ? "true" : "false",
        (unsigned long long)(uint64_t(kern.pass.grid[0]) * kern.pass.grid[1] * kern.pass.grid[2]));
  } catch (const Error& e) {
    std::printf("%s,\"error\":\"%s\"}\n", head.c_str(), escape(e.what()).substr(0, 2000).c_str());
  }
  std::fflush(stdout);
  for (const auto& b : bufs) dev.free(b);
}

// --dtype: C [M, N] = A [M, K] · Wᵀ, W [N, K] in GGUF blocks, through the tier choose_tier gives (GEMV for
// M <= 8, else the scalar tiles); GPU time, TFLOP/s, and the GB/s of the weight's blocks.
void run_quant(runtime::Device& dev, const shader::CompileOptions& copt, DType dt, uint32_t m, uint32_t n,
               uint32_t k, const Args& args) {
  std::string head = "{\"bench\":\"vk_matmul_quant\",\"device\":\"" + escape(dev.caps().name) +
                     "\",\"dtype\":\"" + dtype_name(dt) + "\",\"m\":" + std::to_string(m) +
                     ",\"n\":" + std::to_string(n) + ",\"k\":" + std::to_string(k);
  std::vector<runtime::Buffer> bufs;
  try {
    kernels::MatmulShape s;
    s.m = m;
    s.n = n;
    s.k = k;
    s.trans_b = true;
    s.load_b = kernels::MatmulLoad(uint8_t(kernels::MatmulLoad::Q4_0) + (uint8_t(dt) - uint8_t(DType::Q4_0)));
    const kernels::MatmulKernel kern =
        kernels::select_matmul(dev.caps(), s, kernels::choose_tier(dev.caps(), s, MatmulTier::Scalar));
    head += ",\"variant\":\"" + kern.variant.to_string() + "\"";
    const runtime::KernelId id = dev.create_kernel(kernels::build_matmul_kernel(kern.pass, copt));
    std::vector<float> a(uint64_t(m) * k), w(uint64_t(n) * k);
    for (uint64_t i = 0; i < a.size(); ++i) a[i] = value(i, 1);
    for (uint64_t i = 0; i < w.size(); ++i) w[i] = value(i, 2);
    const std::vector<std::byte> blocks = to_storage(w, dt);
    const std::vector<float> wd = from_storage(blocks.data(), w.size(), dt);
    bufs.push_back(dev.alloc(a.size() * 4));
    dev.upload(bufs.back(), a.data(), a.size() * 4);
    bufs.push_back(dev.alloc((blocks.size() + 3) / 4 * 4));
    dev.upload(bufs.back(), blocks.data(), blocks.size());
    bufs.push_back(dev.alloc(uint64_t(m) * n * 4));
    const kernels::SplitBuffers split = split_buffers(dev, kern, bufs);
    const uint32_t total = args.warmup + args.iters;
    auto list = dev.record(2 * total);
    for (uint32_t i = 0; i < total; ++i) {
      list->timestamp(2 * i);
      kernels::record_matmul(*list, id, kern, bufs[0], bufs[1], bufs[2], {}, split);
      list->timestamp(2 * i + 1);
      list->barrier();
    }
    list->finish();
    dev.submit(*list);
    dev.wait();
    const std::vector<double> t = dev.timestamps(*list);
    std::vector<double> ms;
    for (uint32_t i = args.warmup; i < total; ++i) ms.push_back((t[2 * i + 1] - t[2 * i]) * 1e-6);
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2], best = ms.front();
    std::vector<float> c(uint64_t(m) * n);
    dev.download(bufs[2], c.data(), c.size() * 4);
    double worst = 0;
    for (uint32_t q = 0; q < 64; ++q) {
      const uint32_t i = (q * 2654435761u) % m, j = (q * 40503u + 17u) % n;
      double acc = 0, mag = 0;
      for (uint32_t l = 0; l < k; ++l) {
        acc += double(a[uint64_t(i) * k + l]) * wd[uint64_t(j) * k + l];
        mag += std::fabs(double(a[uint64_t(i) * k + l]) * wd[uint64_t(j) * k + l]);
      }
      worst = std::max(worst, std::fabs(c[uint64_t(i) * n + j] - acc) / (mag + 1e-3));
    }
    std::printf(
        "%s,\"iters\":%u,\"median_ms\":%.4f,\"best_ms\":%.4f,\"tflops_median\":%.3f,"
        "\"weight_bytes\":%zu,\"weight_gbs_median\":%.1f,\"max_rel_err\":%.3g,\"correct\":%s,\"kernel\":\"%"
        "s\"}\n",
        head.c_str(), args.iters, median, best, 2.0 * m * n * k / (median * 1e9), blocks.size(),
        double(blocks.size()) / (median * 1e6), worst, worst < 1e-4 ? "true" : "false",
        kern.pass.source.label.c_str());
  } catch (const Error& e) {
    std::printf("%s,\"error\":\"%s\"}\n", head.c_str(), escape(e.what()).substr(0, 2000).c_str());
  }
  std::fflush(stdout);
  for (const auto& b : bufs) dev.free(b);
}

// --tune: C = op(A)·op(B) as an inference session (F32, or Mixed16 with --mixed16), GPU time of its step
// before and after Session::tune_with (winners not cached, so every run starts from the default variant).
void tune(uint32_t n, const std::string& layout, const Args& args) {
  Graph g;
  const bool ta = layout[0] == 't', tb = layout[1] == 't';
  auto a = g.input("a", {n, n});
  auto b = g.input("b", {n, n});
  g.set_outputs({g.matmul(a, b, ta, tb)});
  SessionConfig c = SessionConfig::from_env();
  c.training = false;
  c.optimizer.kind = OptimizerKind::None;
  c.gpu_timing = true;
  c.precision = args.mixed16 ? Precision::Mixed16 : Precision::F32;
  std::string head = "{\"bench\":\"vk_matmul_tune\",\"layout\":\"" + layout + "\",\"precision\":\"" +
                     (args.mixed16 ? "mixed16" : "f32") + "\",\"m\":" + std::to_string(n) +
                     ",\"n\":" + std::to_string(n) + ",\"k\":" + std::to_string(n);
  try {
    Session s = build(g, c);
    const uint64_t elems = uint64_t(n) * n;
    std::vector<float> host(elems);
    for (int op = 0; op < 2; ++op) {
      for (uint64_t i = 0; i < elems; ++i) host[i] = value(i, uint32_t(op + 1));
      s.set_input(op == 0 ? "a" : "b", host);
    }
    auto measure = [&] {
      for (uint32_t i = 0; i < args.warmup; ++i) s.run();
      std::vector<double> ms;
      for (uint32_t i = 0; i < args.iters; ++i) {
        s.run();
        ms.push_back(s.last_step_gpu_ms());
      }
      std::sort(ms.begin(), ms.end());
      return ms[ms.size() / 2];
    };
    const double before = measure();
    TuneOptions o;
    o.warmup = args.warmup;
    o.iterations = args.iters;
    o.cache = false;
    const TuneReport r = s.tune_with(o);
    std::fputs(r.to_text().c_str(), stderr);
    const double after = measure();
    const double flop = 2.0 * double(n) * n * n;
    const TuneKernel& k = r.kernels.at(0);
    std::printf(
        "%s,\"device\":\"%s\",\"gpu_ms_untuned\":%.4f,\"gpu_ms_tuned\":%.4f,\"tflops_untuned\":%.2f,"
        "\"tflops_tuned\":%.2f,\"variant_untuned\":\"%s\",\"variant_tuned\":\"%s\",\"candidates\":%d,"
        "\"tune_s\":%.2f}\n",
        head.c_str(), escape(s.caps().name).c_str(), before, after, flop / (before * 1e9),
        flop / (after * 1e9), k.old_variant.c_str(), k.new_variant.c_str(), k.candidates, r.seconds);
  } catch (const Error& e) {
    std::printf("%s,\"error\":\"%s\"}\n", head.c_str(), escape(e.what()).substr(0, 2000).c_str());
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    const SessionConfig config = SessionConfig::from_env();
    auto dev = bench::open_timed_device("bench_matmul", config);
    if (!dev) return 1;
    shader::CompileOptions copt = bench::compile_options(config, *dev);
    copt.optimize = args.optimize;
    MatmulTier best = MatmulTier::Scalar;  // the self-test's best tier (tier "auto", --candidates)
    if (args.probe) {
      const kernels::MatmulTierChoice choice = kernels::probe_matmul_tiers(*dev, copt, config.matmul_tier);
      best = choice.best;
      std::printf("{\"bench\":\"vk_matmul_selftest\",\"best\":\"%s\",\"probes\":[",
                  kernels::tier_name(choice.best));
      for (size_t i = 0; i < choice.probes.size(); ++i) {
        const auto& p = choice.probes[i];
        std::printf("%s{\"tier\":\"%s\",\"ok\":%s,\"detail\":\"%s\"}", i ? "," : "",
                    kernels::tier_name(p.tier), p.ok ? "true" : "false",
                    escape(p.detail).substr(0, 1500).c_str());
      }
      std::printf("]}\n");
      std::fflush(stdout);
    }
    if (!args.dtype.empty()) {
      const DType dt = parse_dtype(args.dtype);
      if (!is_quantized(dt))
        throw ConfigError("[bench_matmul] --dtype expects q4_0 .. q6_k, got " + args.dtype);
      for (const auto& v : args.mnk) run_quant(*dev, copt, dt, v[0], v[1], v[2], args);
      for (const std::string& msg : dev->validation_messages()) std::fprintf(stderr, "%s\n", msg.c_str());
      return dev->validation_messages().empty() ? 0 : 1;
    }
    if (args.tune) {
      for (const std::string& layout : args.layouts)
        for (uint32_t n : args.sizes) tune(n, layout, args);
      return 0;
    }
    // Products to run: --shapes (each with its layout, or every --layouts), else the --sizes cubes.
    std::vector<Args::Shape> shapes;
    for (const Args::Shape& sh : args.shapes) {
      for (const std::string& layout : sh.layout.empty() ? args.layouts : std::vector<std::string>{sh.layout})
        shapes.push_back({sh.m, sh.n, sh.k, layout});
    }
    if (args.shapes.empty()) {
      for (const std::string& layout : args.layouts)
        for (uint32_t n : args.sizes) shapes.push_back({n, n, n, layout});
    }
    if (args.candidates) {
      for (const Args::Shape& sh : shapes) {
        kernels::MatmulShape s = make_shape(sh.m, sh.n, sh.k, sh.layout);
        s.input = args.mixed16 ? kernels::MatmulInput::F32RoundF16 : kernels::MatmulInput::F32;
        const std::vector<kernels::MatmulVariant> cands = kernels::matmul_candidates(dev->caps(), s, best);
        for (size_t i = 0; i < cands.size(); ++i) {
          // The first is choose_variant's pick; a cooperative one with the tile sessions give it.
          kernels::MatmulVariant v = cands[i];
          if (i == 0 && (v.tier == MatmulTier::CoopMatNV || v.tier == MatmulTier::CoopMatKHR)) {
            kernels::MatmulShape fs = s;
            fs.input = input_for(v.tier, args.mixed16);
            v = kernels::choose_variant(dev->caps(), fs, v.tier,
                                        kernels::default_coopmat_tile(dev->caps(), fs, v.tier));
          }
          run(*dev, copt, "", sh.m, sh.n, sh.k, sh.layout, "", v.to_string(), args, best, i == 0);
        }
      }
      for (const std::string& m : dev->validation_messages()) std::fprintf(stderr, "%s\n", m.c_str());
      return dev->validation_messages().empty() ? 0 : 1;
    }
    for (const std::string& v : args.variants) {
      for (const Args::Shape& sh : shapes)
        run(*dev, copt, "", sh.m, sh.n, sh.k, sh.layout, "", v, args, best);
    }
    for (const std::string& tier : args.variants.empty() ? args.tiers : std::vector<std::string>{}) {
      for (const std::string& tile : args.tiles) {
        const bool coop = tier.rfind("coopmat", 0) == 0;
        if (!coop && &tile != &args.tiles.front()) continue;  // tiles only vary the cooperative tiers
        for (const Args::Shape& sh : shapes)
          run(*dev, copt, tier, sh.m, sh.n, sh.k, sh.layout, coop ? tile : "", "", args, best);
      }
    }
    for (const std::string& m : dev->validation_messages()) std::fprintf(stderr, "%s\n", m.c_str());
    return dev->validation_messages().empty() ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_matmul: %s\n", e.what());
    return 1;
  }
}
