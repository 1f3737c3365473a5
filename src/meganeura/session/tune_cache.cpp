// The tuning cache file (tune_cache.hpp): a first line "meganeura.tune.v2 <16 hex digits>", the 64-bit FNV-1a
// checksum of the rest, then JSON of schema "meganeura.tune.v1":
//   {"schema", "device": {"name", "vendor_id", "device_id", "driver_version"},
//    "kernels": {"<16 hex digits>": {"variant", "label", "archetype", "old_us", "new_us"}}}
#include "meganeura/session/tune_cache.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "meganeura/core/error.hpp"
#include "meganeura/shader/cache.hpp"

namespace meganeura {

namespace {

constexpr const char* kSchema = "meganeura.tune.v1";
constexpr const char* kHeader = "meganeura.tune.v2 ";  // then the checksum and a newline

std::string hex(uint64_t v, int digits) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%0*llx", digits, static_cast<unsigned long long>(v));
  return buf;
}

void warn(const std::string& message, std::string* warning) {
  std::fprintf(stderr, "meganeura: warning: %s\n", message.c_str());
  if (warning) *warning = message;
}

// Throws std::exception (json or ConfigError) on anything unexpected.
TuneCache parse(const nlohmann::json& doc, const runtime::DeviceCaps& caps) {
  if (!doc.is_object() || doc.value("schema", "") != kSchema)
    throw std::runtime_error(std::string("expected schema '") + kSchema + "'");
  const nlohmann::json& d = doc.at("device");
  // json's get<uint32_t> converts a float or an out-of-range integer with undefined behaviour (found by
  // fuzz_tune_cache: a driver_version of 1.3e50): only an unsigned integer that fits is a device id.
  auto u32 = [&](const char* key) {
    const nlohmann::json& v = d.at(key);
    if (!v.is_number_unsigned() || v.get<uint64_t>() > 0xFFFFFFFFull)
      throw std::runtime_error(std::string("device.") + key + " is not a 32-bit unsigned integer");
    return uint32_t(v.get<uint64_t>());
  };
  if (u32("vendor_id") != caps.vendor_id || u32("device_id") != caps.device_id ||
      u32("driver_version") != caps.driver_version)
    throw std::runtime_error("made for another device or driver");
  TuneCache out;
  for (const auto& [key, e] : doc.at("kernels").items()) {
    if (key.size() != 16 || key.find_first_not_of("0123456789abcdef") != std::string::npos)
      throw std::runtime_error("kernel key '" + key + "' is not 16 hex digits");
    TuneCacheEntry t;
    t.variant = KernelVariant::parse(e.at("variant").get<std::string>());
    t.label = e.value("label", "");
    t.archetype = e.value("archetype", "");
    t.old_us = e.value("old_us", 0.0);
    t.new_us = e.value("new_us", 0.0);
    out[std::stoull(key, nullptr, 16)] = t;
  }
  return out;
}

}  // namespace

std::string tune_cache_path(const std::string& dir, const runtime::DeviceCaps& caps) {
  if (dir.empty()) return "";
  const std::string name =
      hex(caps.vendor_id, 4) + "-" + hex(caps.device_id, 4) + "-" + hex(caps.driver_version, 8) + ".json";
  return (std::filesystem::path(dir) / "tune" / name).string();
}

TuneCacheParse tune_cache_parse(std::string_view text, const runtime::DeviceCaps& caps) {
  TuneCacheParse r;
  const size_t eol = text.find('\n');
  const std::string_view header = text.substr(0, eol);
  const size_t h = std::string_view(kHeader).size();
  if (eol == std::string_view::npos || header.size() != h + 16 || header.compare(0, h, kHeader) != 0 ||
      header.find_first_not_of("0123456789abcdef", h) != std::string_view::npos) {
    r.problem = "expected a first line '" + std::string(kHeader) + "<16 hex digits>'";
    return r;
  }
  if (std::stoull(std::string(header.substr(h)), nullptr, 16) !=
      shader::detail::fnv1a64(text.data() + eol + 1, text.size() - eol - 1)) {
    r.problem = "checksum mismatch";
    return r;
  }
  try {
    r.entries = parse(nlohmann::json::parse(text.substr(eol + 1)), caps);
  } catch (const std::exception& e) {
    r.problem = e.what();
    r.foreign = r.problem.find("another device") != std::string::npos;
  }
  return r;
}

namespace {

// The entries, or none with `why` set. A damaged file (header, checksum, JSON, schema) is deleted: the
// next tune_with writes a fresh one, and the warning is not repeated at every build.
TuneCache load(const std::string& path, const runtime::DeviceCaps& caps, std::string& why) {
  if (path.empty()) return {};
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::stringstream buf;
  buf << in.rdbuf();
  TuneCacheParse p = tune_cache_parse(buf.str(), caps);
  if (p.problem.empty()) return std::move(p.entries);
  if (p.foreign) {
    why = "ignoring the tuning cache '" + path + "' (" + p.problem +
          "); kernels keep their default variants, and "
          "the next Session::tune_with rewrites the file";
    return {};
  }
  std::error_code ec;
  std::filesystem::remove(path, ec);
  why = "the tuning cache '" + path + "' is damaged (" + p.problem + "); " +
        (ec ? "could not delete it (" + ec.message() + ")" : std::string("deleted it")) +
        ": kernels keep their default variants until Session::tune_with runs again";
  return {};
}

}  // namespace

TuneCache tune_cache_load(const std::string& path, const runtime::DeviceCaps& caps, std::string* warning) {
  std::string why;
  TuneCache out = load(path, caps, why);
  if (!why.empty()) warn(why, warning);
  return out;
}

bool tune_cache_store(const std::string& path, const runtime::DeviceCaps& caps, const TuneCache& entries) {
  if (path.empty()) return false;
  std::string ignored;  // a corrupt file is replaced (its reader already warned)
  TuneCache all = load(path, caps, ignored);
  for (const auto& [k, v] : entries) all[k] = v;
  nlohmann::json kernels = nlohmann::json::object();
  for (const auto& [k, v] : all)
    kernels[hex(k, 16)] = {{"variant", v.variant.to_string()},
                           {"label", v.label},
                           {"archetype", v.archetype},
                           {"old_us", v.old_us},
                           {"new_us", v.new_us}};
  const nlohmann::json doc = {{"schema", kSchema},
                              {"device",
                               {{"name", caps.name},
                                {"vendor_id", caps.vendor_id},
                                {"device_id", caps.device_id},
                                {"driver_version", caps.driver_version}}},
                              {"kernels", kernels}};
  std::error_code ec;
  const std::filesystem::path target(path);
  std::filesystem::create_directories(target.parent_path(), ec);
  std::random_device rd;
  const std::filesystem::path tmp = target.string() + ".tmp" + std::to_string(rd());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    const std::string body = doc.dump(1) + "\n";
    out << kHeader << hex(shader::detail::fnv1a64(body.data(), body.size()), 16) << "\n" << body;
    if (!out) {
      std::filesystem::remove(tmp, ec);
      warn("cannot write the tuning cache '" + path + "'", nullptr);
      return false;
    }
  }
  std::filesystem::rename(tmp, target, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    warn("cannot write the tuning cache '" + path + "': " + ec.message(), nullptr);
    return false;
  }
  return true;
}

}  // namespace meganeura
