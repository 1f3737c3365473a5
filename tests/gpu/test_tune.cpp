// Session::tune_with (session/tune.cpp): the report lists every dispatch; a tuned step computes what the
// untuned step computes (bit-equal where the variants only move work between threads: pointwise, copy,
// optimizer; within f32 rounding where they change a reduction's order: row-reduce workgroups, matmul tiers);
// parameters and optimizer state survive the search; winners round-trip through the disk cache into a later
// build (read back from its plan dump), including non-default variants of every tunable kernel; a corrupt
// cache file is a warning, not a crash; bad TuneOptions are ConfigErrors naming the field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "gpu_fixture.hpp"
#include "meganeura/codegen/variant.hpp"
#include "meganeura/session/pipeline.hpp"
#include "meganeura/session/tune_cache.hpp"
#include "meganeura/shader/cache.hpp"

using namespace meganeura;
using meganeura::test::random_vec;

namespace {

std::shared_ptr<runtime::Device> shared_device() {
  return std::shared_ptr<runtime::Device>(&test::gpu_device(), [](runtime::Device*) {});
}

std::string fresh_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("meganeura-test-tune-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// A small training step with every tunable archetype: matmuls (M = 6: GEMV by default; the weight gradients:
// scalar), pointwise (bias + tanh and its backward), copy (concat, slice and their gradients), row-reduce
// (cross-entropy), Adam updates; a second output is a pointwise kernel.
Graph model() {
  Graph g;
  auto x = g.input("x", {6, 20});
  auto labels = g.input("labels", {6, 10});
  auto w1 = g.parameter("w1", {20, 24});
  auto b1 = g.parameter("b1", {24});
  auto w2 = g.parameter("w2", {28, 10});
  auto h = g.named(g.tanh(g.add(g.matmul(x, w1), b1)), "h");
  auto h2 = g.concat({h, g.slice(h, 1, 0, 4)}, 1);
  // a second output: a pointwise kernel of its own
  g.set_outputs({g.cross_entropy_loss(g.matmul(h2, w2), labels), g.mul(g.exp(h), g.scalar(0.5))});
  return g;
}

SessionConfig config(const std::string& cache_dir) {
  SessionConfig c = test::gpu_config();
  c.cache_dir = cache_dir;
  c.dump_plan.clear();
  c.training = true;
  c.optimizer.kind = OptimizerKind::Adam;
  c.optimizer.learning_rate = 0.01;
  return c;
}

void feed(Session& s) {
  std::mt19937 rng(7);
  std::vector<float> lab(60, 0.0f);
  for (int r = 0; r < 6; ++r) lab[size_t(r * 10 + int(rng() % 10))] = 1.0f;
  s.set_input("x", random_vec(120, rng));
  s.set_input("labels", lab);
  s.set_parameter("w1", random_vec(480, rng, 0.3f));
  s.set_parameter("b1", random_vec(24, rng, 0.1f));
  s.set_parameter("w2", random_vec(280, rng, 0.3f));
}

struct State {
  std::vector<std::vector<float>> values;  // loss, parameters, optimizer moments
};

State state(Session& s) {
  State st;
  st.values.push_back(s.read_output(0));
  st.values.push_back(s.read_output(1));
  for (const char* p : {"w1", "b1", "w2"}) st.values.push_back(s.read_parameter(p));
  for (const OptimizerStateInfo& m : s.optimizer_state()) st.values.push_back(s.read_optimizer_state(m.name));
  return st;
}

// exact: bit-equal; else |a - b| <= 1e-6 + 1e-4·|b| (different f32 summation orders)
void expect_same(const State& a, const State& b, bool exact, const std::string& what) {
  ASSERT_EQ(a.values.size(), b.values.size()) << what;
  for (size_t v = 0; v < a.values.size(); ++v) {
    ASSERT_EQ(a.values[v].size(), b.values[v].size()) << what;
    size_t bad = 0;
    for (size_t i = 0; i < a.values[v].size(); ++i) {
      const float x = a.values[v][i], y = b.values[v][i];
      const bool ok = exact ? std::memcmp(&x, &y, 4) == 0 : std::fabs(x - y) <= 1e-6f + 1e-4f * std::fabs(y);
      if (!ok && bad++ < 3) ADD_FAILURE() << what << ": value " << v << "[" << i << "] " << x << " vs " << y;
    }
  }
}

// The untuned step's results: two steps from the fed state.
State reference_run() {
  Session s = build(model(), config(""), shared_device());
  feed(s);
  s.run();
  s.run();
  return state(s);
}

TuneOptions quick() {
  TuneOptions o;
  o.warmup = 1;
  o.iterations = 3;
  o.max_candidates = 3;
  return o;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Tune : public test::GpuTest {};

TEST_F(Tune, ReportListsEveryDispatchAndTheTunedStepIsBitEqualForThreadOnlyVariants) {
  const State want = reference_run();
  Session s = build(model(), config(""), shared_device());
  feed(s);
  const std::vector<float> w1 = s.read_parameter("w1");
  TuneOptions o = quick();
  o.max_candidates = 0;  // every candidate of these archetypes
  o.archetypes = {"pointwise", "copy", "optimizer"};
  o.cache = false;
  const TuneReport r = s.tune_with(o);
  const std::string text = r.to_text();
  // The plan dump has one row per dispatch; the report too, in the same order, with the same labels.
  const CompiledStep step = compile_step(model(), config(""), s.caps());
  ASSERT_EQ(r.kernels.size(), step.code.size()) << text;
  size_t timed = 0;
  for (size_t i = 0; i < r.kernels.size(); ++i) {
    const TuneKernel& k = r.kernels[i];
    EXPECT_EQ(k.dispatch, i);
    EXPECT_EQ(k.label, step.code[i].label);
    EXPECT_NE(text.find("[" + k.label + "]"), std::string::npos) << k.label;
    const bool chosen = k.archetype == "pointwise" || k.archetype == "copy" || k.archetype == "optimizer";
    if (chosen) {
      EXPECT_GT(k.candidates, 1) << k.label << "\n" << text;
      EXPECT_GT(k.old_us, 0.0) << k.label;
      EXPECT_GT(k.new_us, 0.0) << k.label;
      EXPECT_LE(k.new_us, k.old_us) << k.label;
      ++timed;
    } else {
      EXPECT_EQ(k.candidates, 0) << k.label;
      EXPECT_EQ(k.old_variant, k.new_variant) << k.label;
      EXPECT_FALSE(k.note.empty()) << k.label;
    }
  }
  EXPECT_GE(timed, 4u) << text;  // three copies (a slice is computed inside the concat) and a pointwise
  std::printf("%s", text.c_str());
  EXPECT_TRUE(r.cache_path.empty());
  // Parameters survive the search (candidate updates ran on them), and the step computes bit-identical
  // values.
  EXPECT_EQ(s.read_parameter("w1"), w1);
  s.run();
  s.run();
  expect_same(state(s), want, true, "tuned (pointwise, copy, optimizer)");
}

TEST_F(Tune, EveryArchetypeTunedStaysWithinRounding) {
  const State want = reference_run();
  Session s = build(model(), config(""), shared_device());
  feed(s);
  s.run();  // tune in the middle of training: the moments and step count must survive too
  TuneOptions o = quick();
  o.cache = false;
  const TuneReport r = s.tune_with(o);
  size_t searched_matmuls = 0;
  for (const TuneKernel& k : r.kernels) {
    if (k.archetype == "row-reduce") {
      EXPECT_GT(k.candidates, 1) << r.to_text();
    }
    if (k.archetype == "matmul" && k.candidates > 1) ++searched_matmuls;  // M = 6: GEMV and scalar
  }
  EXPECT_GE(searched_matmuls, 1u) << r.to_text();
  s.run();
  expect_same(state(s), want, false, "tuned (all)");
  EXPECT_EQ(s.optimizer_step(), 2u);
}

// For every tunable dispatch of the model (only those whose variants keep the arithmetic: thread_only), its
// last (non-default) candidate, as a cache.
TuneCache forced_cache(const runtime::DeviceCaps& caps, bool thread_only = false) {
  const CompiledStep step = compile_step(model(), config(""), caps);
  TuneCache c;
  for (const GeneratedKernel& k : step.code) {
    const std::vector<KernelVariant> cands =
        tune_candidates(step.graph, step.kernels, k.kernel, caps, step.codegen);
    if (cands.size() < 2) continue;
    if (thread_only && k.arch != Archetype::Pointwise && k.arch != Archetype::Copy &&
        k.arch != Archetype::Optimizer)
      continue;
    c[k.base_hash] = {cands.back(), k.label, archetype_name(k.arch), 0, 0};
  }
  return c;
}

TEST_F(Tune, CachedWinnersAreUsedByTheNextBuildWithoutTiming) {
  const std::string dir = fresh_dir("cache");
  const State want = reference_run();
  {
    Session s = build(model(), config(dir), shared_device());
    const TuneReport r = s.tune_with(quick());
    ASSERT_FALSE(r.cache_path.empty());
    ASSERT_TRUE(std::filesystem::exists(r.cache_path)) << r.cache_path;
    // Replace every winner by a non-default variant, so the next build must change every tunable kernel.
    ASSERT_TRUE(tune_cache_store(r.cache_path, s.caps(), forced_cache(s.caps())));
  }
  SessionConfig c = config(dir);
  c.dump_plan = dir + "/plan.txt";
  Session s = build(model(), c, shared_device());
  const TuneCache forced = forced_cache(s.caps());
  ASSERT_GE(forced.size(), 6u);
  const std::string plan = read_file(c.dump_plan);
  for (const auto& [hash, e] : forced)
    EXPECT_NE(plan.find("[" + e.label + "]"), std::string::npos) << e.label;
  std::istringstream rows(plan);
  size_t tuned_rows = 0;
  for (std::string row; std::getline(rows, row);) {
    const size_t at = row.find(" tuned ");
    if (at == std::string::npos) continue;
    ++tuned_rows;
    bool listed = false;
    for (const auto& [hash, e] : forced) listed = listed || row.substr(at + 7) == e.variant.to_string();
    EXPECT_TRUE(listed) << row;
  }
  EXPECT_GE(tuned_rows, forced.size()) << plan;
  // Values within rounding of the untuned step (GEMV -> scalar and the reduction workgroups change sum
  // orders).
  feed(s);
  s.run();
  s.run();
  expect_same(state(s), want, false, "built from the cache");
  // tune_with with the cache on times nothing that is cached.
  const TuneReport again = s.tune_with(quick());
  for (const TuneKernel& k : again.kernels) {
    EXPECT_EQ(k.candidates, 0) << again.to_text();
    if (k.note == "cached") {
      EXPECT_EQ(k.old_variant, k.new_variant);
    }
  }
  // Only variants that move work between threads: bit-equal.
  {
    Session t = build(model(), config(dir), shared_device());
    std::filesystem::remove(tune_cache_path(dir, t.caps()));  // store merges: start from an empty file
    ASSERT_TRUE(tune_cache_store(tune_cache_path(dir, t.caps()), t.caps(), forced_cache(t.caps(), true)));
  }
  const std::string second = dir + "/plan2.txt";
  c.dump_plan = second;
  Session t = build(model(), c, shared_device());
  EXPECT_NE(read_file(second).find(" tuned wg=512 per=8"), std::string::npos) << read_file(second);
  feed(t);
  t.run();
  t.run();
  expect_same(state(t), want, true, "built from the cache (pointwise, copy, optimizer variants)");
  std::filesystem::remove_all(dir);
}

// A matmul that splits K by default (32x784 · 784x128: scalar.16 makes 16 tiles, fewer than the device's
// compute units, lavapipe's 64 assumed or the H200's 132, so K goes in slices): the tuner times it against
// unsplit candidates (its tickets back at zero after every run, or the tuned step's values would be stale),
// the tuned step stays within rounding, and a cached unsplit winner replaces it with the same result.
TEST_F(Tune, SplitKernelsAreTimedWholeAndCanBecomeUnsplit) {
  Graph g;
  auto x = g.input("x", {32, 784});
  auto w = g.parameter("w", {784, 128});
  g.set_outputs({g.matmul(x, w)});
  SessionConfig c = test::gpu_config();
  c.cache_dir = "";
  c.dump_plan.clear();
  c.training = false;
  std::mt19937 rng(5);
  const std::vector<float> xv = random_vec(32 * 784, rng), wv = random_vec(784 * 128, rng, 0.1f);
  auto run = [&](Session& s) {
    s.set_input("x", xv);
    s.set_parameter("w", wv);
    s.run();
    return s.read_output(0);
  };
  const CompiledStep step = compile_step(g, c, test::gpu_device().caps());
  ASSERT_EQ(step.code.size(), 1u) << "expected split-K in one dispatch";
  ASSERT_NE(step.code[0].variant.find(".k"), std::string::npos) << step.code[0].variant;
  Session s = build(g, c, shared_device());
  const std::vector<float> want = run(s);
  TuneOptions o = quick();
  o.max_candidates = 0;
  o.cache = false;
  const TuneReport r = s.tune_with(o);
  ASSERT_EQ(r.kernels.size(), 1u) << r.to_text();
  EXPECT_GT(r.kernels[0].candidates, 1) << r.to_text();
  EXPECT_GT(r.kernels[0].old_us, 0.0);
  EXPECT_LE(r.kernels[0].new_us, r.kernels[0].old_us);
  std::printf("%s", r.to_text().c_str());
  const std::vector<float> tuned = run(s);
  ASSERT_EQ(tuned.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(tuned[i], want[i], 1e-5 + 1e-4 * std::fabs(want[i])) << i << "\n" << r.to_text();

  const std::string dir = fresh_dir("split");
  TuneCache cache;
  cache[step.code.back().base_hash] = {KernelVariant::parse("tier=scalar tile=16 split=1"),
                                       step.code.back().label, "matmul", 0, 0};
  ASSERT_TRUE(tune_cache_store(tune_cache_path(dir, s.caps()), s.caps(), cache));
  c.cache_dir = dir;
  Session unsplit = build(g, c, shared_device());
  ASSERT_EQ(unsplit.pipelines().size(), 1u);
  EXPECT_EQ(unsplit.pipelines()[0].variant, "matmul.scalar.16") << "the cached unsplit variant";
  const std::vector<float> got = run(unsplit);
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5 + 1e-4 * std::fabs(want[i])) << i;
  std::filesystem::remove_all(dir);
}

TEST_F(Tune, ConfigTuneTunesAtBuildAndTheNextBuildReadsTheCache) {
  const std::string dir = fresh_dir("config");
  SessionConfig c = config(dir);
  c.tune = true;  // MEGANEURA_TUNE=1
  c.dump_plan = dir + "/first.txt";
  { Session s = build(model(), c, shared_device()); }
  const std::string first = read_file(c.dump_plan);
  EXPECT_NE(first.find("tuning on " + test::gpu_device().caps().name), std::string::npos) << first;
  EXPECT_NE(first.find("candidates)"), std::string::npos) << first;
  c.dump_plan = dir + "/second.txt";
  Session s = build(model(), c, shared_device());
  const std::string second = read_file(c.dump_plan);
  EXPECT_EQ(second.find("candidates)"), std::string::npos)
      << second;  // nothing timed: every winner is cached
  EXPECT_NE(second.find("(cached)"), std::string::npos) << second;
  feed(s);
  s.run();
  s.run();
  expect_same(state(s), reference_run(), false, "built with tune");
  std::filesystem::remove_all(dir);
}

// Gradient accumulation (a second, accumulate-only list) and GPU timing (a timed list, profiles) are
// re-recorded with the winners too.
TEST_F(Tune, AccumulatingTimedSessionIsReRecordedAndProfilesShowTheVariants) {
  auto run = [&](bool tuned) {
    SessionConfig c = config("");
    c.optimizer.grad_accumulation = 2;
    c.gpu_timing = true;
    Session s = build(model(), c, shared_device());
    feed(s);
    s.run();  // half an update accumulated: tuning must keep it
    if (tuned) {
      TuneOptions o = quick();
      o.cache = false;
      o.archetypes = {"accumulate", "optimizer", "pointwise", "copy"};
      const TuneReport r = s.tune_with(o);
      size_t accumulate = 0;
      for (const TuneKernel& k : r.kernels) accumulate += k.archetype == "accumulate" && k.candidates > 1;
      EXPECT_EQ(accumulate, 3u) << r.to_text();
    }
    s.run();
    s.run();
    s.run();
    const State st = state(s);
    if (tuned) {
      const std::string profile = s.profile({.warmup = 0, .iterations = 1});
      EXPECT_NE(profile.find("\"tuned\""), std::string::npos);
    }
    return st;
  };
  expect_same(run(true), run(false), true, "accumulating, timed");
}

// The file's first line: the header and the checksum of the rest (session/tune_cache.cpp).
std::string sealed(const std::string& body) {
  char sum[24];
  std::snprintf(
      sum, sizeof sum, "%016llx",
      static_cast<unsigned long long>(meganeura::shader::detail::fnv1a64(body.data(), body.size())));
  return "meganeura.tune.v2 " + std::string(sum) + "\n" + body;
}

TEST_F(Tune, CorruptCacheIsAWarningAndTheNextTuneRewritesIt) {
  const std::string dir = fresh_dir("corrupt");
  const std::string path = tune_cache_path(dir, test::gpu_device().caps());
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  // damaged (no header; a valid checksum over bad JSON or a bad schema: deleted) or foreign (kept, ignored)
  const std::pair<std::string, std::string> files[] = {
      {"{not json", "is damaged"},
      {sealed("{not json"), "is damaged"},
      {sealed("{\"schema\":\"meganeura.tune.v1\"}"), "is damaged"},
      {sealed("{\"schema\":\"meganeura.tune.v1\",\"device\":{\"vendor_id\":1,\"device_id\":2,"
              "\"driver_version\":3},\"kernels\":{}}"),
       "ignoring"}};
  for (const auto& [bad, said] : files) {
    {
      std::ofstream(path) << bad;
    }
    testing::internal::CaptureStderr();
    Session s = build(model(), config(dir), shared_device());
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("the tuning cache '" + path + "'"), std::string::npos) << bad << "\n" << err;
    EXPECT_NE(err.find(said), std::string::npos) << bad << "\n" << err;
    EXPECT_EQ(std::filesystem::exists(path), said == "ignoring") << bad;
    feed(s);
    s.run();
    s.run();
    expect_same(state(s), reference_run(), true, "built beside a corrupt cache");
  }
  // A cache of the right device with an unreadable variant is ignored as a whole, with the reason.
  {
    const runtime::DeviceCaps& caps = test::gpu_device().caps();
    std::ostringstream body;
    body << "{\"schema\":\"meganeura.tune.v1\",\"device\":{\"vendor_id\":" << caps.vendor_id
         << ",\"device_id\":" << caps.device_id << ",\"driver_version\":" << caps.driver_version
         << "},\"kernels\":{\"0123456789abcdef\":{\"variant\":\"wg=lots\"}}}";
    std::ofstream(path) << sealed(body.str());
  }
  std::string warning;
  EXPECT_TRUE(tune_cache_load(path, test::gpu_device().caps(), &warning).empty());
  EXPECT_NE(warning.find("wg=lots"), std::string::npos) << warning;
  SessionConfig kept = config(dir);
  kept.keep_gradients = true;  // update kernels of their own (not fused into the gradients' kernels) to tune
  Session s = build(model(), kept, shared_device());
  TuneOptions o = quick();
  o.archetypes = {"optimizer"};
  const TuneReport r = s.tune_with(o);
  warning.clear();
  EXPECT_FALSE(tune_cache_load(path, s.caps(), &warning).empty()) << r.to_text();
  EXPECT_TRUE(warning.empty()) << warning;
  std::filesystem::remove_all(dir);
}

TEST_F(Tune, BadOptionsAreConfigErrorsNamingTheField) {
  Session s = build(model(), config(""), shared_device());
  auto expect_error = [&](TuneOptions o, const std::string& field) {
    try {
      s.tune_with(o);
      ADD_FAILURE() << "no error for " << field;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("TuneOptions::" + field), std::string::npos) << e.what();
    }
  };
  TuneOptions o;
  o.iterations = 0;
  expect_error(o, "iterations");
  o = {};
  o.warmup = -1;
  expect_error(o, "warmup");
  o = {};
  o.max_candidates = -2;
  expect_error(o, "max_candidates");
  o = {};
  o.time_budget_s = std::nan("");
  expect_error(o, "time_budget_s");
  o = {};
  o.archetypes = {"conv"};
  expect_error(o, "archetypes");
  o.archetypes = {"point"};
  expect_error(o, "archetypes");
  // A budget spent before the first kernel: nothing is timed, every tunable kernel says why.
  o = quick();
  o.cache = false;
  o.time_budget_s = 1e-9;
  const TuneReport r = s.tune_with(o);
  for (const TuneKernel& k : r.kernels) {
    EXPECT_EQ(k.candidates, 0) << r.to_text();
    EXPECT_TRUE(k.note == "time budget" || k.note == "not tunable") << k.note;
  }
  // Still usable.
  feed(s);
  s.run();
  EXPECT_TRUE(std::isfinite(s.read_output(0).at(0)));
}

TEST(TuneVariant, TextRoundTripsAndBadTextIsAConfigError) {
  KernelVariant v;
  EXPECT_EQ(v.to_string(), "default");
  EXPECT_EQ(KernelVariant::parse("default"), v);
  v.workgroup = 128;
  v.per_thread = 2;
  EXPECT_EQ(v.to_string(), "wg=128 per=2");
  EXPECT_EQ(KernelVariant::parse(v.to_string()), v);
  KernelVariant m;
  m.tier = kernels::MatmulTier::CoopMatNV;
  m.tile = "64x64x32/2x4";
  EXPECT_EQ(KernelVariant::parse(m.to_string()), m);
  for (const char* bad : {"", "wg=", "wg=0", "wg=12x", "tier=fast", "tile=1x2", "size=4", "wg128"})
    EXPECT_THROW(KernelVariant::parse(bad), ConfigError) << bad;
}

}  // namespace
