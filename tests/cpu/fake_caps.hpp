#pragma once
// A device description for the device-free compiler tests (schedule, codegen, plan dumps): small limits, so
// that tile and workgroup choices are exercised without a GPU.
#include "meganeura/runtime/device.hpp"

namespace meganeura::test {

inline runtime::DeviceCaps fake_caps() {
  runtime::DeviceCaps c;
  c.name = "test";
  c.subgroup_size = 8;
  c.max_shared_memory = 32768;
  c.min_storage_buffer_offset_alignment = 64;
  c.max_workgroup_count[0] = c.max_workgroup_count[1] = c.max_workgroup_count[2] = 65535;
  c.compute_units = 8;  // small: the README MLP's matmuls fill it without split-K (one dispatch per kernel)
  return c;
}

}  // namespace meganeura::test
