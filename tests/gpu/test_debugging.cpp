// Debugging and profiling on a real device (lavapipe in CI): debug sessions read every named value (checked
// against the CPU reference), structured errors for values fused away or whose memory is reused, step_debug
// finds the first NaN, eager evaluation agrees with the compiled session, the profile_session tool writes a
// profile that follows the documented schema, and MEGANEURA_TRACE writes a CPU and a GPU track.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "gpu_fixture.hpp"
#include "meganeura/autodiff/autodiff.hpp"
#include "meganeura/eager/eager.hpp"
#include "meganeura/reference/interpreter.hpp"
#include "meganeura/session/pipeline.hpp"

using namespace meganeura;
namespace fs = std::filesystem;

namespace {

std::shared_ptr<runtime::Device> shared_device() {
  return std::shared_ptr<runtime::Device>(&test::gpu_device(), [](runtime::Device*) {});
}

fs::path temp_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("meganeura-test-debugging-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

SessionConfig config(bool training) {
  SessionConfig c = test::gpu_config();
  c.cache_dir = (temp_dir() / "cache").string();
  c.dump_plan.clear();
  c.trace_path.clear();
  c.gpu_timing = false;
  c.training = training;
  if (!training) c.optimizer.kind = OptimizerKind::None;
  return c;
}

SessionConfig debug_flags(SessionConfig c) {
  c.alias_memory = false;
  c.host_visible = true;
  c.keep_intermediates = true;
  return c;
}

using meganeura::test::random_vec;

// A small block with named values: blk3.qkv (fused into relu's kernel in a normal session), blk3.out, loss.
struct Block {
  Graph g;
  NodeId qkv, out, loss;
  Block() {
    auto x = g.input("x", {6, 10});
    auto t = g.input("t", {6, 5});
    auto w1 = g.parameter("w1", {10, 12});
    qkv = g.named(g.matmul(x, w1), "blk3.qkv");
    auto w2 = g.parameter("w2", {12, 5});
    out = g.named(g.matmul(g.relu(qkv), w2), "blk3.out");
    loss = g.named(g.mse_loss(out, t), "loss");
    g.set_outputs({loss});
  }
  reference::Feeds feed(Session& s, uint32_t seed) const {
    std::mt19937 rng(seed);
    reference::Feeds f;
    for (const auto& [name, shape] : std::vector<std::pair<std::string, Shape>>{
             {"x", {6, 10}}, {"t", {6, 5}}, {"w1", {10, 12}}, {"w2", {12, 5}}}) {
      auto v = random_vec(size_t(numel(shape)), rng);
      if (name[0] == 'w')
        s.set_parameter(name, v);
      else
        s.set_input(name, v);
      f[name] = HostTensor(shape, std::vector<double>(v.begin(), v.end()));
    }
    return f;
  }
};

void expect_close(const std::vector<float>& got, const HostTensor& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5 + 1e-4 * std::fabs(want[i])) << what << "[" << i << "]";
}

}  // namespace

class Debugging : public test::GpuTest {};

TEST_F(Debugging, DebugSessionReadsEveryNamedValueIncludingGradients) {
  Block b;
  Session s = build(b.g, debug_flags(config(true)), shared_device());
  reference::Feeds f = b.feed(s, 3);
  s.step();
  s.wait();
  expect_close(s.read_node_by_name("blk3.qkv"), reference::evaluate(b.g, f, b.qkv), "blk3.qkv");
  expect_close(s.read_node_by_name("blk3.out"), reference::evaluate(b.g, f, b.out), "blk3.out");
  Graph d = differentiate(b.g, b.loss);
  for (const char* name : {"grad/blk3.qkv", "grad/blk3.out", "grad/w1"})
    expect_close(s.read_node_by_name(name), reference::evaluate(d, f, *d.find(name)), name);
}

TEST_F(Debugging, SessionConfigDebugOpensAHostVisibleSessionThatKeepsValues) {
  Block b;
  SessionConfig c = SessionConfig::debug();
  c.cache_dir = (temp_dir() / "cache").string();
  c.dump_plan.clear();
  c.trace_path.clear();
  Session s = build(b.g, c);
  reference::Feeds f = b.feed(s, 4);
  s.step();
  s.wait();
  expect_close(s.read_node_by_name("blk3.qkv"), reference::evaluate(b.g, f, b.qkv), "blk3.qkv");
}

