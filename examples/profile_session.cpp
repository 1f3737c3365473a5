// Per-dispatch GPU timing profile of one training step, written as JSON (schema: docs/debugging.md).
//
//   MEGANEURA_GPU_TIMING=1 build/bin/profile_session out.json [--model mlp|cnn|transformer] [--batch N]
//                                                            [--iterations N] [--warmup N]
//
// The models (examples/models.hpp) train with Adam on seeded random data; the names nn gives the layers appear
// as dispatch labels (forward) and grad/<name> (backward).
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "meganeura/meganeura.hpp"
#include "models.hpp"

using namespace meganeura;

int main(int argc, char** argv) {
  std::string out, model = "mlp";
  int64_t batch = 32;
  ProfileOptions po;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw ConfigError("[profile_session] expected a value after " + a + ", got none");
      return argv[++i];
    };
    if (a == "--model") model = value();
    else if (a == "--batch") batch = std::stoll(value());
    else if (a == "--iterations") po.iterations = std::stoi(value());
    else if (a == "--warmup") po.warmup = std::stoi(value());
    else if (a == "--help" || a == "-h" || (!a.empty() && a[0] == '-')) {
      std::fprintf(stderr, "usage: MEGANEURA_GPU_TIMING=1 profile_session OUT.json [--model mlp|cnn|transformer] [--batch N] "
                           "[--iterations N] [--warmup N]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    } else out = a;
  }
  if (out.empty()) {
    std::fprintf(stderr, "profile_session: expected an output path (OUT.json)\n");
    return 2;
  }
  try {
    SessionConfig config = SessionConfig::from_env();
    if (!config.gpu_timing) {
      std::fprintf(stderr, "profile_session: set MEGANEURA_GPU_TIMING=1 (the session must record timestamps)\n");
      return 2;
    }
    config.optimizer.kind = OptimizerKind::Adam;
    config.optimizer.learning_rate = 1e-3;
    Graph g;
    nn::Context ctx(g, 1);
    g.set_outputs({examples::build_model(g, ctx, model, batch)});
    Session s = build(g, config);
    for (const auto& [name, w] : ctx.weights()) s.set_parameter(name, w);
    examples::feed_random(s);
    const std::string json = s.profile(po);
    std::ofstream f(out);
    if (!f) throw ConfigError("[profile_session] expected a writable output path, got '" + out + "'");
    f << json << "\n";
    nlohmann::json doc = nlohmann::json::parse(json);
    std::printf("%s: %zu dispatches; grouped step %.1f us, instrumented %.1f us (ratio %.2f)\n", doc["device"]["name"].get<std::string>().c_str(),
                doc["dispatches"].size(), doc["overhead"]["grouped_gpu"]["median_ns"].get<double>() / 1e3,
                doc["overhead"]["instrumented_gpu"]["median_ns"].get<double>() / 1e3,
                doc["overhead"]["ratio"].get<double>());
    for (const auto& fam : doc["families"])
      std::printf("  %-14s %3d dispatches %10.1f us  %5.1f%%\n", fam["family"].get<std::string>().c_str(),
                  fam["dispatches"].get<int>(), fam["median_ns_total"].get<double>() / 1e3,
                  100.0 * fam["share"].get<double>());
    std::printf("wrote %s\n", out.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "profile_session: %s\n", e.what());
    return 1;
  }
  return 0;
}
