#pragma once
// Shared by the GPU tests: one device per test process, opened as SessionConfig::from_env() says (CI sets
// MEGANEURA_VALIDATION=1), and a fixture that fails any test during which the validation layer spoke.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "meganeura/runtime/device.hpp"
#include "meganeura/session/session.hpp"
#include "meganeura/shader/shader.hpp"
#include "paths.hpp"

namespace meganeura::test {

inline const SessionConfig& gpu_config() {
  static const SessionConfig config = SessionConfig::from_env();
  return config;
}

inline runtime::DeviceOptions gpu_options(bool host_visible = false) {
  runtime::DeviceOptions o;
  o.device_id = gpu_config().device_id;
  o.validation = gpu_config().validation;
  o.host_visible = host_visible;
  return o;
}

// Opened on first use and kept for the whole process: device creation is the slow part on lavapipe.
inline runtime::Device& gpu_device() {
  static std::unique_ptr<runtime::Device> device = runtime::open_device(gpu_options());
  return *device;
}

// Compiles a test kernel for the shared device (no disk cache: tests must not depend on earlier runs).
inline std::vector<uint32_t> compile_test_kernel(const std::string& label, const std::string& glsl,
                                                 std::vector<shader::Define> defines = {}) {
  shader::CompileOptions opt;
  opt.device_key = gpu_device().caps().fingerprint();
  return shader::compile_glsl({label, glsl, std::move(defines)}, opt).spirv;
}

// n uniform values in [-scale, scale].
inline std::vector<float> random_vec(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Fails the test when the validation layer reported anything while it ran.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override { seen_ = gpu_device().validation_messages().size(); }
  void TearDown() override { expect_no_new_validation_messages(gpu_device(), seen_); }

  static void expect_no_new_validation_messages(const runtime::Device& device, size_t seen) {
    const std::vector<std::string> messages = device.validation_messages();
    for (size_t i = seen; i < messages.size(); ++i) ADD_FAILURE() << "validation layer: " << messages[i];
  }

  runtime::Device& device() { return gpu_device(); }

 private:
  size_t seen_ = 0;
};

// At the end of the run: how many validation messages were set apart as a layer older than
// VK_KHR_cooperative_matrix complaining about modules that use it (runtime::Device::validation_known_limits).
// scripts/device/test-gpu.sh reports this line.
class KnownLayerLimitsReport : public ::testing::Environment {
 public:
  void TearDown() override {
    if (!gpu_config().validation) return;
    std::printf(
        "[meganeura] validation: %zu messages, %zu set apart as the layer's known limits "
        "(VK_KHR_cooperative_matrix modules under a layer older than 1.3.255)\n",
        gpu_device().validation_messages().size(), gpu_device().validation_known_limits());
    for (const std::string& m : gpu_device().validation_messages())
      std::printf("[meganeura]   %s\n", m.substr(0, 600).c_str());
  }
};
inline ::testing::Environment* const known_layer_limits_report =
    ::testing::AddGlobalTestEnvironment(new KnownLayerLimitsReport);

}  // namespace meganeura::test