TEST_F(Debugging, NormalSessionGivesStructuredErrorsForValuesItDidNotKeep) {
  Block b;
  Session s = build(b.g, config(false), shared_device());
  b.feed(s, 5);
  s.run();
  try {
    s.read_node_by_name("blk3.qkv");
    FAIL() << "blk3.qkv should be fused into relu's kernel";
  } catch (const NodeReadError& e) {
    EXPECT_EQ(e.reason(), ReadFailure::FusedAway) << e.what();
    EXPECT_NE(e.kernel().find("blk3.qkv"), std::string::npos) << e.kernel();
    EXPECT_NE(std::string(e.what()).find("SessionConfig::debug()"), std::string::npos) << e.what();
  }
  try {
    s.read_node_by_name("no.such.value");
    FAIL();
  } catch (const NodeReadError& e) {
    EXPECT_EQ(e.reason(), ReadFailure::UnknownName);
  }
  EXPECT_THROW(s.read_node_by_name("grad/w1"), NodeReadError);  // inference: no gradients at all
  EXPECT_EQ(s.read_node_by_name("loss").size(), 1u);            // an output is always readable
}

TEST_F(Debugging, ReusedActivationMemoryIsReportedWithTheKernelThatReusedIt) {
  // A chain of matmuls: each stored intermediate dies once the next has read it, so the aliased arena gives
  // a's bytes to a later value.
  Graph g;
  auto x = g.input("x", {8, 16});
  auto w = g.parameter("w", {16, 16});
  auto a = g.named(g.matmul(x, w), "a");
  auto b = g.named(g.matmul(a, w), "b");
  auto c = g.named(g.matmul(b, w), "c");
  auto d = g.named(g.matmul(c, w), "d");
  g.set_outputs({g.sum(d)});
  Session s = build(g, config(false), shared_device());
  s.run();
  size_t reused = 0;
  for (const char* name : {"a", "b", "c"}) {
    try {
      s.read_node_by_name(name);
    } catch (const NodeReadError& e) {
      if (e.reason() != ReadFailure::MemoryReused) continue;
      ++reused;
      EXPECT_FALSE(e.kernel().empty());
    }
  }
  EXPECT_GE(reused, 1u);
  // The same graph in a debug session keeps all of them.
  Session dbg = build(g, debug_flags(config(false)), shared_device());
  dbg.run();
  for (const char* name : {"a", "b", "c", "d"}) EXPECT_EQ(dbg.read_node_by_name(name).size(), 128u) << name;
}

TEST_F(Debugging, StepDebugReportsTheFirstNaNByNameAndBuilderLine) {
  Graph g;
  auto x = g.input("x", {4, 6});
  auto w = g.parameter("w", {6, 3});
  auto h = g.named(g.matmul(x, w), "h");
  const int line = __LINE__ + 1;
  auto bad = g.named(g.log(h), "log_h");  // log of a negative value: NaN
  auto y = g.named(g.add(bad, h), "y");
  g.set_outputs({g.named(g.sum(y), "loss")});
  std::vector<float> xv(24, 1.0f), wv(18, 0.5f);
  for (size_t i = 0; i < 6; ++i) wv[i * 3] = -1.0f;  // h[:, 0] = -6 in all 4 rows
  for (bool debug : {true, false}) {
    SCOPED_TRACE(debug);
    SessionConfig c = config(false);
    if (debug) c = debug_flags(c);
    Session s = build(g, c, shared_device());
    s.set_input("x", xv);
    s.set_parameter("w", wv);
    NanReport r = s.step_debug();
    ASSERT_TRUE(r.found) << r.to_text();
    EXPECT_TRUE(std::isnan(r.value));
    EXPECT_EQ(r.non_finite, debug ? 4u : 1u) << r.to_text();
    if (debug) {
      EXPECT_EQ(r.node, "log_h") << r.to_text();
      EXPECT_EQ(r.op, "log");
      EXPECT_NE(r.builder.find("test_debugging.cpp:" + std::to_string(line)), std::string::npos) << r.builder;
      EXPECT_NE(r.kernel.find("log_h"), std::string::npos);
    } else {
      EXPECT_EQ(r.node, "loss") << r.to_text();  // only outputs are stored: the loss is the first seen
    }
    EXPECT_NE(r.to_text().find("not necessarily the root cause"), std::string::npos);
    // Fixing the input clears the report.
    std::vector<float> good(18, 0.5f);
    s.set_parameter("w", good);
    EXPECT_FALSE(s.step_debug().found);
  }
}

