#pragma once
// Runs one matmul kernel on a device against matmul_reference: used by the start-up self-test, the GPU tests
// and the benchmark's --check.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "meganeura/kernels/matmul.hpp"

namespace meganeura::kernels {

struct MatmulCheck {
  bool ok = false;
  double max_err = 0;     // worst |gpu - cpu| / (sum_k |a b| + 1e-3) over all outputs
  std::string detail;     // the first bad element, or the exception's message
  MatmulVariant variant;  // what ran (split_k normalised)
};

struct MatmulCheckOptions {
  uint32_t seed = 1;
  MatmulEpilogue epilogue;
  std::vector<std::vector<float>> extra;  // the epilogue's buffers
  // The epilogue on the host: (v, row, col, batch) -> stored value.
  std::function<float(float, uint32_t, uint32_t, uint32_t)> host_epilogue;
  double tolerance = 1e-4;  // relative to sum_k |a b| for each output
  CoopMatTile tile;         // the cooperative tiers' block tile
  // The operands' stored values instead of random ones (elements_a / elements_b of them; f32, rounded to f16
  // for f16 inputs as uploaded).
  std::vector<float> a_values, b_values;
  // Kernels selected for these capabilities instead of the device's (a smaller device's kernels run here).
  const runtime::DeviceCaps* caps = nullptr;
};

// Builds, runs and compares; never throws for a kernel that compiles badly or computes wrongly (that is a
// failed check), only for misuse.
// The tier's variant is choose_variant's.
MatmulCheck check_matmul(runtime::Device& device, const shader::CompileOptions& options,
                         const MatmulShape& shape, MatmulTier tier, const MatmulCheckOptions& check = {});
MatmulCheck check_matmul(runtime::Device& device, const shader::CompileOptions& options,
                         const MatmulShape& shape, const MatmulVariant& variant,
                         const MatmulCheckOptions& check = {});

}  // namespace meganeura::kernels
