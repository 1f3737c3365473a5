// The device a GPU bench opens: SessionConfig::from_env's device and validation, and only one with timestamp
// queries (every bench times with them); the compile options of the bench's own kernels on it.
#pragma once

#include <cstdio>
#include <memory>

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

}  // namespace meganeura::bench