// The issue-26 scenario: one NaN batch through relu poisons w1 for good. The GPU must not hide it (relu(NaN)
// is NaN, so the next loss is NaN too), and step_debug in a normal session names the parameter itself, by
// name and builder line, before the step reads it; a poisoned optimizer moment is named the same way.
TEST_F(Debugging, StepDebugScansParametersAndOptimizerState) {
  Graph g;
  auto x = g.input("x", {4, 6});
  auto t = g.input("t", {4, 2});
  const int line = __LINE__ + 1;
  auto w1 = g.parameter("w1", {6, 5});
  auto w2 = g.parameter("w2", {5, 2});
  auto h = g.relu(g.matmul(x, w1));
  g.set_outputs({g.named(g.mse_loss(g.matmul(h, w2), t), "loss")});
  SessionConfig c = config(true);
  c.optimizer.kind = OptimizerKind::Adam;
  c.optimizer.learning_rate = 0.01;
  Session s = build(g, c, shared_device());
  std::vector<float> xv(24, 0.5f), tv(8, 0.25f), w1v(30, 0.1f), w2v(10, 0.2f);
  s.set_parameter("w1", w1v);
  s.set_parameter("w2", w2v);
  s.set_input("t", tv);
  s.set_input("x", xv);
  EXPECT_FALSE(s.step_debug().found);
  std::vector<float> poisoned = xv;
  poisoned[3] = std::nanf("");
  s.set_input("x", poisoned);
  s.run();
  s.set_input("x", xv);
  s.run();
  EXPECT_TRUE(std::isnan(s.read_output(0)[0])) << "a NaN parameter must not give a finite loss";
  NanReport r = s.step_debug();
  ASSERT_TRUE(r.found) << r.to_text();
  EXPECT_EQ(r.node, "w1") << r.to_text();
  EXPECT_EQ(r.op, "parameter");
  EXPECT_EQ(r.stage, "before the step");
  EXPECT_NE(r.builder.find("test_debugging.cpp:" + std::to_string(line)), std::string::npos) << r.builder;
  EXPECT_NE(r.to_text().find("'w1'"), std::string::npos) << r.to_text();

  // Parameters good again, one moment poisoned: named as the optimizer state, with its parameter's line.
  s.set_parameter("w1", w1v);
  s.set_parameter("w2", w2v);
  std::string moment;
  for (const OptimizerStateInfo& m : s.optimizer_state()) {
    std::vector<float> zero(size_t(numel(m.shape)), 0.0f);
    if (moment.empty() && m.name.find("/w1") != std::string::npos) {
      moment = m.name;
      zero[7] = INFINITY;
    }
    s.set_optimizer_state(m.name, zero);
  }
  ASSERT_FALSE(moment.empty());
  r = s.step_debug();
  ASSERT_TRUE(r.found) << r.to_text();
  EXPECT_EQ(r.node, moment) << r.to_text();
  EXPECT_EQ(r.op, "optimizer state");
  EXPECT_EQ(r.index, 7u);
  EXPECT_NE(r.builder.find("test_debugging.cpp:" + std::to_string(line)), std::string::npos) << r.builder;
}

TEST_F(Debugging, EagerAgreesWithTheCompiledSessionOnTheSameGraph) {
  eager::Eager ev(shared_device(), config(false));
  std::mt19937 rng(11);
  Graph g;
  auto x = g.input("x", {5, 7});
  auto w = g.parameter("w", {7, 9});
  auto xv = random_vec(35, rng), wv = random_vec(63, rng);
  ev.set("x", xv);
  ev.set("w", wv);
  auto h = g.named(g.relu(g.matmul(x, w)), "h");
  std::vector<float> h_eager = ev.eval(g, h);  // the graph is still being built
  reference::Feeds f{{"x", HostTensor({5, 7}, std::vector<double>(xv.begin(), xv.end()))},
                     {"w", HostTensor({7, 9}, std::vector<double>(wv.begin(), wv.end()))}};
  expect_close(h_eager, reference::evaluate(g, f, h), "eager h");
  auto y = g.named(g.softmax(g.mul(h, g.scalar(0.5))), "y");
  std::vector<float> y_eager = ev.eval(g, y);
  EXPECT_EQ(ev.compiled(), 2u);
  ev.eval(g, h);  // cached: the subgraph under h did not change
  EXPECT_EQ(ev.compiled(), 2u);
  // The same graph compiles unchanged into a session with the same kernels and gives the same values.
  g.set_outputs({y, h});
  Session s = build(g, config(false), shared_device());
  s.set_input("x", xv);
  s.set_parameter("w", wv);
  s.run();
  EXPECT_EQ(s.read_output(0), y_eager);
  EXPECT_EQ(s.read_output(1), h_eager);
  // A subgraph reading a leaf without a value names it.
  auto z = g.matmul(g.input("z", {1, 5}), y);
  EXPECT_THROW(ev.eval(g, z), SessionError);
}

