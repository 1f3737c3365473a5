// A GGUF file through load_gguf, timed the way llama-bench times llama.cpp (issue 24 item 7; the llama.cpp
// twin is scripts/llamacpp_oracle.c's `bench` mode, both run by scripts/device/llamacpp.sh):
//   bench_gguf run MODEL.gguf [--pp 512] [--tg 128] [--reps 5]
//       prompt processing: one prefill of PP tokens (logits of the last one only, as llama_batch_get_one);
//       generation: TG decode steps at batch 1, each reading the vocabulary's logits back to the host
//       (llama.cpp copies them out of every llama_decode too). REPS timed runs after 0.3 s of warm-up runs;
//       one JSON line each figure with the median, min and max tokens/s. gen: Generator::generate of TG
//       tokens from one (greedy, stops ignored): the decode steps' tokens/s of the product's loop, where each
//       step's token comes from the one before on the GPU and steps are queued ahead of the host's reads
//       (llama-bench's tg feeds tokens it chose itself, as `tg` above).
//   bench_gguf requantize IN.gguf OUT.gguf TYPE
//       every matrix of IN re-encoded as TYPE (F32, F16, BF16, Q8_0, Q4_0, ...) by gguf::requantize: the
//       speed of a type, not its accuracy (a Q4_1 file made Q8_0 keeps Q4_1's values).
//   bench_gguf skeleton IN.gguf OUT.gguf
//       IN's metadata (tokenizer included) and the name, type and dims of each tensor, without tensor data: a
//       few MB that a device call can carry where the model (98 MB and up) cannot.
//   bench_gguf synth SKELETON.gguf OUT.gguf TYPE [--seed N]
//       the skeleton's model with random weights: every matrix whose rows are whole TYPE blocks in TYPE (or,
//       for TYPE `original`, in the type the skeleton lists for it)
//       (normal, sd 0.02), every other tensor F32 (norm weights near 1). Same shapes, types and metadata as a
//       `requantize` of the real file, so the same work for every kernel: a speed model, not a text model.
#include <strings.h>
#include <algorithm>
#include <chrono>
#include <cstdio>

#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "meganeura/core/error.hpp"
#include "meganeura/formats/gguf.hpp"
#include "meganeura/models/generate.hpp"
#include "meganeura/models/gguf_model.hpp"
#include "meganeura/quant/quant.hpp"
#include "meganeura/session/session.hpp"

using namespace meganeura;

