// The device a GPU bench opens: SessionConfig::from_env's device and validation, and only one with timestamp
// queries (every bench times with them); the compile options of the bench's own kernels on it.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "meganeura/runtime/device.hpp"
#include "meganeura/session/session.hpp"
#include "meganeura/shader/shader.hpp"

namespace meganeura::bench {

// nullptr (after saying why on stderr, as `tool`) where the device has no timestamp queries.
inline std::unique_ptr<runtime::Device> open_timed_device(const char* tool, const SessionConfig& config) {
  runtime::DeviceOptions opt;
  opt.device_id = config.device_id;
  opt.validation = config.validation;
  auto dev = runtime::open_device(opt);
  if (!dev->caps().timestamps) {
    std::fprintf(stderr, "%s: %s has no timestamp queries\n", tool, dev->caps().name.c_str());
    return nullptr;
  }
  return dev;
}

inline shader::CompileOptions compile_options(const SessionConfig& config, const runtime::Device& dev) {
  shader::CompileOptions copt;
  copt.cache_dir = config.cache_dir;
  copt.device_key = dev.caps().fingerprint();
  return copt;
}

// A bench's own kernel from GLSL: `buffers` storage buffers at set 0, bindings 0.., `push_bytes` of push
// constants.
inline runtime::KernelId raw_kernel(runtime::Device& dev, const shader::CompileOptions& copt,
                                    const char* label, const char* glsl, uint32_t buffers,
                                    uint32_t push_bytes) {
  runtime::KernelDesc desc;
  desc.label = label;
  desc.spirv = shader::compile_glsl({desc.label, glsl, {}}, copt).spirv;
  desc.num_buffers = buffers;
  desc.push_constant_bytes = push_bytes;
  return dev.create_kernel(desc);
}

// The bench's exit status: 1 where the validation layer (MEGANEURA_VALIDATION=1) said anything, each message
// on stderr.
inline int validation_status(runtime::Device& dev) {
  for (const std::string& m : dev.validation_messages()) std::fprintf(stderr, "%s\n", m.c_str());
  return dev.validation_messages().empty() ? 0 : 1;
}

}  // namespace meganeura::bench