namespace {

// The documented schema (docs/debugging.md, "Profile schema"): each required key with its JSON type.
void check_stats(const nlohmann::json& s, size_t samples, const std::string& what) {
  ASSERT_TRUE(s.is_object()) << what;
  ASSERT_TRUE(s["samples_ns"].is_array()) << what;
  EXPECT_EQ(s["samples_ns"].size(), samples) << what;
  for (const char* k : {"median_ns", "mean_ns", "min_ns", "max_ns"})
    ASSERT_TRUE(s[k].is_number()) << what << k;
  EXPECT_LE(s["min_ns"].get<double>(), s["median_ns"].get<double>()) << what;
  EXPECT_LE(s["median_ns"].get<double>(), s["max_ns"].get<double>()) << what;
  EXPECT_GT(s["max_ns"].get<double>(), 0.0) << what;
}

// {name: {value, format, description}}, value typed by format; at least one statistic, and a nonzero number
// among them (a driver that captures reports instruction or register counts).
void check_pipeline_stats(const nlohmann::json& st, const std::string& what) {
  ASSERT_TRUE(st.is_object()) << what;
  ASSERT_FALSE(st.empty()) << what;
  bool nonzero = false;
  for (const auto& [name, v] : st.items()) {
    ASSERT_FALSE(name.empty()) << what;
    ASSERT_TRUE(v["description"].is_string()) << what << name;
    const std::string f = v["format"];
    if (f == "bool32")
      ASSERT_TRUE(v["value"].is_boolean()) << what << name;
    else if (f == "int64")
      ASSERT_TRUE(v["value"].is_number_integer()) << what << name;
    else if (f == "uint64")
      ASSERT_TRUE(v["value"].is_number_unsigned()) << what << name;
    else if (f == "float64")
      ASSERT_TRUE(v["value"].is_number()) << what << name;
    else
      ADD_FAILURE() << what << ": statistic " << name << " has format " << f;
    nonzero |= v["value"].is_number() && v["value"].get<double>() != 0.0;
  }
  EXPECT_TRUE(nonzero) << what << ": " << st.dump();
}

void check_profile(const nlohmann::json& p, int iterations) {
  ASSERT_EQ(p["schema"], "meganeura.profile.v1");
  for (const char* k : {"name", "backend", "device_type", "driver_name", "api_version"})
    ASSERT_TRUE(p["device"][k].is_string()) << k;
  for (const char* k : {"vendor_id", "device_id", "timestamp_period_ns", "subgroup_size"})
    ASSERT_TRUE(p["device"][k].is_number()) << k;
  ASSERT_TRUE(p["device"]["pipeline_executable_info"].is_boolean());
  for (const char* k : {"parameters", "gradients", "optimizer_state", "activations", "inputs", "outputs",
                        "total", "device_allocated_bytes"})
    ASSERT_TRUE(p["memory"][k].is_number_unsigned()) << k;
  ASSERT_TRUE(p["memory"]["heaps"].is_array());
  ASSERT_FALSE(p["memory"]["heaps"].empty());
  const nlohmann::json& sess = p["session"];
  ASSERT_TRUE(sess["training"].is_boolean());
  ASSERT_TRUE(sess["rewrite"].is_string());
  for (const char* k : {"dispatches", "distinct_kernels", "barriers", "warmup", "iterations"})
    ASSERT_TRUE(sess[k].is_number_integer()) << k;
  EXPECT_EQ(sess["iterations"].get<int>(), iterations);
  const nlohmann::json& ds = p["dispatches"];
  ASSERT_TRUE(ds.is_array());
  ASSERT_EQ(ds.size(), sess["dispatches"].get<size_t>());
  std::set<std::string> phases, families;
  double sum = 0;
  for (size_t i = 0; i < ds.size(); ++i) {
    const nlohmann::json& d = ds[i];
    EXPECT_EQ(d["index"].get<size_t>(), i);
    for (const char* k : {"label", "archetype", "variant", "family", "phase", "kernel_hash", "builder"})
      ASSERT_TRUE(d[k].is_string()) << k;
    ASSERT_TRUE(d["grid"].is_array() && d["grid"].size() == 3);
    ASSERT_TRUE(d["workgroup"].is_array() && d["workgroup"].size() == 3);
    ASSERT_TRUE(d["spec_constants"].is_array());
    ASSERT_TRUE(d["invocations"].is_number_unsigned());
    ASSERT_TRUE(d["barrier_before"].is_boolean());
    EXPECT_EQ(d["kernel_hash"].get<std::string>().size(), 16u);
    check_stats(d, size_t(iterations), "dispatch " + std::to_string(i));
    // The driver's pipeline statistics: a row has them exactly when the device can capture them.
    ASSERT_EQ(d.contains("pipeline_stats"), p["device"]["pipeline_executable_info"].get<bool>()) << i;
    if (d.contains("pipeline_stats"))
      check_pipeline_stats(d["pipeline_stats"], "dispatch " + std::to_string(i));
    const std::string ph = d["phase"];
    EXPECT_TRUE(ph == "forward" || ph == "backward" || ph == "update") << ph;
    phases.insert(ph);
    families.insert(d["family"].get<std::string>());
    sum += d["median_ns"].get<double>();
  }
  EXPECT_EQ(phases, (std::set<std::string>{"forward", "backward", "update"}));
  for (const char* agg : {"families", "phases"}) {
    const char* key = std::string(agg) == "families" ? "family" : "phase";
    double share = 0;
    size_t count = 0;
    for (const nlohmann::json& f : p[agg]) {
      ASSERT_TRUE(f[key].is_string());
      ASSERT_TRUE(f["median_ns_total"].is_number());
      share += f["share"].get<double>();
      count += f["dispatches"].get<size_t>();
    }
    EXPECT_NEAR(share, 1.0, 1e-9) << agg;
    EXPECT_EQ(count, ds.size()) << agg;
  }
  EXPECT_EQ(p["families"].size(), families.size());
  const nlohmann::json& o = p["overhead"];
  for (const char* k : {"grouped_gpu", "instrumented_gpu", "grouped_wall", "instrumented_wall"})
    check_stats(o[k], size_t(iterations), k);
  EXPECT_NEAR(o["sum_of_dispatch_medians_ns"].get<double>(), sum, 1e-6 * sum + 1);
  EXPECT_GT(o["ratio"].get<double>(), 0.0);
}

}  // namespace

