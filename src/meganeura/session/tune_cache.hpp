#pragma once
// The on-disk cache of tuning winners (Session::tune_with): one JSON file per device under
// <cache_dir>/tune/, named by vendor id, device id and driver version, mapping each kernel's tuning key
// (GeneratedKernel::base_hash: the default variant's shader and shapes) to the variant that won. A file that
// cannot be read as such is ignored with a warning on stderr, never an error: the cache only saves time.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "meganeura/codegen/variant.hpp"
#include "meganeura/runtime/device.hpp"

namespace meganeura {

struct TuneCacheEntry {
  KernelVariant variant;
  std::string label, archetype;  // for people reading the file
  double old_us = 0, new_us = 0;
};
using TuneCache = std::map<uint64_t, TuneCacheEntry>;

// "<dir>/tune/<vendor>-<device>-<driver>.json" (hex), or "" when dir is "" (the cache is off).
std::string tune_cache_path(const std::string& dir, const runtime::DeviceCaps& caps);
// The entries of the file at `path`; empty when it does not exist. A corrupt file, or one made for another
// device, gives no entries and sets `warning` (also printed to stderr).
TuneCache tune_cache_load(const std::string& path, const runtime::DeviceCaps& caps,
                          std::string* warning = nullptr);
// What a tuning file's text holds (tune_cache_load reads the file and calls tune_cache_parse): the entries,
// or none with `problem` set. `foreign` tells an intact file made for another device or driver (kept on
// disk) from a damaged one (header, checksum, JSON or schema: deleted by the loader).
struct TuneCacheParse {
  TuneCache entries;
  std::string problem;
  bool foreign = false;
};
TuneCacheParse tune_cache_parse(std::string_view text, const runtime::DeviceCaps& caps);
// Merges `entries` into the file (entries win), written to a private name and renamed. Returns false (with
// a warning on stderr) when it cannot be written.
bool tune_cache_store(const std::string& path, const runtime::DeviceCaps& caps, const TuneCache& entries);

}  // namespace meganeura
