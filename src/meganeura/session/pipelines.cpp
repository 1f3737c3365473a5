// Session::pipelines(): each distinct pipeline of the session with what the driver captured about it
// (VK_KHR_pipeline_executable_properties; SessionConfig::gpu_timing / pipeline_ir).
#include <cstdio>
#include <map>

#include "meganeura/session/session_impl.hpp"

namespace meganeura {

std::vector<PipelineReport> Session::pipelines() const {
  const SessionImpl& s = *impl_;
  std::vector<PipelineReport> out;
  std::map<runtime::KernelId, size_t> index;  // kernel id -> position in out
  for (size_t k = 0; k < s.step.code.size(); ++k) {
    const runtime::KernelId id = s.kernel_of.at(k);
    auto [it, fresh] = index.emplace(id, out.size());
    if (fresh) {
      const GeneratedKernel& code = s.step.code[k];
      PipelineReport r;
      r.label = code.label;
      r.variant = code.variant;
      char hash[17];
      std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(code.hash));
      r.kernel_hash = hash;
      r.executables = s.device->pipeline_executables(id);
      out.push_back(std::move(r));
    }
    out[it->second].dispatches.push_back(k);
  }
  return out;
}

}  // namespace meganeura
