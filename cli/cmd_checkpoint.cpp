// meganeura checkpoint inspect|convert: our checkpoint files (train/checkpoint.hpp) and safetensors.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "command.hpp"
#include "flags.hpp"
#include "meganeura/train/checkpoint.hpp"
#include "meganeura/train/safetensors_export.hpp"

namespace meganeura::cli {
namespace {

bool is_safetensors(const std::string& path) {
  const std::string ext = ".safetensors";
  return path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
}

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

int inspect_main(int argc, char** argv) {
  std::string path;
  bool json = false;
  Flags f(argv[0],
          "Lists a checkpoint's tensors (name, role, dtype, shape, bytes) and metadata after checking the\n"
          "whole file; FILE.safetensors is read as safetensors, anything else as our checkpoint format.");
  f.positional("FILE", path, "a checkpoint (.ckpt, from --save or Trainer::save) or a .safetensors file");
  f.flag("--json", json, "one JSON object per line: the file, then one per tensor");
  return run(f, argc, argv, [&] {
    std::map<std::string, std::string> metadata;
    std::vector<TensorInfo> tensors;
    std::string format = "safetensors";
    uint32_t version = 0;
    if (is_safetensors(path)) {
      MemoryStore store = read_safetensors_store(path);
      metadata = store.metadata();
      tensors = store.tensors();
    } else {
      const CheckpointContents c = inspect_checkpoint(path);
      format = "meganeura";
      version = c.version;
      metadata = c.metadata;
      for (const CheckpointEntry& e : c.entries) tensors.push_back(e.info);
    }
    uint64_t bytes = 0;
    for (const TensorInfo& t : tensors) bytes += t.byte_size();
    if (json) {
      nlohmann::json head{{"file", path},
                          {"format", format},
                          {"tensors", tensors.size()},
                          {"bytes", bytes},
                          {"metadata", metadata}};
      if (version) head["version"] = version;
      json_line(head.dump());
      for (const TensorInfo& t : tensors)
        json_line(nlohmann::json{{"name", t.name},
                                 {"role", role_name(t.role)},
                                 {"dtype", dtype_name(t.dtype)},
                                 {"shape", t.shape},
                                 {"bytes", t.byte_size()}}
                      .dump());
      return 0;
    }
    std::printf("%s: %s%s, %zu tensors, %llu bytes\n", path.c_str(), format.c_str(),
                version ? (" v" + std::to_string(version)).c_str() : "", tensors.size(),
                static_cast<unsigned long long>(bytes));
    for (const auto& [k, v] : metadata) std::printf("  %s = %s\n", k.c_str(), v.c_str());
    for (const TensorInfo& t : tensors)
      std::printf("  %-32s %-16s %-5s %-16s %llu\n", t.name.c_str(), role_name(t.role), dtype_name(t.dtype),
                  shape_text(t.shape).c_str(), static_cast<unsigned long long>(t.byte_size()));
    return 0;
  });
}

int convert_main(int argc, char** argv) {
  std::string in, out;
  bool optimizer_state = false;
  Flags f(argv[0],
          "Converts between our checkpoint format and safetensors; the direction follows OUT's extension\n"
          "(.safetensors: export; anything else: import a .safetensors file as a checkpoint).");
  f.positional("IN", in, "the file to read");
  f.positional("OUT", out, "the file to write (replaced atomically)");
  f.flag("--optimizer-state", optimizer_state,
         "export the optimizer's moments too (listed in __metadata__; parameters only by default)");
  return run(f, argc, argv, [&] {
    if (is_safetensors(out)) {
      if (is_safetensors(in))
        throw UsageError(
            "[meganeura checkpoint convert] expected IN to be a checkpoint when OUT is .safetensors, got '" +
            in + "'");
      checkpoint_to_safetensors(in, out, {.optimizer_state = optimizer_state});
    } else {
      if (!is_safetensors(in))
        throw UsageError("[meganeura checkpoint convert] expected one side to be a .safetensors file, got '" +
                         in + "' and '" + out + "'");
      if (optimizer_state)
        throw UsageError(
            "[meganeura checkpoint convert] expected --optimizer-state only when exporting, got an import");
      safetensors_to_checkpoint(in, out);
    }
    std::printf("wrote %s\n", out.c_str());
    return 0;
  });
}

int checkpoint_main(int argc, char** argv) {
  const std::string program = argv[0];
  auto usage = [&](FILE* to) {
    std::fprintf(to,
                 "usage: %s inspect|convert ...\n\nCheckpoint files and safetensors.\n\nsubcommands:\n"
                 "  inspect FILE       tensors and metadata of a checkpoint or .safetensors file\n"
                 "  convert IN OUT     checkpoint <-> safetensors (by OUT's extension)\n\n"
                 "`%s <subcommand> --help` describes one.\n",
                 program.c_str(), program.c_str());
  };
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const std::string sub = argv[1];
  if (sub == "--help" || sub == "-h") {
    usage(stdout);
    return 0;
  }
  std::string name = program + " " + sub;
  argv[1] = name.data();
  if (sub == "inspect") return inspect_main(argc - 1, argv + 1);
  if (sub == "convert") return convert_main(argc - 1, argv + 1);
  std::fprintf(stderr, "[%s] expected one of the subcommands inspect, convert, got '%s'\n\n", program.c_str(),
               sub.c_str());
  usage(stderr);
  return 2;
}

const bool registered = register_command(
    {"checkpoint", "inspect a checkpoint, convert between checkpoints and safetensors", checkpoint_main});

}  // namespace
}  // namespace meganeura::cli