TEST_F(Debugging, ProfileSessionToolWritesAProfileThatFollowsTheSchema) {
  ASSERT_TRUE(device().caps().timestamps) << "lavapipe and every GPU we target offer timestamp queries";
  const fs::path out = temp_dir() / "profile.json";
  fs::remove(out);
  const std::string cmd = "MEGANEURA_GPU_TIMING=1 MEGANEURA_CACHE_DIR='" + (temp_dir() / "cache").string() +
                          "' '" + test::tool("profile_session").string() + "' '" + out.string() +
                          "' --iterations 2 --warmup 1 --batch 8 > '" +
                          (temp_dir() / "profile.log").string() + "' 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(out);
  ASSERT_TRUE(f.good());
  nlohmann::json p = nlohmann::json::parse(f);
  check_profile(p, 2);
  // Names from nn layers reach the rows: the forward matmul of fc0 and its gradient.
  bool fwd = false, bwd = false;
  for (const nlohmann::json& d : p["dispatches"]) {
    fwd |= d["phase"] == "forward" && d["label"].get<std::string>().find("mlp.fc0") != std::string::npos;
    bwd |=
        d["phase"] == "backward" && d["label"].get<std::string>().find("grad/mlp.fc0") != std::string::npos;
  }
  EXPECT_TRUE(fwd);
  EXPECT_TRUE(bwd);
  // Without MEGANEURA_GPU_TIMING the tool refuses, and Session::profile says why.
  EXPECT_NE(std::system(("MEGANEURA_GPU_TIMING=0 '" + test::tool("profile_session").string() + "' '" +
                         out.string() + "' > /dev/null 2>&1")
                            .c_str()),
            0);
  Block b;
  Session s = build(b.g, config(true), shared_device());
  EXPECT_THROW(s.profile(), SessionError);
}

