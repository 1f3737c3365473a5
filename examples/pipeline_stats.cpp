// What the driver made of our kernels (VK_KHR_pipeline_executable_properties): for each pipeline, every
// statistic (registers, shared memory, instruction counts: whatever the driver reports) and every internal
// representation (IR, disassembly where the driver offers it), one text file per pipeline plus summary.json
// (schema in docs/debugging.md, "Pipeline statistics"). experiments/scripts/isa_mix.py counts the
// instructions.
//
//   pipeline_stats --matmul 8192 --tier coopmat-nv --out DIR     the standalone matmul kernel, as
//   bench_matmul
//        [--tier scalar,coopmat-nv,coopmat-khr] [--layout nn|nt|tn|tt] [--tile 128x128x32/2x4] [--mixed16]
//        sizes: N (N^3) or MxNxK, comma-separated
//   pipeline_stats --model mlp|cnn|transformer [--batch N] --out DIR   every distinct pipeline of a training
//        session (examples/models.hpp)
//   --no-ir   statistics only (internal representations can make pipeline creation slow)
//   --cache   also write the driver's pipeline cache (pipeline_cache.bin) and every ELF image found in it
//             (cache_elf_N.bin: on NVIDIA, cubins that isa_mix.py disassembles with nvdisasm)
//
// A matmul pipeline's file also holds the SPIR-V we hand the driver (section "spirv"). Where the device lacks
// the extension, summary.json says "supported": false and the files hold only what meganeura knows.
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "flags.hpp"
#include "meganeura/kernels/matmul.hpp"
#include "meganeura/meganeura.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/runtime/elf_scan.hpp"
#include "meganeura/runtime/statistic_json.hpp"
#include "meganeura/shader/shader.hpp"
#include "models.hpp"

using namespace meganeura;
namespace fs = std::filesystem;

