// The profiling front end of `meganeura profile` and the profile_session example (cli/profile.hpp): a
// per-dispatch GPU timing profile of one training step (schema: docs/debugging.md).
#include "profile.hpp"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "flags.hpp"
#include "meganeura/meganeura.hpp"
#include "models.hpp"

namespace meganeura::cli {

int profile_main(int argc, char** argv, const ProfileFrontEnd& front) {
  std::string out, model = "mlp";
  int64_t batch = 32;
  ProfileOptions po;
  bool json = false;
  Precision precision = Precision::F32;
  const std::string program = argv[0];
  Flags f(program,
          std::string(
              "Times every dispatch of one training step (Adam, seeded random data) with GPU timestamps and "
              "prints the\n"
              "kernel families' shares; OUT receives the whole profile as JSON.") +
              (front.require_timing_env
                   ? "\nMEGANEURA_GPU_TIMING=1 is required (`meganeura profile` turns it on itself)."
                   : ""));
  f.positional("OUT", out, "the profile's JSON file", /*required=*/front.require_timing_env);
  f.choice("--model", model, {"mlp", "cnn", "transformer"}, "the model (examples/models.hpp)");
  f.option("--batch", batch, "batch size");
  f.option("--iterations", po.iterations, "timed steps (each of the grouped and the instrumented step)");
  f.option("--warmup", po.warmup, "untimed steps first");
  f.precision(precision);
  f.flag("--json", json, "the profile as one JSON object on stdout instead of the summary");
  return run(f, argc, argv, [&] {
    if (po.iterations < 1)
      throw UsageError("[" + program + "] expected --iterations >= 1, got " + std::to_string(po.iterations));
    if (po.warmup < 0)
      throw UsageError("[" + program + "] expected --warmup >= 0, got " + std::to_string(po.warmup));
    SessionConfig config = SessionConfig::from_env();
    if (front.require_timing_env && !config.gpu_timing)
      throw UsageError("[" + program +
                       "] expected MEGANEURA_GPU_TIMING=1 (the session must record timestamps)");
    config.gpu_timing = true;
    config.precision = precision;
    config.optimizer.kind = OptimizerKind::Adam;
    config.optimizer.learning_rate = 1e-3;
    Graph g;
    nn::Context ctx(g, 1);
    g.set_outputs({examples::build_model(g, ctx, model, batch)});
    Session s = build(g, config);  // parameters start from the layers' seeded rules
    examples::feed_random(s);
    const std::string text = s.profile(po);
    if (!out.empty()) {
      std::ofstream file(out);
      if (!(file << text << "\n"))
        throw ConfigError("[" + program + "] expected a writable output path, got '" + out + "'");
    }
    const nlohmann::json doc = nlohmann::json::parse(text);
    if (json) {
      json_line(doc.dump());
      return 0;
    }
    std::printf("%s: %zu dispatches; grouped step %.1f us, instrumented %.1f us (ratio %.2f)\n",
                doc["device"]["name"].get<std::string>().c_str(), doc["dispatches"].size(),
                doc["overhead"]["grouped_gpu"]["median_ns"].get<double>() / 1e3,
                doc["overhead"]["instrumented_gpu"]["median_ns"].get<double>() / 1e3,
                doc["overhead"]["ratio"].get<double>());
    for (const auto& fam : doc["families"])
      std::printf("  %-14s %3d dispatches %10.1f us  %5.1f%%\n", fam["family"].get<std::string>().c_str(),
                  fam["dispatches"].get<int>(), fam["median_ns_total"].get<double>() / 1e3,
                  100.0 * fam["share"].get<double>());
    if (!out.empty()) std::printf("wrote %s\n", out.c_str());
    return 0;
  });
}

}  // namespace meganeura::cli
