#pragma once
// A driver statistic's value as JSON, for the tools and reports that print them (profile rows,
// pipeline_stats, bench_matmul): one place that reads PipelineStatistic::format.
#include <nlohmann/json.hpp>

#include "meganeura/runtime/device.hpp"

namespace meganeura::runtime {

// bool, integer or number by the statistic's format; null for a format this build does not know.
inline nlohmann::json statistic_value(const PipelineStatistic& s) {
  if (s.format == "bool32") return s.b32;
  if (s.format == "int64") return s.i64;
  if (s.format == "uint64") return s.u64;
  if (s.format == "float64") return s.f64;
  return nullptr;
}

}  // namespace meganeura::runtime
