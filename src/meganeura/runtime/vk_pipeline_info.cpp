// Device::pipeline_executables through VK_KHR_pipeline_executable_properties: the statistics (register
// count, shared memory, instruction counts: whatever the driver names) and internal representations (IR,
// disassembly where the driver offers it) of a kernel created with KernelDesc::capture; and the bytes of the
// device's pipeline cache (Device::pipeline_cache_data).
#include "meganeura/runtime/vk_device.hpp"

namespace meganeura::runtime::vk {
namespace {

constexpr const char* kWhere = "Device::pipeline_executables";

PipelineStatistic statistic(const VkPipelineExecutableStatisticKHR& v) {
  PipelineStatistic s;
  s.name = v.name;
  s.description = v.description;
  switch (v.format) {
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
      s.format = "bool32";
      s.b32 = v.value.b32 == VK_TRUE;
      break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
      s.format = "int64";
      s.i64 = v.value.i64;
      break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
      s.format = "uint64";
      s.u64 = v.value.u64;
      break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR:
      s.format = "float64";
      s.f64 = v.value.f64;
      break;
    default:
      s.format = "format" + std::to_string(int(v.format));  // a format newer than our headers: no value
  }
  return s;
}

}  // namespace

std::vector<PipelineExecutable> VulkanDevice::pipeline_executables(KernelId id) {
  const Kernel& k = kernel(id, kWhere);
  if (k.capture == PipelineCapture::None) return {};
  VkPipelineInfoKHR pi{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, nullptr, k.pipeline};
  uint32_t n = 0;
  check(f_.vkGetPipelineExecutablePropertiesKHR(device_, &pi, &n, nullptr), kWhere,
        "vkGetPipelineExecutablePropertiesKHR");
  std::vector<VkPipelineExecutablePropertiesKHR> props(n);
  for (auto& p : props) p = {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR, nullptr, 0, {}, {}, 0};
  check(f_.vkGetPipelineExecutablePropertiesKHR(device_, &pi, &n, props.data()), kWhere,
        "vkGetPipelineExecutablePropertiesKHR");
  std::vector<PipelineExecutable> out;
  for (uint32_t e = 0; e < n; ++e) {
    PipelineExecutable x;
    x.name = props[e].name;
    x.description = props[e].description;
    x.subgroup_size = props[e].subgroupSize;
    VkPipelineExecutableInfoKHR ei{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, nullptr, k.pipeline, e};

    uint32_t ns = 0;
    check(f_.vkGetPipelineExecutableStatisticsKHR(device_, &ei, &ns, nullptr), kWhere,
          "vkGetPipelineExecutableStatisticsKHR");
    std::vector<VkPipelineExecutableStatisticKHR> stats(ns);
    for (auto& s : stats) {
      s = {};
      s.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
    }
    check(f_.vkGetPipelineExecutableStatisticsKHR(device_, &ei, &ns, stats.data()), kWhere,
          "vkGetPipelineExecutableStatisticsKHR");
    for (uint32_t i = 0; i < ns; ++i) x.statistics.push_back(statistic(stats[i]));

    if (k.capture == PipelineCapture::Representations) {
      uint32_t nr = 0;
      check(f_.vkGetPipelineExecutableInternalRepresentationsKHR(device_, &ei, &nr, nullptr), kWhere,
            "vkGetPipelineExecutableInternalRepresentationsKHR");
      x.representations_offered = nr;
      std::vector<VkPipelineExecutableInternalRepresentationKHR> reps(nr);
      for (auto& r : reps) {
        r = {};
        r.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR;
      }
      // First the sizes, then the bytes.
      check(f_.vkGetPipelineExecutableInternalRepresentationsKHR(device_, &ei, &nr, reps.data()), kWhere,
            "vkGetPipelineExecutableInternalRepresentationsKHR");
      std::vector<std::string> data(nr);
      for (uint32_t i = 0; i < nr; ++i) {
        data[i].assign(reps[i].dataSize, '\0');
        reps[i].pData = data[i].data();
      }
      VkResult r = f_.vkGetPipelineExecutableInternalRepresentationsKHR(device_, &ei, &nr, reps.data());
      if (r != VK_INCOMPLETE) check(r, kWhere, "vkGetPipelineExecutableInternalRepresentationsKHR");
      for (uint32_t i = 0; i < nr; ++i) {
        PipelineRepresentation rep;
        rep.name = reps[i].name;
        rep.description = reps[i].description;
        rep.is_text = reps[i].isText == VK_TRUE;
        rep.data = std::move(data[i]);
        rep.data.resize(reps[i].dataSize);
        if (rep.is_text)
          rep.data.resize(rep.data.find('\0') == std::string::npos ? rep.data.size() : rep.data.find('\0'));
        x.representations.push_back(std::move(rep));
      }
    }
    out.push_back(std::move(x));
  }
  return out;
}

std::vector<std::byte> VulkanDevice::pipeline_cache_data() {
  constexpr const char* where = "Device::pipeline_cache_data";
  size_t n = 0;
  check(f_.vkGetPipelineCacheData(device_, cache_, &n, nullptr), where, "vkGetPipelineCacheData");
  std::vector<std::byte> out(n);
  // VK_INCOMPLETE if the cache grew in between (another thread creating a pipeline): what was written is
  // whole.
  const VkResult r = f_.vkGetPipelineCacheData(device_, cache_, &n, out.data());
  if (r != VK_INCOMPLETE) check(r, where, "vkGetPipelineCacheData");
  out.resize(n);
  return out;
}

}  // namespace meganeura::runtime::vk
