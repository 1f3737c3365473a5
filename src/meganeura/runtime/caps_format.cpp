// DeviceCaps as JSON (for machines and cache keys) and as a table (for people).
#include <nlohmann/json.hpp>

#include <cstdio>

#include "meganeura/runtime/device.hpp"

namespace meganeura::runtime {
namespace {

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%04x", v);
  return buf;
}

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

nlohmann::json shapes_json(const std::vector<CoopMatShape>& shapes) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : shapes) {
    out.push_back({{"m", s.m},
                   {"n", s.n},
                   {"k", s.k},
                   {"a", s.a_type},
                   {"b", s.b_type},
                   {"c", s.c_type},
                   {"result", s.result_type},
                   {"scope", s.scope}});
    if (s.workgroup_invocations) out.back()["workgroup_invocations"] = s.workgroup_invocations;
  }
  return out;
}

nlohmann::json caps_json(const DeviceCaps& c, bool with_heaps) {
  nlohmann::json j;
  j["backend"] = c.backend;
  j["name"] = c.name;
  j["vendor_id"] = c.vendor_id;
  j["device_id"] = c.device_id;
  j["device_id_hex"] = hex(c.device_id);  // the form MEGANEURA_DEVICE_ID takes
  j["device_type"] = c.device_type;
  j["driver_name"] = c.driver_name;
  j["driver_info"] = c.driver_info;
  j["driver_version"] = c.driver_version;
  j["api_version"] = c.api_version;
  j["limits"] = {
      {"max_shared_memory", c.max_shared_memory},
      {"max_workgroup_size", {c.max_workgroup_size[0], c.max_workgroup_size[1], c.max_workgroup_size[2]}},
      {"max_workgroup_invocations", c.max_workgroup_invocations},
      {"max_workgroup_count", {c.max_workgroup_count[0], c.max_workgroup_count[1], c.max_workgroup_count[2]}},
      {"max_storage_buffer_range", c.max_storage_buffer_range},
      {"min_storage_buffer_offset_alignment", c.min_storage_buffer_offset_alignment},
      {"max_push_constants_size", c.max_push_constants_size},
      {"subgroup_size", c.subgroup_size},
      {"min_subgroup_size", c.min_subgroup_size},
      {"max_subgroup_size", c.max_subgroup_size},
      {"compute_units", c.compute_units},
      {"timestamp_period_ns", c.timestamp_period_ns},
  };
  j["features"] = {
      {"fp16_arithmetic", c.fp16_arithmetic},
      {"storage_16bit", c.storage_16bit},
      {"int8_arithmetic", c.int8_arithmetic},
      {"subgroup_basic", c.subgroup_basic},
      {"subgroup_arithmetic", c.subgroup_arithmetic},
      {"subgroup_shuffle", c.subgroup_shuffle},
      {"subgroup_ballot", c.subgroup_ballot},
      {"subgroup_size_control", c.subgroup_size_control},
      {"buffer_device_address", c.buffer_device_address},
      {"vulkan_memory_model", c.vulkan_memory_model},
      {"timestamps", c.timestamps},
      {"shader_float_atomic_add", c.shader_float_atomic_add},
      {"pipeline_executable_info", c.pipeline_executable_info},
      {"f16_rte_conversion", c.f16_rte_conversion},
      {"coopmat_nv", c.coopmat_nv},
      {"coopmat_khr", c.coopmat_khr},
      {"coopmat2_workgroup", c.coopmat2_workgroup},
      {"coopmat2_tensor_addressing", c.coopmat2_tensor_addressing},
  };
  j["coopmat_nv_shapes"] = shapes_json(c.coopmat_nv_shapes);
  j["coopmat_khr_shapes"] = shapes_json(c.coopmat_khr_shapes);
  j["coopmat2_flexible_shapes"] = shapes_json(c.coopmat2_flexible_shapes);
  if (with_heaps) {
    j["heaps"] = nlohmann::json::array();
    for (const auto& h : c.heaps) {
      j["heaps"].push_back(
          {{"size", h.size}, {"budget", h.budget}, {"usage", h.usage}, {"device_local", h.device_local}});
    }
  }
  return j;
}

