// The cooperative-matrix multiply-add ceiling of a device: every subgroup keeps NACC accumulators in
// registers and multiply-adds the same two fragments into them `iters` times — no memory traffic in the loop.
// What this reaches bounds any matmul built from subgroup-scope cooperative matrices
// (kernels/matmul/coopmat.comp), so a matmul far below cuBLAS but close to this ceiling is limited by the
// instruction the driver emits, not by our tiling. One JSON line per (tier, shape, accumulators, workgroup
// size).
//   bench_mma_peak                                   NV and KHR, 16x8x16 and 16x16x16 (NV only), 4/8/16
//   accumulators bench_mma_peak --iters 64 --groups 4 --accs 2    (lavapipe has no cooperative matrix: it
//   says so and exits 0)
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "meganeura/runtime/device.hpp"
#include "meganeura/session/session.hpp"
#include "meganeura/shader/coopmat_khr.hpp"
#include "meganeura/shader/shader.hpp"

namespace {

using namespace meganeura;

const char* kPeak = R"(#version 450
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = WG) in;
layout(std430, set = 0, binding = 0) readonly buffer In { float16_t src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { float dst[]; };
layout(push_constant) uniform Push { uint iters; } p;
void main() {
  fcoopmatNV<16, gl_ScopeSubgroup, MM, KK> a;
  fcoopmatNV<16, gl_ScopeSubgroup, KK, NN> b;
  coopMatLoadNV(a, src, 0u, KK, false);
  coopMatLoadNV(b, src, 1024u, NN, false);
  fcoopmatNV<32, gl_ScopeSubgroup, MM, NN> acc[NACC];
  // distinct starting values, so that no compiler can merge the chains
  [[unroll]] for (uint i = 0u; i < NACC; ++i) acc[i] = fcoopmatNV<32, gl_ScopeSubgroup, MM, NN>(float(i));
  for (uint t = 0u; t < p.iters; ++t) {
    [[unroll]] for (uint i = 0u; i < NACC; ++i) acc[i] = coopMatMulAddNV(a, b, acc[i]);
  }
  [[unroll]] for (uint i = 1u; i < NACC; ++i) acc[0] = acc[0] + acc[i];
  const uint sg = gl_WorkGroupID.x * (WG / 32u) + gl_SubgroupID;
  coopMatStoreNV(acc[0], dst, sg * (MM * NN), NN, false);
}
)";

struct Args {
  std::vector<std::string> tiers = {"coopmat-nv", "coopmat-khr"};
  std::vector<std::string> shapes = {"16x8x16", "16x16x16"};
  std::vector<uint32_t> accs = {4, 8, 16};
  std::vector<uint32_t> wgs = {128, 256};
  uint32_t iters = 4096, groups = 132 * 16, reps = 5;  // 16 workgroups per H200 SM: enough to fill any GPU
  bool compile_only = false;                           // compile (and rewrite) every variant, run nothing
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string tok; std::getline(ss, tok, ',');) out.push_back(tok);
  return out;
}