namespace {

constexpr double kWarmupS = 0.3;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

quant::Type type_named(const std::string& name) {
  for (const quant::TypeInfo& t : quant::kTypes)
    if (strcasecmp(t.name, name.c_str()) == 0) return t.type;
  throw ConfigError(
      "[bench_gguf] expected a type F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K or Q6_K, got " +
      name);
}

void print(const char* what, const std::string& model, int n, std::vector<double> rate) {
  std::sort(rate.begin(), rate.end());
  std::printf(
      "{\"bench\":\"%s\",\"model\":\"%s\",\"tokens\":%d,\"tokens_per_s\":%.1f,\"min\":%.1f,\"max\":%.1f,"
      "\"runs\":%zu}\n",
      what, model.c_str(), n, rate[rate.size() / 2], rate.front(), rate.back(), rate.size());
  std::fflush(stdout);
}

constexpr const char* kSkeletonKey = "meganeura.skeleton.tensors";  // "name type d0,d1,..." per tensor

gguf::Contents skeleton(const gguf::File& in) {
  gguf::Contents c;
  c.version = in.version();
  c.metadata = in.metadata();
  std::vector<std::string> rows;
  for (const gguf::TensorInfo& t : in.tensors()) {
    std::string dims;
    for (uint64_t d : t.dims) dims += (dims.empty() ? "" : ",") + std::to_string(d);
    rows.push_back(t.name + " " + quant::name(t.type) + " " + dims);
  }
  c.metadata.push_back({kSkeletonKey, gguf::Value::string_array(rows)});
  return c;
}

gguf::Contents synth(const gguf::File& sk, const std::string& to_name, uint32_t seed) {
  gguf::Contents c;
  c.version = sk.version();
  for (const auto& kv : sk.metadata())
    if (kv.first != kSkeletonKey) c.metadata.push_back(kv);
  std::mt19937 rng(seed);
  for (const std::string& row : sk.get_strings(kSkeletonKey)) {
    std::istringstream s(row);
    std::string name, type, dims_text;
    s >> name >> type >> dims_text;
    std::vector<uint64_t> dims;
    std::istringstream ds(dims_text);
    for (std::string d; std::getline(ds, d, ',');) dims.push_back(std::stoull(d));
    uint64_t n = 1;
    for (uint64_t d : dims) n *= d;
    const quant::Type to = type_named(to_name == "original" ? type : to_name);
    const bool matrix = dims.size() >= 2 && dims[0] % quant::info(to).block_elems == 0;
    std::normal_distribution<float> dist(matrix ? 0.0f : 1.0f, matrix ? 0.02f : 0.05f);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    const quant::Type t = matrix ? to : quant::Type::F32;
    c.tensors.push_back({name, dims, t, quant::quantize(t, v)});
  }
  return c;
}

int run(const std::string& path, int pp, int tg, int reps) {
  const models::LanguageModel m = models::load_gguf(path);
  models::LlamaConfig c = m.config;
  c.max_context = pp + tg + 8;
  SessionConfig cfg = SessionConfig::from_env();
  cfg.training = false;
  cfg.optimizer.kind = OptimizerKind::None;
  cfg.frames_in_flight = 1;
  Session prefill = build(models::build_llama(c, 1, pp).graph, cfg);
  Session decode = build(models::build_llama(c, 1, 1).graph, cfg, prefill);
  for (const auto& w : m.weights) prefill.set_parameter_bytes(w.name, w.bytes);
  const std::string name = path.substr(path.find_last_of('/') + 1);

  double warm_from = now_s();
  std::vector<int32_t> tokens(static_cast<size_t>(pp));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 7919 + 13) % size_t(c.vocab));
  prefill.set_input("tokens", tokens);
  prefill.set_input("start", std::vector<int32_t>{0});
  prefill.set_input("last", std::vector<int32_t>{pp - 1});
  std::vector<double> rate;
  // Warm-up runs until kWarmupS has passed, here and in llamacpp_oracle.c's bench: after a single one the
  // GPU's clock was still ramping (H100: F16 prompt runs of 11 815, 11 723, then 49 455 tokens/s).
  for (int r = -1; r < reps; ++r) {
    const double t0 = now_s();
    prefill.run();
    const std::vector<float> logits = prefill.read_output("logits");
    if (r >= 0) rate.push_back(pp / (now_s() - t0));
    if (r == -1 && now_s() < warm_from + kWarmupS) --r;  // another warm-up run
  }
  print("pp", name, pp, rate);

  rate.clear();
  decode.set_input("last", std::vector<int32_t>{0});
  warm_from = now_s();
  for (int r = -1; r < reps; ++r) {
    const double t0 = now_s();
    for (int k = 0; k < tg; ++k) {
      decode.set_input("tokens", std::vector<int32_t>{tokens[size_t(k) % tokens.size()]});
      decode.set_input("start", std::vector<int32_t>{k});
      decode.run();
      const std::vector<float> logits = decode.read_output("logits");
    }
    if (r >= 0) rate.push_back(tg / (now_s() - t0));
    if (r == -1 && now_s() < warm_from + kWarmupS) --r;
  }
  print("tg", name, tg, rate);

  // The product's own generation loop, for comparison: Generator::generate from one token, greedy, every stop
  // token ignored, so each run draws tg tokens (tg - 1 decode steps, queued ahead of the host's reads).
  rate.clear();
  models::GeneratorOptions go;
  go.max_context = c.max_context;
  go.prefill_buckets = {16};
  go.session = SessionConfig::from_env();
  models::Generator gen(models::load_gguf(path), go);  // a model is not copied: the file is mapped again
  models::GenerationOptions o;
  o.max_tokens = tg;
  o.stop_ids = std::vector<int32_t>{};
  o.sampling = models::SamplingParams::greedy();
  warm_from = now_s();
  for (int r = -1; r < reps; ++r) {
    const models::GenerationResult res = gen.generate(std::span<const int32_t>(tokens.data(), 1), o);
    if (r >= 0) rate.push_back(res.generation_tokens_per_s);
    if (r == -1 && now_s() < warm_from + kWarmupS) --r;
  }
  print("gen", name, tg, rate);
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() == 4 && a[0] == "requantize") {
    const gguf::File in = gguf::File::open(a[1]);
    gguf::write_gguf(a[2], gguf::requantize(in, type_named(a[3])));
    std::printf("bench_gguf: %s -> %s (%s)\n", a[1].c_str(), a[2].c_str(), a[3].c_str());
    return 0;
  }
  if (a.size() == 3 && a[0] == "skeleton") {
    gguf::write_gguf(a[2], skeleton(gguf::File::open(a[1])));
    std::printf("bench_gguf: %s -> %s (skeleton)\n", a[1].c_str(), a[2].c_str());
    return 0;
  }
  if ((a.size() == 4 || (a.size() == 6 && a[4] == "--seed")) && a[0] == "synth") {
    const uint32_t seed = a.size() == 6 ? uint32_t(std::stoul(a[5])) : 1;
    gguf::write_gguf(a[2], synth(gguf::File::open(a[1]), a[3], seed));
    std::printf("bench_gguf: %s -> %s (random %s)\n", a[1].c_str(), a[2].c_str(), a[3].c_str());
    return 0;
  }
  if (a.size() >= 2 && a[0] == "run") {
    int pp = 512, tg = 128, reps = 5;
    for (size_t i = 2; i < a.size(); ++i) {
      if (i + 1 >= a.size()) throw ConfigError("[bench_gguf] expected a value after " + a[i]);
      int* dst = a[i] == "--pp" ? &pp : a[i] == "--tg" ? &tg : a[i] == "--reps" ? &reps : nullptr;
      if (!dst) throw ConfigError("[bench_gguf] unknown option " + a[i]);
      *dst = std::stoi(a[++i]);
    }
    if (pp < 1 || tg < 1 || reps < 1) throw ConfigError("[bench_gguf] expected --pp, --tg and --reps >= 1");
    return run(a[1], pp, tg, reps);
  }
  std::fprintf(stderr,
               "usage: bench_gguf run MODEL.gguf [--pp 512] [--tg 128] [--reps 5] | bench_gguf requantize IN "
               "OUT TYPE | bench_gguf skeleton IN OUT | bench_gguf synth SKELETON OUT TYPE [--seed N]\n");
  return 2;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