namespace {

struct Args {
  std::string out, model;
  std::vector<std::string> sizes, tiers = {"coopmat-nv"};
  std::string layout = "nn", tile;
  int64_t batch = 32;
  bool mixed16 = false, ir = true, cache = false;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');) out.push_back(t);
  return out;
}

// One pipeline to write: what meganeura knows, and what the driver reported.
struct Pipeline {
  std::string label, variant, kernel_hash;
  size_t dispatches = 1;
  std::vector<runtime::PipelineExecutable> executables;
  std::string spirv_text;  // matmul mode
};

std::string file_stem(size_t i, const std::string& label) {
  std::string s;
  for (char c : label) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  if (s.size() > 80) s.resize(80);
  char head[16];
  std::snprintf(head, sizeof head, "%03zu_", i);
  return head + s;
}

// Writes DIR/<stem>.txt (and .bin files for binary representations); returns the summary row.
nlohmann::json write_pipeline(const fs::path& dir, size_t i, const Pipeline& p,
                              const runtime::DeviceCaps& caps) {
  const std::string stem = file_stem(i, p.label);
  std::ofstream f(dir / (stem + ".txt"));
  if (!f) throw ConfigError("[pipeline_stats] expected a writable directory, got '" + dir.string() + "'");
  f << "# pipeline " << i << ": " << p.label << "\n# variant " << p.variant << ", kernel hash "
    << p.kernel_hash << ", dispatches " << p.dispatches << "\n# device " << caps.name << ", driver "
    << caps.driver_name << " " << caps.driver_info << "\n";
  nlohmann::json exes = nlohmann::json::array();
  for (size_t e = 0; e < p.executables.size(); ++e) {
    const runtime::PipelineExecutable& x = p.executables[e];
    f << "\n=== executable " << e << ": " << x.name << " (" << x.description << "), subgroup size "
      << x.subgroup_size << " ===\n";
    nlohmann::json stats = nlohmann::json::object();
    for (const runtime::PipelineStatistic& s : x.statistics) {
      const nlohmann::json v = runtime::statistic_value(s);
      f << "  " << s.name << " = " << v.dump() << "  [" << s.format << "] " << s.description << "\n";
      stats[s.name] = {{"value", v}, {"format", s.format}, {"description", s.description}};
    }
    nlohmann::json reps = nlohmann::json::array();
    for (size_t r = 0; r < x.representations.size(); ++r) {
      const runtime::PipelineRepresentation& rep = x.representations[r];
      nlohmann::json row = {{"name", rep.name},
                            {"description", rep.description},
                            {"is_text", rep.is_text},
                            {"bytes", rep.data.size()}};
      if (rep.is_text) {
        f << "\n=== representation " << e << "." << r << ": " << rep.name << " (" << rep.description
          << ") ===\n"
          << rep.data << (rep.data.empty() || rep.data.back() == '\n' ? "" : "\n");
      } else {
        const std::string bin = stem + "." + std::to_string(e) + "." + std::to_string(r) + ".bin";
        std::ofstream(dir / bin, std::ios::binary) << rep.data;
        f << "\n=== representation " << e << "." << r << ": " << rep.name << " (" << rep.description
          << "): binary, " << rep.data.size() << " bytes in " << bin << " ===\n";
        row["file"] = bin;
      }
      reps.push_back(std::move(row));
    }
    exes.push_back({{"name", x.name},
                    {"description", x.description},
                    {"subgroup_size", x.subgroup_size},
                    {"statistics", stats},
                    {"representations", reps},
                    {"representations_offered", x.representations_offered}});
  }
  if (!p.spirv_text.empty())
    f << "\n=== spirv: the SPIR-V meganeura hands the driver (spirv-dis) ===\n" << p.spirv_text;
  return {{"index", i},
          {"label", p.label},
          {"variant", p.variant},
          {"kernel_hash", p.kernel_hash},
          {"dispatches", p.dispatches},
          {"file", stem + ".txt"},
          {"executables", exes}};
}

kernels::MatmulShape matmul_shape(const std::string& size, const std::string& layout) {
  kernels::MatmulShape s;
  std::vector<uint32_t> d;
  std::stringstream ss(size);
  for (std::string t; std::getline(ss, t, 'x');) d.push_back(uint32_t(std::stoul(t)));
  if (d.size() == 1) d = {d[0], d[0], d[0]};
  if (d.size() != 3 || layout.size() != 2)
    throw ConfigError("[pipeline_stats] expected --matmul N or MxNxK and --layout nn|nt|tn|tt, got '" + size +
                      "', '" + layout + "'");
  s.m = d[0];
  s.n = d[1];
  s.k = d[2];
  s.trans_a = layout[0] == 't';
  s.trans_b = layout[1] == 't';
  return s;
}

std::vector<Pipeline> matmul_pipelines(runtime::Device& dev, const SessionConfig& config, const Args& a) {
  shader::CompileOptions copt;
  copt.cache_dir = config.cache_dir;
  copt.device_key = dev.caps().fingerprint();
  std::vector<Pipeline> out;
  for (const std::string& tier_name : a.tiers) {
    for (const std::string& size : a.sizes) {
      const kernels::MatmulTier tier = kernels::parse_tier(tier_name);
      kernels::MatmulShape s = matmul_shape(size, a.layout);
      const bool f16 = tier == kernels::MatmulTier::CoopMatNV || tier == kernels::MatmulTier::CoopMatKHR;
      s.input = f16 && a.mixed16 ? kernels::MatmulInput::F32RoundF16
                : f16            ? kernels::MatmulInput::F16
                                 : kernels::MatmulInput::F32;
      const kernels::MatmulKernel kern = kernels::select_matmul(
          dev.caps(), s, tier, {},
          a.tile.empty() ? kernels::CoopMatTile{} : kernels::CoopMatTile::parse(a.tile));
      runtime::KernelDesc desc = kernels::build_matmul_kernel(kern.pass, copt);
      desc.capture = a.ir ? runtime::PipelineCapture::Representations : runtime::PipelineCapture::Statistics;
      Pipeline p;
      p.label = kern.pass.source.label + " " + size + " " + a.layout;
      p.variant = std::string("matmul.") + tier_name;
      try {
        p.spirv_text = shader::disassemble(desc.spirv);
      } catch (const ShaderError& e) {  // bookworm's SPIRV-Tools does not know CooperativeMatrixKHR (6022)
        p.spirv_text = std::string("(not disassembled: ") + e.what() + ")";
      }
      const runtime::KernelId id = dev.create_kernel(desc);
      p.executables = dev.pipeline_executables(id);
      out.push_back(std::move(p));
    }
  }
  return out;
}

std::vector<Pipeline> session_pipelines(std::shared_ptr<runtime::Device> dev, SessionConfig config,
                                        const Args& a) {
  config.optimizer.kind = OptimizerKind::Adam;
  config.optimizer.learning_rate = 1e-3;
  config.gpu_timing = true;
  config.pipeline_ir = a.ir;
  Graph g;
  nn::Context ctx(g, 1);
  g.set_outputs({examples::build_model(g, ctx, a.model, a.batch)});
  Session s = build(g, config, dev);
  std::vector<Pipeline> out;
  for (PipelineReport& r : s.pipelines())
    out.push_back({r.label, r.variant, r.kernel_hash, r.dispatches.size(), std::move(r.executables), ""});
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  bool no_ir = false;
  cli::Flags f("pipeline_stats",
               "The driver's statistics and internal representations of the matmul kernels "
               "(--matmul) or of a\nmodel's training step (--model), one file per pipeline.");
  f.option("--out", a.out, "output folder (required)", "DIR");
  f.custom(
      "--matmul", [&](const std::string& v) { a.sizes = split(v); },
      "products to compile: N or MxNxK, comma-separated", "SIZES");
  f.custom(
      "--tier", [&](const std::string& v) { a.tiers = split(v); }, "matmul tiers, comma-separated",
      "scalar,coopmat-nv,coopmat-khr", "coopmat-nv");
  f.option("--layout", a.layout, "operand layout (nn, nt, tn, tt)");
  f.option("--tile", a.tile, "cooperative tile (128x128x32/2x4)", "TILE");
  f.flag("--mixed16", a.mixed16, "f32 buffers rounded to f16 on load");
  f.choice("--model", a.model, {"mlp", "cnn", "transformer"}, "a model's training step instead of --matmul");
  f.option("--batch", a.batch, "the model's batch size");
  f.flag("--no-ir", no_ir, "statistics only, no internal representations");
  f.flag("--cache", a.cache, "also write the pipeline cache and the ELF images in it");
  try {
    if (!f.parse(argc, argv)) return 0;
    a.ir = !no_ir;
    if (a.out.empty()) throw cli::UsageError("[pipeline_stats] expected --out DIR, got none");
    if (a.sizes.empty() == a.model.empty())
      throw cli::UsageError("[pipeline_stats] expected exactly one of --matmul and --model");
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "%s\n\n%s", e.what(), f.usage().c_str());
    return 2;
  }
  try {
    const SessionConfig config = SessionConfig::from_env();
    runtime::DeviceOptions o;
    o.device_id = config.device_id;
    o.validation = config.validation;
    std::shared_ptr<runtime::Device> dev(runtime::open_device(o));
    const runtime::DeviceCaps& caps = dev->caps();
    const std::vector<Pipeline> pipes =
        a.model.empty() ? matmul_pipelines(*dev, config, a) : session_pipelines(dev, config, a);
    const fs::path dir(a.out);
    fs::create_directories(dir);
    nlohmann::json rows = nlohmann::json::array();
    for (size_t i = 0; i < pipes.size(); ++i) rows.push_back(write_pipeline(dir, i, pipes[i], caps));
    nlohmann::json doc = {
        {"schema", "meganeura.pipeline_stats.v1"},
        {"device",
         {{"name", caps.name},
          {"vendor_id", caps.vendor_id},
          {"device_id", caps.device_id},
          {"driver_name", caps.driver_name},
          {"driver_info", caps.driver_info},
          {"api_version", caps.api_version}}},
        {"supported", caps.pipeline_executable_info},
        {"capture", a.ir ? "representations" : "statistics"},
        {"source", a.model.empty() ? "matmul" : "model:" + a.model},
        {"pipelines", rows},
    };
    if (a.cache) {
      const std::vector<std::byte> blob = dev->pipeline_cache_data();
      std::ofstream(dir / "pipeline_cache.bin", std::ios::binary)
          .write(reinterpret_cast<const char*>(blob.data()), std::streamsize(blob.size()));
      const std::vector<runtime::ElfImage> images = runtime::elf_images(blob);
      nlohmann::json found = nlohmann::json::array();
      for (size_t i = 0; i < images.size(); ++i) {
        const std::string file = "cache_elf_" + std::to_string(i) + ".bin";
        std::ofstream(dir / file, std::ios::binary)
            .write(reinterpret_cast<const char*>(blob.data() + images[i].offset),
                   std::streamsize(images[i].size));
        found.push_back({{"file", file}, {"offset", images[i].offset}, {"bytes", images[i].size}});
      }
      doc["pipeline_cache"] = {{"bytes", blob.size()}, {"elf_images", found}};
      std::printf("pipeline cache: %zu bytes, %zu ELF images\n", blob.size(), images.size());
    }
    std::ofstream(dir / "summary.json") << doc.dump(1) << "\n";
    std::printf("%s: %zu pipelines, VK_KHR_pipeline_executable_properties %s; wrote %s\n", caps.name.c_str(),
                pipes.size(), caps.pipeline_executable_info ? "supported" : "not supported", dir.c_str());
    for (const Pipeline& p : pipes) {
      std::printf("  %s\n", p.label.c_str());
      for (const runtime::PipelineExecutable& x : p.executables) {
        std::string line;
        for (const runtime::PipelineStatistic& s : x.statistics)
          line += " " + s.name + "=" + runtime::statistic_value(s).dump();
        std::printf("    %s:%s (%zu representations)\n", x.name.c_str(), line.c_str(),
                    x.representations.size());
      }
    }
    for (const std::string& m : dev->validation_messages()) std::fprintf(stderr, "%s\n", m.c_str());
    return dev->validation_messages().empty() ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "pipeline_stats: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {  // std::stoul on a malformed size
    std::fprintf(stderr, "pipeline_stats: %s\n", e.what());
    return 2;
  }
}