std::vector<uint32_t> split_u(const std::string& s) {
  std::vector<uint32_t> out;
  for (const std::string& t : split(s)) out.push_back(static_cast<uint32_t>(std::stoul(t)));
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool v = i + 1 < argc;
    if (arg == "--tiers" && v)
      a.tiers = split(argv[++i]);
    else if (arg == "--shapes" && v)
      a.shapes = split(argv[++i]);
    else if (arg == "--accs" && v)
      a.accs = split_u(argv[++i]);
    else if (arg == "--wgs" && v)
      a.wgs = split_u(argv[++i]);
    else if (arg == "--iters" && v)
      a.iters = static_cast<uint32_t>(std::stoul(argv[++i]));
    else if (arg == "--groups" && v)
      a.groups = static_cast<uint32_t>(std::stoul(argv[++i]));
    else if (arg == "--compile-only")
      a.compile_only = true;
    else {
      std::fprintf(stderr,
                   "usage: bench_mma_peak [--tiers coopmat-nv,coopmat-khr] [--shapes 16x8x16,16x16x16] "
                   "[--accs 4,8,16] [--wgs 128,256] [--iters N] [--groups N] [--compile-only]\n");
      std::exit(2);
    }
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    const SessionConfig config = SessionConfig::from_env();
    runtime::DeviceOptions opt;
    opt.device_id = config.device_id;
    opt.validation = config.validation;
    auto compile = [&](const std::string& tier, uint32_t m, uint32_t n, uint32_t k, uint32_t wg, uint32_t acc,
                       const std::string& label, const std::string& key) {
      shader::CompileOptions copt;
      copt.device_key = key;
      shader::ShaderSource s{label,
                             kPeak,
                             {{"WG", std::to_string(wg) + "u"},
                              {"MM", std::to_string(m)},
                              {"NN", std::to_string(n)},
                              {"KK", std::to_string(k)},
                              {"NACC", std::to_string(acc) + "u"}}};
      std::vector<uint32_t> spirv = shader::compile_glsl(s, copt).spirv;
      if (tier == "coopmat-khr") spirv = shader::rewrite_coopmat_nv_to_khr(spirv, label);
      return spirv;
    };
    if (args.compile_only) {
      int n = 0;
      for (const std::string& tier : args.tiers)
        for (const std::string& shape : args.shapes) {
          uint32_t m = 0, nn = 0, k = 0;
          if (std::sscanf(shape.c_str(), "%ux%ux%u", &m, &nn, &k) != 3)
            throw ConfigError("[bench_mma_peak] bad shape " + shape);
          if (tier == "coopmat-khr" && m == nn && nn == k) continue;
          for (uint32_t wg : args.wgs)
            for (uint32_t acc : args.accs) n += !compile(tier, m, nn, k, wg, acc, "mma_peak", "").empty();
        }
      std::printf("{\"bench\":\"vk_mma_peak\",\"compiled\":%d}\n", n);
      return 0;
    }
    auto dev = runtime::open_device(opt);
    const runtime::DeviceCaps& caps = dev->caps();
    if (!caps.coopmat_nv || !caps.timestamps) {
      std::printf(
          "{\"bench\":\"vk_mma_peak\",\"device\":\"%s\",\"skipped\":\"no VK_NV_cooperative_matrix or no "
          "timestamps\"}\n",
          caps.name.c_str());
      return 0;
    }
    const uint32_t groups = args.groups;
    runtime::Buffer src = dev->alloc(4096 * 2);
    dev->fill_zero(src);
    for (const std::string& tier : args.tiers) {
      for (const std::string& shape : args.shapes) {
        uint32_t m = 0, n = 0, k = 0;
        if (std::sscanf(shape.c_str(), "%ux%ux%u", &m, &n, &k) != 3)
          throw ConfigError("[bench_mma_peak] bad shape " + shape);
        // the KHR rewrite needs A and B of different types (shader/coopmat_khr.hpp)
        if (tier == "coopmat-khr" && m == n && n == k) continue;
        if (tier == "coopmat-khr" && !caps.coopmat_khr) continue;
        for (uint32_t wg : args.wgs) {
          for (uint32_t acc : args.accs) {
            const std::string label =
                "mma_peak_" + tier + "_" + shape + "_a" + std::to_string(acc) + "_w" + std::to_string(wg);
            runtime::KernelDesc desc;
            desc.label = label;
            desc.spirv = compile(tier, m, n, k, wg, acc, label, caps.fingerprint());
            desc.num_buffers = 2;
            desc.push_constant_bytes = 4;
            const runtime::KernelId kernel = dev->create_kernel(desc);
            const uint64_t subgroups = uint64_t(groups) * (wg / 32u);
            runtime::Buffer dst = dev->alloc(subgroups * m * n * 4);
            const uint32_t total = 1 + args.reps;  // the first run warms up
            auto list = dev->record(2 * total);
            runtime::Buffer bufs[2] = {src, dst};
            for (uint32_t i = 0; i < total; ++i) {
              list->timestamp(2 * i);
              list->dispatch(kernel, bufs, std::as_bytes(std::span(&args.iters, 1)), groups);
              list->timestamp(2 * i + 1);
              list->barrier();
            }
            list->finish();
            dev->submit(*list);
            dev->wait();
            const std::vector<double> t = dev->timestamps(*list);
            std::vector<double> ns;
            for (uint32_t i = 1; i < total; ++i) ns.push_back(t[2 * i + 1] - t[2 * i]);
            std::sort(ns.begin(), ns.end());
            const double flops = 2.0 * double(m) * n * k * acc * double(args.iters) * double(subgroups);
            std::printf(
                "{\"bench\":\"vk_mma_peak\",\"device\":\"%s\",\"tier\":\"%s\",\"shape\":\"%s\","
                "\"accumulators\":%u,\"workgroup\":%u,\"groups\":%u,\"iters\":%u,\"median_ms\":%.4f,"
                "\"tflops\":%.1f}\n",
                caps.name.c_str(), tier.c_str(), shape.c_str(), acc, wg, groups, args.iters,
                ns[ns.size() / 2] * 1e-6, flops / ns[ns.size() / 2] * 1e-3);
            std::fflush(stdout);
            list.reset();
            dev->free(dst);
          }
        }
      }
    }
    dev->free(src);
    for (const std::string& m : dev->validation_messages()) std::fprintf(stderr, "%s\n", m.c_str());
    return dev->validation_messages().empty() ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_mma_peak: %s\n", e.what());
    return 1;
  }
}
