#include "meganeura/train/safetensors_export.hpp"

#include <nlohmann/json.hpp>
#include <set>

#include "meganeura/core/error.hpp"
#include "meganeura/formats/safetensors.hpp"

namespace meganeura {

void save_safetensors(const std::string& path, TensorStore& store, const SafetensorsExportOptions& options) {
  std::vector<TensorInfo> infos;
  nlohmann::json state = nlohmann::json::array();
  for (const TensorInfo& t : store.tensors()) {
    if (t.role == TensorRole::OptimizerState) {
      if (!options.optimizer_state) continue;
      state.push_back(t.name);
    }
    infos.push_back(t);
  }
  std::vector<std::vector<std::byte>> data;
  std::vector<SafetensorsTensor> tensors;
  data.reserve(infos.size());
  for (const TensorInfo& t : infos) {
    data.push_back(store.read(t));
    if (data.back().size() != t.byte_size())
      throw CheckpointError("[save_safetensors] " + describe(t) + ": expected " +
                            std::to_string(t.byte_size()) + " bytes from the store, got " +
                            std::to_string(data.back().size()));
    tensors.push_back({t.name, t.dtype, t.shape, data.back()});
  }
  std::map<std::string, std::string> meta = store.metadata();
  meta.emplace("format", "pt");
  if (!state.empty()) meta[kSafetensorsRolesKey] = state.dump();
  write_safetensors(path, tensors, meta);
}

MemoryStore read_safetensors_store(const std::string& path) {
  const SafetensorsFile file(path);
  std::set<std::string> state;
  std::map<std::string, std::string> meta = file.metadata();
  if (auto it = meta.find(kSafetensorsRolesKey); it != meta.end()) {
    const std::string where =
        "[read_safetensors_store] '" + path + "': __metadata__ '" + kSafetensorsRolesKey + "': ";
    nlohmann::json names;
    try {
      names = nlohmann::json::parse(it->second);
    } catch (const nlohmann::json::exception& e) {
      throw FormatError(where + "expected a JSON array of tensor names, got: " + e.what());
    }
    if (!names.is_array())
      throw FormatError(where + "expected a JSON array of tensor names, got " + names.dump());
    for (const auto& n : names) {
      if (!n.is_string() || file.find(n.get<std::string>()) == nullptr)
        throw FormatError(where + "expected names of tensors in the file, got " + n.dump());
      state.insert(n.get<std::string>());
    }
    meta.erase(it);
  }
  meta.erase("format");
  MemoryStore store;
  for (const SafetensorsEntry& e : file.entries()) {
    const SafetensorsView v = file.tensor(e.name);
    const TensorRole role = state.count(e.name) ? TensorRole::OptimizerState : TensorRole::Parameter;
    store.add(TensorInfo{e.name, role, v.dtype, v.shape},
              std::vector<std::byte>(v.bytes.begin(), v.bytes.end()));
  }
  store.set_metadata(meta);
  return store;
}

void checkpoint_to_safetensors(const std::string& checkpoint, const std::string& out,
                               const SafetensorsExportOptions& options) {
  // A store shaped like the file, filled by an ordinary restore (which checks every CRC first).
  MemoryStore store;
  for (const CheckpointEntry& e : inspect_checkpoint(checkpoint).entries)
    store.add(e.info, std::vector<std::byte>(e.info.byte_size()));
  restore_checkpoint(checkpoint, store);
  save_safetensors(out, store, options);
}

void safetensors_to_checkpoint(const std::string& in, const std::string& checkpoint) {
  MemoryStore store = read_safetensors_store(in);
  save_checkpoint(checkpoint, store);
}

}  // namespace meganeura
