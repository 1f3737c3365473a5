// Per-dispatch GPU timing profile of one training step, written as JSON (schema: docs/debugging.md).
//
//   MEGANEURA_GPU_TIMING=1 build/bin/profile_session out.json [--model mlp|cnn|transformer] [--batch N]
//                                                            [--iterations N] [--warmup N]
//
// The models (examples/models.hpp) train with Adam on seeded random data; the names nn gives the layers
// appear as dispatch labels (forward) and grad/<name> (backward).
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "flags.hpp"
#include "meganeura/meganeura.hpp"
#include "models.hpp"

using namespace meganeura;

int main(int argc, char** argv) {
  std::string out, model = "mlp";
  int64_t batch = 32;
  ProfileOptions po;
  cli::Flags f("profile_session",
               "Per-dispatch GPU timing profile of one training step, written as JSON "
               "(MEGANEURA_GPU_TIMING=1 required;\n`meganeura profile` turns it on itself).");
  f.positional("OUT", out, "the profile's JSON file");
  f.choice("--model", model, {"mlp", "cnn", "transformer"}, "the model (examples/models.hpp)");
  f.option("--batch", batch, "batch size");
  f.option("--iterations", po.iterations, "timed steps");
  f.option("--warmup", po.warmup, "untimed steps first");
  return cli::run(f, argc, argv, [&]() -> int {
    SessionConfig config = SessionConfig::from_env();
    if (!config.gpu_timing) {
      throw cli::UsageError(
          "[profile_session] expected MEGANEURA_GPU_TIMING=1 (the session must record timestamps)");
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
    std::ofstream file(out);
    if (!file) throw ConfigError("[profile_session] expected a writable output path, got '" + out + "'");
    file << json << "\n";
    nlohmann::json doc = nlohmann::json::parse(json);
    std::printf("%s: %zu dispatches; grouped step %.1f us, instrumented %.1f us (ratio %.2f)\n",
                doc["device"]["name"].get<std::string>().c_str(), doc["dispatches"].size(),
                doc["overhead"]["grouped_gpu"]["median_ns"].get<double>() / 1e3,
                doc["overhead"]["instrumented_gpu"]["median_ns"].get<double>() / 1e3,
                doc["overhead"]["ratio"].get<double>());
    for (const auto& fam : doc["families"])
      std::printf("  %-14s %3d dispatches %10.1f us  %5.1f%%\n", fam["family"].get<std::string>().c_str(),
                  fam["dispatches"].get<int>(), fam["median_ns_total"].get<double>() / 1e3,
                  100.0 * fam["share"].get<double>());
    std::printf("wrote %s\n", out.c_str());
    return 0;
  });
}
