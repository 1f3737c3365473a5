// What a dispatch costs the GPU when it does almost nothing: the floor under a step of many small kernels (a
// decode step is 157 dispatches and 154 barriers, a SmolLM2 training step 979 and ~610). One command list of
// N dispatches of a kernel that reads a 576-float vector and writes the next one (each workgroup adds one
// to its share), timed with GPU timestamps around the whole chain, for three shapes of the chain:
//   dependent    a barrier between dispatches, ping-pong between two buffers (each reads the previous
//   output):
//                the case of a decode step's passes
//   independent  no barriers, every dispatch writing its own buffer: launch overhead without a drain
//   ticket       a barrier between dispatches, as dependent, each dispatch's workgroups also taking a ticket
//   of
//                an atomic counter (the split-K fix-up's pattern) - the cost of that handshake
// for grids of 1, 132 and 384 workgroups of 256 invocations (one, one per H100/H200 SM, a GEMV pass's grid).
// Prints one JSON line per (shape, grid): microseconds a dispatch, median over repetitions after warm-up.
//   bench_dispatch [--n 256] [--reps 20] [--warmup 5] [--grids 1,132,384]
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "meganeura/runtime/device.hpp"
#include "meganeura/session/session.hpp"
#include "meganeura/shader/shader.hpp"
#include "timed_device.hpp"

namespace {

using namespace meganeura;

// Workgroup w adds one to elements w·256 .. of a 576-float vector (wrapping): enough work that the driver
// cannot drop the dispatch, little enough that the chain times the dispatch, not the kernel.
const char* kStep = R"(#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer Src { float src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Dst { float dst[]; };
layout(std430, set = 0, binding = 2) buffer Tickets { uint ticket[]; };
layout(push_constant) uniform Push { uint take_ticket; } pc;
void main() {
  uint i = (gl_WorkGroupID.x * 256u + gl_LocalInvocationID.x) % 576u;
  dst[i] = src[i] + 1.0;
  if (pc.take_ticket != 0u && gl_LocalInvocationID.x == 0u) {
    memoryBarrierBuffer();
    uint t = atomicAdd(ticket[0], 1u);
    if (t + 1u == gl_NumWorkGroups.x) ticket[0] = 0u;
  }
}
)";

struct Args {
  uint32_t n = 256, reps = 20, warmup = 5;
  std::vector<uint32_t> grids = {1, 132, 384};
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has = i + 1 < argc;
    if (arg == "--n" && has) {
      a.n = uint32_t(std::stoul(argv[++i]));
    } else if (arg == "--reps" && has) {
      a.reps = uint32_t(std::stoul(argv[++i]));
    } else if (arg == "--warmup" && has) {
      a.warmup = uint32_t(std::stoul(argv[++i]));
    } else if (arg == "--grids" && has) {
      a.grids.clear();
      std::stringstream ss(argv[++i]);
      for (std::string tok; std::getline(ss, tok, ',');) a.grids.push_back(uint32_t(std::stoul(tok)));
    } else {
      std::fprintf(stderr, "usage: bench_dispatch [--n 256] [--reps 20] [--warmup 5] [--grids 1,132,384]\n");
      std::exit(2);
    }
  }
  if (a.n < 2 || a.reps == 0 || a.grids.empty()) {
    std::fprintf(stderr, "bench_dispatch: --n must be at least 2, --reps and --grids non-empty\n");
    std::exit(2);
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  try {
    const SessionConfig config = SessionConfig::from_env();
    auto dev = bench::open_timed_device("bench_dispatch", config);
    if (!dev) return 1;
    const shader::CompileOptions copt = bench::compile_options(config, *dev);
    const runtime::KernelId kernel = bench::raw_kernel(*dev, copt, "bench_dispatch_step", kStep, 3, 4);
    // Two ping-pong vectors for the chains, one output per dispatch for the independent shape, the tickets.
    std::vector<runtime::Buffer> bufs;
    for (uint32_t i = 0; i < a.n + 3; ++i) {
      bufs.push_back(dev->alloc(576 * sizeof(float)));
      dev->fill_zero(bufs.back());
    }
    const runtime::Buffer tickets = bufs[a.n + 2];
    for (const char* shape : {"dependent", "independent", "ticket"}) {
      const std::string s = shape;
      const uint32_t take = s == "ticket" ? 1u : 0u;
      for (uint32_t grid : a.grids) {
        auto list = dev->record(2);
        list->timestamp(0);
        for (uint32_t i = 0; i < a.n; ++i) {
          // dependent / ticket: buffer i % 2 -> (i + 1) % 2; independent: buffer 0 -> buffer i + 2
          const runtime::Buffer src = s == "independent" ? bufs[0] : bufs[i % 2];
          const runtime::Buffer dst = s == "independent" ? bufs[i + 2] : bufs[(i + 1) % 2];
          const runtime::Buffer b[3] = {src, dst, tickets};
          list->dispatch(kernel, b, std::as_bytes(std::span(&take, 1)), grid);
          if (s != "independent") list->barrier();
        }
        list->timestamp(1);
        list->finish();
        std::vector<double> us;
        for (uint32_t r = 0; r < a.warmup + a.reps; ++r) {
          dev->submit(*list);
          const std::vector<double> t = dev->timestamps(*list);
          if (r >= a.warmup) us.push_back((t[1] - t[0]) * 1e-3 / a.n);
        }
        std::sort(us.begin(), us.end());
        std::printf(
            "{\"bench\":\"dispatch\",\"device\":\"%s\",\"shape\":\"%s\",\"workgroups\":%u,\"dispatches\":%u,"
            "\"us_per_dispatch_median\":%.3f,\"us_per_dispatch_best\":%.3f}\n",
            dev->caps().name.c_str(), shape, grid, a.n, us[us.size() / 2], us.front());
        std::fflush(stdout);
      }
    }
    for (const runtime::Buffer& b : bufs) dev->free(b);
    return bench::validation_status(*dev);
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_dispatch: %s\n", e.what());
    return 1;
  }
}
