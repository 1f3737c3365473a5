// Inference latency of an imported ONNX model (load_onnx -> an inference session), one JSON line per batch x
// precision; the PyTorch twin is scripts/device/onnx_torch.py (onnx2torch), both run by
// scripts/device/onnx_latency.sh. The input named --input gets values in [0, 1) of shape [batch, C, H, W]
// (--chw); output0_sum is the sum of the first output, a cross-check with the torch twin.
// Fields: wall_ms (run(): submit and wait, mean of --steps after --warmup), gpu_ms (two timestamps around the
// recorded step, median of --gpu-steps), build_s (import + compile), dispatches and barriers a step, and the
// three largest kernel families of the profile.
//   bench_onnx ppocr_det_v4.onnx --input x --chw 3,640,640 --batches 1,32
//   bench_onnx ppocr_det_v4.onnx --input x --chw 3,64,64 --batches 1 --steps 2 --warmup 1 --gpu-steps 2
//   (smoke test)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meganeura/core/error.hpp"
#include "meganeura/onnx/onnx.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/session/session.hpp"

using namespace meganeura;

namespace {

struct Args {
  std::string model, input = "x";
  std::vector<int64_t> chw{3, 640, 640}, batches{1, 32};
  std::vector<std::string> precisions{"f32"};
  int steps = 20, warmup = 5, gpu_steps = 20;
};

std::vector<std::string> str_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

std::vector<int64_t> int_list(const std::string& s) {
  std::vector<int64_t> out;
  for (const auto& item : str_list(s)) out.push_back(std::stoll(item));
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

void measure(const Args& args, int64_t batch, const std::string& precision) {
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  OnnxOptions options;
  options.shapes[args.input] = {batch, args.chw[0], args.chw[1], args.chw[2]};
  OnnxModel m = load_onnx(args.model, options);
  SessionConfig c = SessionConfig::from_env();
  c.gpu_timing = true;
  c.training = false;
  c.precision = precision == "mixed16" ? Precision::Mixed16 : Precision::F32;
  c.optimizer.kind = OptimizerKind::None;
  Session s = build(m.graph, c);
  for (const auto& [name, values] : m.parameters) s.set_parameter(name, values);
  const double build_s = std::chrono::duration<double>(clock::now() - t0).count();
  // x[i] = (i * 7919 mod 1024) / 1024: values in [0, 1) that onnx_torch.py rebuilds exactly.
  std::vector<float> x(size_t(batch * args.chw[0] * args.chw[1] * args.chw[2]));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float((i * 7919) % 1024) / 1024.0f;
  s.set_input(m.inputs.at(0).name, x);
  for (int i = 0; i < args.warmup; ++i) s.run();
  t0 = clock::now();
  for (int i = 0; i < args.steps; ++i) s.run();
  const double wall_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count() / args.steps;
  std::vector<double> gpu;
  for (int i = 0; i < args.gpu_steps; ++i) {
    s.run();
    gpu.push_back(s.last_step_gpu_ms());
  }
  const std::string file = args.model.substr(args.model.find_last_of('/') + 1);
  nlohmann::json line = {
      {"bench", "vk_onnx"},      {"model", file},
      {"device", s.caps().name}, {"batch", batch},
      {"chw", args.chw},         {"precision", precision},
      {"wall_ms", wall_ms},      {"gpu_ms", median(gpu)},
      {"build_s", build_s},      {"memory_mib", double(s.memory_summary().total()) / (1 << 20)}};
  double sum = 0;
  for (float v : s.read_output(0)) sum += v;
  line["output0_sum"] = sum;
  ProfileOptions po;
  po.warmup = 1;
  po.iterations = 3;
  const nlohmann::json p = nlohmann::json::parse(s.profile(po));
  line["dispatches"] = p["session"]["dispatches"];
  line["barriers"] = p["session"]["barriers"];
  nlohmann::json fam = nlohmann::json::array();
  for (const auto& f : p["families"]) {
    if (fam.size() == 3) break;
    fam.push_back({f["family"], f["dispatches"], f["median_ns_total"].get<double>() * 1e-6});
  }
  line["families"] = fam;
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  const char* usage =
      "usage: bench_onnx MODEL.onnx [--input x] [--chw 3,640,640] [--batches 1,32] [--precisions "
      "f32,mixed16]\n"
      "                  [--steps 20] [--warmup 5] [--gpu-steps 20]\n";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      args.model = a;
      continue;
    }
    if (i + 1 >= argc) {
      std::fputs(usage, stderr);
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--input")
      args.input = v;
    else if (a == "--chw")
      args.chw = int_list(v);
    else if (a == "--batches")
      args.batches = int_list(v);
    else if (a == "--precisions")
      args.precisions = str_list(v);
    else if (a == "--steps")
      args.steps = std::stoi(v);
    else if (a == "--warmup")
      args.warmup = std::stoi(v);
    else if (a == "--gpu-steps")
      args.gpu_steps = std::stoi(v);
    else {
      std::fputs(usage, stderr);
      return 2;
    }
  }
  if (args.model.empty() || args.chw.size() != 3) {
    std::fputs(usage, stderr);
    return 2;
  }
  int failures = 0;
  for (const std::string& precision : args.precisions)
    for (int64_t batch : args.batches) {
      try {
        measure(args, batch, precision);
      } catch (const Error& e) {
        ++failures;
        nlohmann::json line = {
            {"bench", "vk_onnx"}, {"batch", batch}, {"precision", precision}, {"error", e.what()}};
        std::printf("%s\n", line.dump().c_str());
        std::fflush(stdout);
      }
    }
  return failures ? 1 : 0;
}
