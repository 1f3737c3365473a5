// The per-family times and the slowest dispatches of a Session::profile, as fields of a bench's JSON line.
#pragma once

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>

namespace meganeura::bench {

// Adds "families" ([family, dispatches, ms] largest first), "slowest" (the twelve slowest dispatches as
// [variant, label, grid, ms]: which kernel of a family is the cost) and "profile_sum_ms" to `line`.
inline void add_profile_summary(nlohmann::json& line, const nlohmann::json& profile) {
  nlohmann::json fam = nlohmann::json::array();
  for (const auto& f : profile["families"])
    fam.push_back({f["family"], f["dispatches"], f["median_ns_total"].get<double>() * 1e-6});
  line["families"] = fam;
  std::vector<nlohmann::json> ds(profile["dispatches"].begin(), profile["dispatches"].end());
  std::sort(ds.begin(), ds.end(), [](const nlohmann::json& x, const nlohmann::json& y) {
    return x["median_ns"].get<double>() > y["median_ns"].get<double>();
  });
  nlohmann::json top = nlohmann::json::array();
  for (size_t i = 0; i < std::min<size_t>(12, ds.size()); ++i) {
    nlohmann::json row = {ds[i]["variant"], ds[i]["label"], ds[i]["grid"],
                          ds[i]["median_ns"].get<double>() * 1e-6};
    if (ds[i].contains("pipeline_stats")) row.push_back(ds[i]["pipeline_stats"]);
    top.push_back(row);
  }
  line["slowest"] = top;
  line["profile_sum_ms"] = profile["overhead"]["sum_of_dispatch_medians_ns"].get<double>() * 1e-6;
}

}  // namespace meganeura::bench
