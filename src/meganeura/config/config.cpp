// SessionConfig::from_env(): the one place in the library that reads environment variables. Everything
// below it receives its settings explicitly, so a test can build any configuration without touching the
// process environment.
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include "meganeura/config/config.hpp"
#include "meganeura/core/error.hpp"

namespace meganeura {
namespace {

// An unset variable and an empty one mean the same: "use the default".
std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

[[noreturn]] void reject(const char* var, const std::string& value, const char* accepted) {
  throw ConfigError(std::string("[SessionConfig::from_env] expected ") + var + " to be " + accepted +
                    ", got '" + value + "'");
}

bool parse_bool(const char* var, const std::string& value) {
  const std::string v = lower(value);
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  reject(var, value, "one of 1, 0, true, false, yes, no, on, off");
}

uint32_t parse_device_id(const char* var, const std::string& value) {
  const char* accepted = "a device ID in hex (0x2335) or decimal (9013) that fits 32 bits";
  std::string_view digits = value;
  int base = 10;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    base = 16;
    digits.remove_prefix(2);
  }
  if (digits.empty()) reject(var, value, accepted);
  uint64_t result = 0;
  for (char c : digits) {
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (base == 16 && c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (base == 16 && c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      reject(var, value, accepted);
    result = result * base + d;
    if (result > UINT32_MAX) reject(var, value, accepted);
  }
  return static_cast<uint32_t>(result);
}

RewriteMode parse_rewrite(const char* var, const std::string& value) {
  const std::string v = lower(value);
  if (v == "greedy") return RewriteMode::Greedy;
  if (v == "saturate") return RewriteMode::Saturate;
  if (v == "off") return RewriteMode::Off;
  reject(var, value, "one of greedy, saturate, off");
}

std::optional<MatmulTier> parse_matmul(const char* var, const std::string& value) {
  const std::string v = lower(value);
  if (v == "auto") return std::nullopt;
  for (MatmulTier t : {MatmulTier::Scalar, MatmulTier::CoopMatNV, MatmulTier::CoopMatKHR})
    if (v == tier_name(t)) return t;
  reject(var, value, "one of auto, scalar, coopmat-nv, coopmat-khr");
}

int parse_frames(const char* var, const std::string& value) {
  const char* accepted = "a whole number of steps from 1 to 16";
  if (value.empty() || value.size() > 2) reject(var, value, accepted);
  int n = 0;
  for (char c : value) {
    if (c < '0' || c > '9') reject(var, value, accepted);
    n = n * 10 + (c - '0');
  }
  if (n < 1 || n > 16) reject(var, value, accepted);
  return n;
}

// The words parse_bool knows mean off ("") and stderr ("-"); anything else is a path.
std::string parse_dump_plan(const std::string& value) {
  const std::string v = lower(value);
  if (v == "0" || v == "false" || v == "no" || v == "off") return "";
  if (v == "1" || v == "true" || v == "yes" || v == "on" || v == "-") return "-";
  return value;
}

std::string default_cache_dir() {
  if (auto xdg = env("XDG_CACHE_HOME")) return *xdg + "/meganeura";
  if (auto home = env("HOME")) return *home + "/.cache/meganeura";
  return "";  // nowhere sensible to write: the on-disk shader cache stays off
}

// huggingface_hub's defaults, so that both share one cache.
hf::HubConfig hub_from_env() {
  hf::HubConfig h;
  if (auto v = env("HF_HOME"))
    h.home = *v;
  else if (auto xdg = env("XDG_CACHE_HOME"))
    h.home = *xdg + "/huggingface";
  else if (auto home = env("HOME"))
    h.home = *home + "/.cache/huggingface";
  if (auto v = env("HF_HUB_CACHE")) h.hub_cache = *v;
  if (auto v = env("HF_ENDPOINT")) {
    h.endpoint = *v;
    while (!h.endpoint.empty() && h.endpoint.back() == '/') h.endpoint.pop_back();
    if (h.endpoint.rfind("http://", 0) != 0 && h.endpoint.rfind("https://", 0) != 0)
      reject("HF_ENDPOINT", *v, "an http:// or https:// URL");
  }
  if (auto v = env("HF_TOKEN"))
    h.token = *v;
  else if (!h.home.empty()) {
    std::ifstream f(h.home + "/token");
    std::getline(f, h.token);
    while (!h.token.empty() && (h.token.back() == '\r' || h.token.back() == ' ')) h.token.pop_back();
  }
  if (auto v = env("HF_HUB_OFFLINE")) h.offline = parse_bool("HF_HUB_OFFLINE", *v);
  return h;
}

uint64_t parse_seed(const char* var, const std::string& value) {
  const char* accepted = "a whole number that fits 64 bits";
  if (value.empty() || value.size() > 20) reject(var, value, accepted);
  uint64_t n = 0;
  for (char c : value) {
    if (c < '0' || c > '9') reject(var, value, accepted);
    const uint64_t d = uint64_t(c - '0');
    if (n > (UINT64_MAX - d) / 10) reject(var, value, accepted);
    n = n * 10 + d;
  }
  return n;
}

}  // namespace

Precision parse_precision(const std::string& value, const std::string& what) {
  const std::string v = lower(value);
  if (v == "f32") return Precision::F32;
  if (v == "mixed16") return Precision::Mixed16;
  if (v == "f16") return Precision::F16;
  if (v == "bf16") return Precision::BF16;
  throw ConfigError(
      "[parse_precision] expected " + what +
      " to be one of f32, mixed16, f16, bf16 (f32 storage; mixed16: f16 matmul inputs on cooperative-matrix "
      "tiers, f32 accumulation; f16/bf16: 16-bit weights for inference), got '" +
      value + "'");
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::Mixed16: return "mixed16";
    case Precision::F16: return "f16";
    case Precision::BF16: return "bf16";
    case Precision::F32: break;
  }
  return "f32";
}

SessionConfig SessionConfig::from_env() {
  SessionConfig c;
  if (auto v = env("MEGANEURA_DEVICE_ID")) c.device_id = parse_device_id("MEGANEURA_DEVICE_ID", *v);
  if (auto v = env("MEGANEURA_VALIDATION")) c.validation = parse_bool("MEGANEURA_VALIDATION", *v);
  if (auto v = env("MEGANEURA_REWRITE")) c.rewrite = parse_rewrite("MEGANEURA_REWRITE", *v);
  if (auto v = env("MEGANEURA_DUMP_PLAN")) c.dump_plan = parse_dump_plan(*v);
  if (auto v = env("MEGANEURA_CACHE_DIR"))
    c.cache_dir = lower(*v) == "off" ? "" : *v;  // "off": no disk cache
  else
    c.cache_dir = default_cache_dir();
  if (auto v = env("MEGANEURA_MATMUL")) c.matmul_tier = parse_matmul("MEGANEURA_MATMUL", *v);
  if (auto v = env("MEGANEURA_GPU_TIMING")) c.gpu_timing = parse_bool("MEGANEURA_GPU_TIMING", *v);
  if (auto v = env("MEGANEURA_TRACE")) c.trace_path = *v;
  if (auto v = env("MEGANEURA_TUNE")) c.tune = parse_bool("MEGANEURA_TUNE", *v);
  if (auto v = env("MEGANEURA_PRECISION")) c.precision = parse_precision(*v, "MEGANEURA_PRECISION");
  if (auto v = env("MEGANEURA_SEED")) c.seed = parse_seed("MEGANEURA_SEED", *v);
  if (auto v = env("MEGANEURA_FRAMES_IN_FLIGHT"))
    c.frames_in_flight = parse_frames("MEGANEURA_FRAMES_IN_FLIGHT", *v);
  c.hub = hub_from_env();
  if (auto v = env("MEGANEURA_REDUCE_ORDER")) {
    const std::string o = lower(*v);
    if (o == "ranked")
      c.distributed.order = dist::ReduceOrder::Ranked;
    else if (o == "mpi")
      c.distributed.order = dist::ReduceOrder::Mpi;
    else
      reject("MEGANEURA_REDUCE_ORDER", *v, "one of ranked, mpi");
  }
  if (auto v = env("MEGANEURA_BUCKET_BYTES")) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long b = std::strtoull(v->c_str(), &end, 10);
    if (errno || end == v->c_str() || *end != '\0' || b < 4 || b > (1ull << 31))
      reject("MEGANEURA_BUCKET_BYTES", *v, "a byte count from 4 to 2^31");
    c.distributed.bucket_bytes = b;
  }
  double timeout = 300;
  if (auto v = env("MEGANEURA_DIST_TIMEOUT")) {
    char* end = nullptr;
    timeout = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end != '\0' || !(timeout > 0) || timeout > 1e6)
      reject("MEGANEURA_DIST_TIMEOUT", *v, "a number of seconds above 0");
  }
  if (auto v = env("MEGANEURA_DISTRIBUTED"); v && parse_bool("MEGANEURA_DISTRIBUTED", *v)) {
    c.distributed.comm = dist::Communicator::world();
    c.distributed.comm->set_timeout(timeout);
  }
  return c;
}

SessionConfig SessionConfig::debug() {
  SessionConfig c = from_env();
  c.alias_memory = false;
  c.host_visible = true;
  c.keep_intermediates = true;
  return c;
}

const char* tier_name(MatmulTier t) {
  switch (t) {
    case MatmulTier::Gemv: return "gemv";
    case MatmulTier::Scalar: return "scalar";
    case MatmulTier::CoopMatNV: return "coopmat-nv";
    case MatmulTier::CoopMatKHR: return "coopmat-khr";
  }
  return "?";
}

MatmulTier parse_tier(const std::string& name) {
  for (MatmulTier t : {MatmulTier::Gemv, MatmulTier::Scalar, MatmulTier::CoopMatNV, MatmulTier::CoopMatKHR})
    if (name == tier_name(t)) return t;
  throw ConfigError("[parse_tier] expected one of gemv, scalar, coopmat-nv, coopmat-khr, got '" + name + "'");
}

}  // namespace meganeura
