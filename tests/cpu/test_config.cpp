// SessionConfig::from_env(): parsing, defaults, errors; and the rule that nothing else reads the environment.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "meganeura/session/session.hpp"
#include "paths.hpp"

namespace {

using meganeura::ConfigError;
using meganeura::RewriteMode;
using meganeura::SessionConfig;

const char* kVars[] = {"MEGANEURA_DEVICE_ID",
                       "MEGANEURA_VALIDATION",
                       "MEGANEURA_REWRITE",
                       "MEGANEURA_DUMP_PLAN",
                       "MEGANEURA_CACHE_DIR",
                       "MEGANEURA_MATMUL",
                       "MEGANEURA_GPU_TIMING",
                       "MEGANEURA_TRACE",
                       "MEGANEURA_TUNE",
                       "MEGANEURA_FRAMES_IN_FLIGHT",
                       "MEGANEURA_PRECISION",
                       "MEGANEURA_SEED",
                       "HF_HOME",
                       "HF_HUB_CACHE",
                       "HF_ENDPOINT",
                       "HF_TOKEN",
                       "HF_HUB_OFFLINE",
                       "MEGANEURA_DISTRIBUTED",
                       "MEGANEURA_REDUCE_ORDER",
                       "MEGANEURA_BUCKET_BYTES",
                       "MEGANEURA_DIST_TIMEOUT"};

// Each test starts from a clean environment and restores what the process had.
class ConfigEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) {
      const char* old = std::getenv(v);
      saved_.emplace_back(v, old ? std::optional<std::string>(old) : std::nullopt);
      unsetenv(v);
    }
    for (const char* v : {"XDG_CACHE_HOME", "HOME"}) {
      const char* old = std::getenv(v);
      saved_.emplace_back(v, old ? std::optional<std::string>(old) : std::nullopt);
    }
  }
  void TearDown() override {
    for (auto& [name, value] : saved_) {
      if (value)
        setenv(name.c_str(), value->c_str(), 1);
      else
        unsetenv(name.c_str());
    }
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

std::string error_of(const char* var, const char* value) {
  setenv(var, value, 1);
  try {
    SessionConfig::from_env();
  } catch (const ConfigError& e) {
    unsetenv(var);
    return e.what();
  }
  unsetenv(var);
  return "";
}

TEST_F(ConfigEnv, DefaultsWhenNothingIsSet) {
  setenv("XDG_CACHE_HOME", "/tmp/xdg-test", 1);
  SessionConfig c = SessionConfig::from_env();
  EXPECT_FALSE(c.device_id.has_value());
  EXPECT_FALSE(c.validation);
  EXPECT_EQ(c.rewrite, RewriteMode::Greedy);
  EXPECT_EQ(c.dump_plan, "");
  EXPECT_FALSE(c.matmul_tier);
  EXPECT_FALSE(c.gpu_timing);
  EXPECT_EQ(c.trace_path, "");
  EXPECT_EQ(c.cache_dir, "/tmp/xdg-test/meganeura");
  EXPECT_TRUE(c.alias_memory);
  EXPECT_FALSE(c.host_visible);
}

TEST_F(ConfigEnv, CacheDirFallsBackToHome) {
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(SessionConfig::from_env().cache_dir, "/home/someone/.cache/meganeura");
  setenv("MEGANEURA_CACHE_DIR", "/var/tmp/mn", 1);
  EXPECT_EQ(SessionConfig::from_env().cache_dir, "/var/tmp/mn");
  setenv("MEGANEURA_CACHE_DIR", "off", 1);
  EXPECT_EQ(SessionConfig::from_env().cache_dir, "");
}

TEST_F(ConfigEnv, HubDefaultsMatchHuggingfaceHub) {
  setenv("XDG_CACHE_HOME", "/tmp/xdg-test", 1);
  SessionConfig c = SessionConfig::from_env();
  EXPECT_EQ(c.hub.home, "/tmp/xdg-test/huggingface");
  EXPECT_EQ(c.hub.cache_dir(), "/tmp/xdg-test/huggingface/hub");
  EXPECT_EQ(c.hub.endpoint, "https://huggingface.co");
  EXPECT_FALSE(c.hub.offline);
  EXPECT_EQ(c.hub.token, "");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/tmp/home-test", 1);
  EXPECT_EQ(SessionConfig::from_env().hub.cache_dir(), "/tmp/home-test/.cache/huggingface/hub");
}

TEST_F(ConfigEnv, HubVariables) {
  const std::string home = ::testing::TempDir() + "hf-config-home";
  std::filesystem::create_directories(home);
  std::ofstream(home + "/token") << "hf_fromfile\n";
  setenv("HF_HOME", home.c_str(), 1);
  setenv("HF_ENDPOINT", "http://127.0.0.1:8080/", 1);
  setenv("HF_HUB_OFFLINE", "1", 1);
  SessionConfig c = SessionConfig::from_env();
  EXPECT_EQ(c.hub.cache_dir(), home + "/hub");
  EXPECT_EQ(c.hub.endpoint, "http://127.0.0.1:8080");  // trailing '/' dropped: URLs are joined with '/'
  EXPECT_TRUE(c.hub.offline);
  EXPECT_EQ(c.hub.token, "hf_fromfile");  // huggingface_hub's login file when HF_TOKEN is unset
  setenv("HF_TOKEN", "hf_fromenv", 1);
  setenv("HF_HUB_CACHE", "/tmp/elsewhere", 1);
  c = SessionConfig::from_env();
  EXPECT_EQ(c.hub.token, "hf_fromenv");
  EXPECT_EQ(c.hub.cache_dir(), "/tmp/elsewhere");
  EXPECT_NE(error_of("HF_HUB_OFFLINE", "maybe").find("HF_HUB_OFFLINE"), std::string::npos);
  EXPECT_NE(error_of("HF_ENDPOINT", "ftp://x").find("expected HF_ENDPOINT to be an http:// or https:// URL"),
            std::string::npos);
}

TEST_F(ConfigEnv, DeviceIdHexAndDecimal) {
  setenv("MEGANEURA_DEVICE_ID", "0x2335", 1);
  EXPECT_EQ(SessionConfig::from_env().device_id, 0x2335u);
  setenv("MEGANEURA_DEVICE_ID", "0X2335", 1);
  EXPECT_EQ(SessionConfig::from_env().device_id, 0x2335u);
  setenv("MEGANEURA_DEVICE_ID", "9013", 1);
  EXPECT_EQ(SessionConfig::from_env().device_id, 9013u);
  setenv("MEGANEURA_DEVICE_ID", "0", 1);
  EXPECT_EQ(SessionConfig::from_env().device_id, 0u);
}

TEST_F(ConfigEnv, MalformedDeviceIdNamesVariableAndForms) {
  for (const char* bad : {"0x", "23x5", "0xZZ", "-1", "0x100000000", "99999999999", "nvidia"}) {
    const std::string msg = error_of("MEGANEURA_DEVICE_ID", bad);
    EXPECT_NE(msg.find("MEGANEURA_DEVICE_ID"), std::string::npos) << bad;
    EXPECT_NE(msg.find("0x2335"), std::string::npos) << msg;
    EXPECT_NE(msg.find(bad), std::string::npos) << msg;
  }
}

TEST_F(ConfigEnv, Booleans) {
  for (const char* yes : {"1", "true", "TRUE", "yes", "on"}) {
    setenv("MEGANEURA_VALIDATION", yes, 1);
    setenv("MEGANEURA_GPU_TIMING", yes, 1);
    setenv("MEGANEURA_TUNE", yes, 1);
    SessionConfig c = SessionConfig::from_env();
    EXPECT_TRUE(c.validation) << yes;
    EXPECT_TRUE(c.gpu_timing) << yes;
    EXPECT_TRUE(c.tune) << yes;
  }
  for (const char* no : {"0", "false", "no", "off"}) {
    setenv("MEGANEURA_VALIDATION", no, 1);
    EXPECT_FALSE(SessionConfig::from_env().validation) << no;
  }
  unsetenv("MEGANEURA_VALIDATION");
  unsetenv("MEGANEURA_GPU_TIMING");
  unsetenv("MEGANEURA_TUNE");
  EXPECT_FALSE(SessionConfig::from_env().tune);
  const std::string msg = error_of("MEGANEURA_VALIDATION", "2");
  EXPECT_NE(msg.find("MEGANEURA_VALIDATION"), std::string::npos);
  EXPECT_NE(msg.find("true"), std::string::npos);
  EXPECT_NE(error_of("MEGANEURA_GPU_TIMING", "sometimes").find("MEGANEURA_GPU_TIMING"), std::string::npos);
  EXPECT_NE(error_of("MEGANEURA_TUNE", "fast").find("MEGANEURA_TUNE"), std::string::npos);
}

TEST_F(ConfigEnv, RewriteModes) {
  setenv("MEGANEURA_REWRITE", "saturate", 1);
  EXPECT_EQ(SessionConfig::from_env().rewrite, RewriteMode::Saturate);
  setenv("MEGANEURA_REWRITE", "off", 1);
  EXPECT_EQ(SessionConfig::from_env().rewrite, RewriteMode::Off);
  setenv("MEGANEURA_REWRITE", "Greedy", 1);
  EXPECT_EQ(SessionConfig::from_env().rewrite, RewriteMode::Greedy);
  unsetenv("MEGANEURA_REWRITE");
  const std::string msg = error_of("MEGANEURA_REWRITE", "egraph");
  EXPECT_NE(msg.find("MEGANEURA_REWRITE"), std::string::npos);
  EXPECT_NE(msg.find("greedy, saturate, off"), std::string::npos);
}

TEST_F(ConfigEnv, MatmulTierAndPaths) {
  setenv("MEGANEURA_MATMUL", "coopmat-nv", 1);
  setenv("MEGANEURA_DUMP_PLAN", "-", 1);
  setenv("MEGANEURA_TRACE", "/tmp/trace.json", 1);
  SessionConfig c = SessionConfig::from_env();
  EXPECT_EQ(c.matmul_tier, meganeura::MatmulTier::CoopMatNV);
  EXPECT_EQ(c.dump_plan, "-");
  EXPECT_EQ(c.trace_path, "/tmp/trace.json");
  setenv("MEGANEURA_MATMUL", "auto", 1);
  EXPECT_FALSE(SessionConfig::from_env().matmul_tier);
  unsetenv("MEGANEURA_MATMUL");
  const std::string msg = error_of("MEGANEURA_MATMUL", "tensorcore");
  EXPECT_NE(msg.find("MEGANEURA_MATMUL"), std::string::npos);
  EXPECT_NE(msg.find("coopmat-khr"), std::string::npos);
}

TEST_F(ConfigEnv, FramesInFlight) {
  EXPECT_EQ(SessionConfig::from_env().frames_in_flight, 3);
  setenv("MEGANEURA_FRAMES_IN_FLIGHT", "1", 1);
  EXPECT_EQ(SessionConfig::from_env().frames_in_flight, 1);
  setenv("MEGANEURA_FRAMES_IN_FLIGHT", "16", 1);
  EXPECT_EQ(SessionConfig::from_env().frames_in_flight, 16);
  unsetenv("MEGANEURA_FRAMES_IN_FLIGHT");
  for (const char* bad : {"0", "17", "-1", "3x", "003"})
    EXPECT_NE(error_of("MEGANEURA_FRAMES_IN_FLIGHT", bad).find("1 to 16"), std::string::npos) << bad;
}

TEST_F(ConfigEnv, DebugKeepsEnvironmentAndTurnsOnDebugging) {
  setenv("MEGANEURA_DEVICE_ID", "0x10", 1);
  SessionConfig c = SessionConfig::debug();
  EXPECT_FALSE(c.alias_memory);
  EXPECT_TRUE(c.host_visible);
  EXPECT_TRUE(c.keep_intermediates);
  EXPECT_EQ(c.device_id, 0x10u);
}

// Environment variables are read in exactly one place, so every other stage can be driven explicitly.
TEST(ConfigRule, OnlyConfigCppCallsGetenv) {
  namespace fs = std::filesystem;
  const fs::path src = meganeura::test::source_path("src");
  ASSERT_TRUE(fs::is_directory(src)) << src;
  const std::regex call(R"((^|[^A-Za-z0-9_])(secure_)?getenv\s*\()");
  size_t scanned = 0;
  bool config_seen = false;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file()) continue;
    const fs::path rel = fs::relative(entry.path(), src);
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    ++scanned;
    const bool calls = std::regex_search(text.str(), call);
    if (rel == fs::path("meganeura/config/config.cpp")) {
      config_seen = true;
      EXPECT_TRUE(calls) << "config.cpp is where the environment is read";
    } else {
      EXPECT_FALSE(calls) << rel << " calls getenv; read the environment only in SessionConfig::from_env()";
    }
  }
  EXPECT_TRUE(config_seen);
  EXPECT_GT(scanned, 5u);
}

}  // namespace