std::string shapes_text(const std::vector<CoopMatShape>& shapes) {
  std::string out;
  for (const auto& s : shapes) {
    out += "    " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + "  " +
           s.a_type + " x " + s.b_type + " + " + s.c_type + " -> " + s.result_type + "  (" + s.scope +
           (s.workgroup_invocations ? ", " + std::to_string(s.workgroup_invocations) + " invocations" : "") +
           ")\n";
  }
  return out;
}

}  // namespace

std::string DeviceCaps::to_json() const { return caps_json(*this, true).dump(); }

std::string DeviceCaps::fingerprint() const { return caps_json(*this, false).dump(); }

std::string DeviceCaps::to_table() const {
  std::string out;
  auto row = [&](const std::string& key, const std::string& value) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "  %-36s ", key.c_str());
    out += buf + value + "\n";
  };
  auto yes = [](bool b) { return std::string(b ? "yes" : "no"); };
  auto three = [](const uint32_t v[3]) {
    return std::to_string(v[0]) + " x " + std::to_string(v[1]) + " x " + std::to_string(v[2]);
  };
  out += name + "\n";
  row("backend", backend);
  row("vendor id / device id", hex(vendor_id) + " / " + hex(device_id));
  row("type", device_type);
  row("driver", driver_name + " " + driver_info + " (version " + std::to_string(driver_version) + ")");
  row("api version", api_version);
  row("max shared memory per workgroup", std::to_string(max_shared_memory) + " bytes");
  row("max workgroup size", three(max_workgroup_size));
  row("max workgroup invocations", std::to_string(max_workgroup_invocations));
  row("max workgroup count", three(max_workgroup_count));
  row("max storage buffer range", std::to_string(max_storage_buffer_range) + " bytes");
  row("min storage buffer offset alignment", std::to_string(min_storage_buffer_offset_alignment));
  row("max push constants", std::to_string(max_push_constants_size) + " bytes");
  row("subgroup size (min..max)", std::to_string(subgroup_size) + " (" + std::to_string(min_subgroup_size) +
                                      ".." + std::to_string(max_subgroup_size) + ")");
  row("compute units", compute_units ? std::to_string(compute_units) : std::string("unknown"));
  row("fp16 arithmetic", yes(fp16_arithmetic));
  row("16-bit storage", yes(storage_16bit));
  row("int8 arithmetic", yes(int8_arithmetic));
  row("subgroup basic/arith/shuffle/ballot", yes(subgroup_basic) + "/" + yes(subgroup_arithmetic) + "/" +
                                                 yes(subgroup_shuffle) + "/" + yes(subgroup_ballot));
  row("subgroup size control", yes(subgroup_size_control));
  row("buffer device address", yes(buffer_device_address));
  row("vulkan memory model", yes(vulkan_memory_model));
  row("timestamps", timestamps ? "yes (" + std::to_string(timestamp_period_ns) + " ns/tick)" : "no");
  row("shader float atomic add", yes(shader_float_atomic_add));
  row("pipeline executable info", yes(pipeline_executable_info));
  row("f16 conversion RTE + denormals", yes(f16_rte_conversion));
  row("cooperative matrix NV",
      yes(coopmat_nv) + (coopmat_nv ? " (" + std::to_string(coopmat_nv_shapes.size()) + " shapes)" : ""));
  out += shapes_text(coopmat_nv_shapes);
  row("cooperative matrix KHR",
      yes(coopmat_khr) + (coopmat_khr ? " (" + std::to_string(coopmat_khr_shapes.size()) + " shapes)" : ""));
  out += shapes_text(coopmat_khr_shapes);
  row("cooperative matrix 2, workgroup scope",
      yes(coopmat2_workgroup) +
          (coopmat2_workgroup ? " (" + std::to_string(coopmat2_flexible_shapes.size()) + " flexible shapes)"
                              : ""));
  out += shapes_text(coopmat2_flexible_shapes);
  row("cooperative matrix 2, tensor addressing", yes(coopmat2_tensor_addressing));
  for (size_t i = 0; i < heaps.size(); ++i) {
    const MemoryHeap& h = heaps[i];
    row("heap " + std::to_string(i) + (h.device_local ? " (device local)" : ""),
        mib(h.size) + ", budget " + mib(h.budget) + ", used " + mib(h.usage));
  }
  return out;
}

}  // namespace meganeura::runtime
