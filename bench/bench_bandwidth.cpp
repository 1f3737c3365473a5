// Device memory bandwidth of a vec4 copy kernel, timed with GPU timestamps. Prints one JSON line per size
// (bytes moved counts the read and the write). The torch twin is scripts/device/bandwidth_torch.py.
//   bench_bandwidth                     64 MiB .. 1 GiB, doubling
//   bench_bandwidth --mib 1,4 --iters 5 smaller sizes (lavapipe smoke test)
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "meganeura/runtime/device.hpp"
#include "meganeura/session/session.hpp"
#include "meganeura/shader/shader.hpp"
#include "timed_device.hpp"

namespace {

using namespace meganeura;

const char* kCopy = R"(#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer Src { vec4 src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Dst { vec4 dst[]; };
layout(push_constant) uniform Push { uint n; } pc;
void main() {
  uint stride = gl_NumWorkGroups.x * 256u;
  for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += stride) dst[i] = src[i];
}
)";

struct Args {
  std::vector<uint64_t> mib = {64, 128, 256, 512, 1024};
  uint32_t iters = 20;
  uint32_t warmup = 3;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--mib" && i + 1 < argc) {
      a.mib.clear();
      std::stringstream ss(argv[++i]);
      for (std::string tok; std::getline(ss, tok, ',');) a.mib.push_back(std::stoull(tok));
    } else if (arg == "--iters" && i + 1 < argc) {
      a.iters = static_cast<uint32_t>(std::stoul(argv[++i]));
    } else if (arg == "--warmup" && i + 1 < argc) {
      a.warmup = static_cast<uint32_t>(std::stoul(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: bench_bandwidth [--mib 64,128,...] [--iters N] [--warmup N]\n");
      std::exit(2);
    }
  }
  return a;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

void run_size(runtime::Device& dev, runtime::KernelId kernel, uint64_t bytes, const Args& a) {
  const runtime::DeviceCaps& caps = dev.caps();
  const uint64_t vec4s = bytes / 16;
  const std::string head = "{\"bench\":\"vk_copy_vec4\",\"device\":\"" + json_escape(caps.name) +
                           "\",\"bytes\":" + std::to_string(bytes);
  if (vec4s > UINT32_MAX) {
    std::printf("%s,\"error\":\"more than 2^32 vec4 elements\"}\n", head.c_str());
    return;
  }
  runtime::Buffer src, dst;
  try {
    src = dev.alloc(bytes);
    dst = dev.alloc(bytes);
  } catch (const Error& e) {
    if (src.valid()) dev.free(src);
    std::printf("%s,\"error\":\"%s\"}\n", head.c_str(), json_escape(e.what()).c_str());
    return;
  }
  dev.fill_zero(src);
  const uint32_t n = static_cast<uint32_t>(vec4s);
  const uint32_t groups =
      static_cast<uint32_t>(std::min<uint64_t>((vec4s + 255) / 256, caps.max_workgroup_count[0]));
  const uint32_t total = a.warmup + a.iters;
  auto list = dev.record(2 * total);
  runtime::Buffer bufs[2] = {src, dst};
  for (uint32_t i = 0; i < total; ++i) {
    list->timestamp(2 * i);
    list->dispatch(kernel, bufs, std::as_bytes(std::span(&n, 1)), groups);
    list->timestamp(2 * i + 1);
    list->barrier();  // the next copy rewrites dst: keep iterations from overlapping
  }
  list->finish();
  dev.submit(*list);
  dev.wait();
  const std::vector<double> t = dev.timestamps(*list);
  std::vector<double> ms;
  for (uint32_t i = a.warmup; i < total; ++i) ms.push_back((t[2 * i + 1] - t[2 * i]) * 1e-6);
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2], best = ms.front();
  const double moved = 2.0 * static_cast<double>(bytes);  // read + write
  std::printf(
      "%s,\"iters\":%u,\"workgroups\":%u,\"median_ms\":%.4f,\"best_ms\":%.4f,\"gbps_median\":%.1f,"
      "\"gbps_best\":%.1f}\n",
      head.c_str(), a.iters, groups, median, best, moved / (median * 1e6), moved / (best * 1e6));
  std::fflush(stdout);
  dev.free(src);
  dev.free(dst);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    const SessionConfig config = SessionConfig::from_env();
    auto dev = bench::open_timed_device("bench_bandwidth", config);
    if (!dev) return 1;
    const shader::CompileOptions copt = bench::compile_options(config, *dev);
    const runtime::KernelId kernel = bench::raw_kernel(*dev, copt, "bench_copy_vec4", kCopy, 2, 4);
    for (uint64_t mib : args.mib) run_size(*dev, kernel, mib << 20, args);
    return bench::validation_status(*dev);
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_bandwidth: %s\n", e.what());
    return 1;
  }
}