namespace {

TEST_F(ConfigEnv, PrecisionAndSeed) {
  SessionConfig c = SessionConfig::from_env();
  EXPECT_EQ(c.precision, meganeura::Precision::F32);
  EXPECT_EQ(c.seed, 0u);
  EXPECT_EQ(c.init, meganeura::ParameterInit::Seeded);
  setenv("MEGANEURA_PRECISION", "Mixed16", 1);
  setenv("MEGANEURA_SEED", "18446744073709551615", 1);
  c = SessionConfig::from_env();
  EXPECT_EQ(c.precision, meganeura::Precision::Mixed16);
  EXPECT_EQ(c.seed, UINT64_MAX);
  unsetenv("MEGANEURA_SEED");
  const std::string bad = error_of("MEGANEURA_PRECISION", "fp8");
  EXPECT_NE(bad.find("expected MEGANEURA_PRECISION to be one of f32, mixed16"), std::string::npos) << bad;
  EXPECT_NE(bad.find("'fp8'"), std::string::npos) << bad;
  EXPECT_NE(error_of("MEGANEURA_SEED", "18446744073709551616").find("MEGANEURA_SEED"), std::string::npos);
  EXPECT_NE(error_of("MEGANEURA_SEED", "-1").find("a whole number"), std::string::npos);
  EXPECT_EQ(meganeura::parse_precision("F32"), meganeura::Precision::F32);
  EXPECT_STREQ(meganeura::precision_name(meganeura::Precision::Mixed16), "mixed16");
  setenv("MEGANEURA_PRECISION", "bf16", 1);
  EXPECT_EQ(SessionConfig::from_env().precision, meganeura::Precision::BF16);
  EXPECT_EQ(meganeura::parse_precision("F16"), meganeura::Precision::F16);
  EXPECT_STREQ(meganeura::precision_name(meganeura::Precision::BF16), "bf16");
  EXPECT_NE(bad.find("one of f32, mixed16, f16, bf16"), std::string::npos) << bad;
}

TEST_F(ConfigEnv, DumpPlanReadsOffWordsAsOffAndOnWordsAsStderr) {
  for (const char* off : {"0", "off", "OFF", "false", "no"}) {
    setenv("MEGANEURA_DUMP_PLAN", off, 1);
    EXPECT_EQ(SessionConfig::from_env().dump_plan, "") << off;
  }
  for (const char* on : {"1", "on", "true", "yes", "-"}) {
    setenv("MEGANEURA_DUMP_PLAN", on, 1);
    EXPECT_EQ(SessionConfig::from_env().dump_plan, "-") << on;
  }
  setenv("MEGANEURA_DUMP_PLAN", "/tmp/plan.txt", 1);
  EXPECT_EQ(SessionConfig::from_env().dump_plan, "/tmp/plan.txt");
}

// SessionConfig{} is the defaults, whatever the environment says (README: only from_env() reads it).
TEST_F(ConfigEnv, AValueInitialisedConfigIgnoresTheEnvironment) {
  setenv("MEGANEURA_REWRITE", "off", 1);
  setenv("MEGANEURA_VALIDATION", "1", 1);
  setenv("MEGANEURA_CACHE_DIR", "/var/tmp/mn", 1);
  const SessionConfig c{};
  EXPECT_EQ(c.rewrite, RewriteMode::Greedy);
  EXPECT_FALSE(c.validation);
  EXPECT_EQ(c.cache_dir, "");
  EXPECT_EQ(SessionConfig::from_env().rewrite, RewriteMode::Off);
}

}  // namespace