// The CNN and the transformer block of examples/models.hpp profile too, each dispatch labelled by its layer.
TEST_F(Debugging, ProfileSessionToolProfilesTheCnnAndTheTransformerBlock) {
  for (const auto& [model, layer] :
       {std::pair<std::string, std::string>{"cnn", "conv2"}, {"transformer", "blk0.attn"}}) {
    const fs::path out = temp_dir() / ("profile-" + model + ".json");
    fs::remove(out);
    const std::string cmd = "MEGANEURA_GPU_TIMING=1 MEGANEURA_CACHE_DIR='" + (temp_dir() / "cache").string() +
                            "' '" + test::tool("profile_session").string() + "' '" + out.string() +
                            "' --model " + model + " --iterations 2 --warmup 0 --batch 2 > '" +
                            (temp_dir() / "profile.log").string() + "' 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream f(out);
    ASSERT_TRUE(f.good()) << model;
    nlohmann::json p = nlohmann::json::parse(f);
    check_profile(p, 2);
    bool fwd = false, bwd = false;
    for (const nlohmann::json& d : p["dispatches"]) {
      fwd |= d["phase"] == "forward" && d["label"].get<std::string>().find(layer) != std::string::npos;
      bwd |= d["phase"] == "backward" &&
             d["label"].get<std::string>().find("grad/" + layer) != std::string::npos;
    }
    EXPECT_TRUE(fwd) << model;
    EXPECT_TRUE(bwd) << model;
  }
  // An unknown model is refused with a non-zero exit.
  EXPECT_NE(std::system(("MEGANEURA_GPU_TIMING=1 '" + test::tool("profile_session").string() + "' '" +
                         (temp_dir() / "x.json").string() + "' --model resnet > /dev/null 2>&1")
                            .c_str()),
            0);
}

TEST_F(Debugging, SessionProfileInProcessCoversEveryDispatch) {
  Block b;
  SessionConfig c = config(true);
  c.gpu_timing = true;
  c.keep_gradients = true;  // update kernels of their own, so that every phase has dispatches
  Session s = build(b.g, c, shared_device());
  b.feed(s, 9);
  ProfileOptions po;
  po.iterations = 2;
  po.warmup = 0;
  check_profile(nlohmann::json::parse(s.profile(po)), 2);
  EXPECT_EQ(s.optimizer_step(), 4u);  // profiling runs real steps
}

TEST_F(Debugging, TraceHasCpuBuildAndStepSpansAndGpuDispatchSpans) {
  const fs::path path = temp_dir() / "trace.json";
  fs::remove(path);
  size_t dispatches = 0;
  {
    Block b;
    SessionConfig c = config(true);
    c.trace_path = path.string();
    Session s = build(b.g, c, shared_device());
    b.feed(s, 2);
    for (int i = 0; i < 2; ++i) {
      s.step();
      s.wait();
    }
    dispatches = s.report().kernels;
  }  // the session's end writes the file
  std::ifstream f(path);
  ASSERT_TRUE(f.good());
  nlohmann::json t = nlohmann::json::parse(f);
  ASSERT_TRUE(t["traceEvents"].is_array());
  std::set<std::string> cpu, tracks;
  size_t gpu = 0;
  bool gpu_named = false;
  for (const nlohmann::json& e : t["traceEvents"]) {
    ASSERT_TRUE(e["ph"].is_string());
    if (e["ph"] == "M") {
      if (e["name"] == "process_name") tracks.insert(e["args"]["name"].get<std::string>());
      continue;
    }
    ASSERT_EQ(e["ph"], "X");
    ASSERT_TRUE(e["ts"].is_number() && e["dur"].is_number());
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    if (e["pid"] == 1) cpu.insert(e["name"].get<std::string>());
    if (e["pid"] == 2) {
      ++gpu;
      gpu_named |= e["name"].get<std::string>().find("grad/blk3") != std::string::npos;
    }
  }
  EXPECT_EQ(tracks, (std::set<std::string>{"cpu", "gpu"}));
  for (const char* span :
       {"build", "autodiff", "rewrite", "schedule", "codegen", "compile shaders", "record", "submit", "wait"})
    EXPECT_TRUE(cpu.count(span)) << span;
  EXPECT_EQ(gpu, 2 * dispatches) << "two steps of dispatches";
  EXPECT_TRUE(gpu_named);
}