// Distributed settings parse without joining an MPI job (MEGANEURA_DISTRIBUTED stays unset: no communicator).
TEST_F(ConfigEnv, DistributedSettings) {
  SessionConfig d = SessionConfig::from_env();
  EXPECT_FALSE(d.distributed.enabled());
  EXPECT_EQ(d.distributed.order, meganeura::dist::ReduceOrder::Ranked);
  EXPECT_EQ(d.distributed.bucket_bytes, 25ull << 20);
  setenv("MEGANEURA_REDUCE_ORDER", "MPI", 1);
  setenv("MEGANEURA_BUCKET_BYTES", "4096", 1);
  setenv("MEGANEURA_DISTRIBUTED", "0", 1);
  SessionConfig c = SessionConfig::from_env();
  EXPECT_EQ(c.distributed.order, meganeura::dist::ReduceOrder::Mpi);
  EXPECT_EQ(c.distributed.bucket_bytes, 4096u);
  EXPECT_FALSE(c.distributed.comm);
  unsetenv("MEGANEURA_REDUCE_ORDER");
  unsetenv("MEGANEURA_BUCKET_BYTES");
  unsetenv("MEGANEURA_DISTRIBUTED");
  EXPECT_NE(error_of("MEGANEURA_REDUCE_ORDER", "ring").find("one of ranked, mpi"), std::string::npos);
  EXPECT_NE(error_of("MEGANEURA_BUCKET_BYTES", "2").find("MEGANEURA_BUCKET_BYTES"), std::string::npos);
  EXPECT_NE(error_of("MEGANEURA_BUCKET_BYTES", "12k").find("a byte count"), std::string::npos);
  EXPECT_NE(error_of("MEGANEURA_DIST_TIMEOUT", "-1").find("seconds above 0"), std::string::npos);
  EXPECT_NE(error_of("MEGANEURA_DISTRIBUTED", "maybe").find("MEGANEURA_DISTRIBUTED"), std::string::npos);
}

namespace {

// f16 / bf16 are an inference storage policy: a training session refuses them before a device is opened.
TEST(Precision, TrainingSessionRefusesSixteenBitStorage) {
  meganeura::Graph g;
  const auto w = g.parameter("w", {4, 3});
  g.set_outputs({g.sum(g.matmul(g.input("x", {2, 4}), w))});
  for (auto p : {meganeura::Precision::F16, meganeura::Precision::BF16}) {
    meganeura::SessionConfig c;
    c.precision = p;
    try {
      (void)meganeura::build(g, c);
      ADD_FAILURE() << "expected a ConfigError for " << meganeura::precision_name(p);
    } catch (const meganeura::ConfigError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("expected precision f32 or mixed16 for a training session"), std::string::npos) << m;
      EXPECT_NE(m.find(std::string("got ") + meganeura::precision_name(p)), std::string::npos) << m;
    }
  }
}

}  // namespace
