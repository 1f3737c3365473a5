// NNEF models made by PyPI's nnef-tools from ONNX models (scripts/nnef_models.py builds the ONNX models with
// the onnx package, converts them and runs onnxruntime on a seeded input): load_nnef's outputs equal
// load_onnx's outputs of the same model and onnxruntime's, within 1e-5 (the reference interpreter, float64
// accumulation), and one model runs on the GPU too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gpu/gpu_fixture.hpp"
#include "gpu/gpu_opcheck.hpp"
#include "meganeura/nnef/nnef.hpp"
#include "meganeura/onnx/onnx.hpp"
#include "meganeura/reference/interpreter.hpp"
#include "meganeura/session/session.hpp"
#include "paths.hpp"

namespace meganeura::test {
namespace {

namespace fs = std::filesystem;

// Regenerated when missing or older than the script.
fs::path models() {
  const fs::path dir = work_dir("nnef-models");
  const fs::path script = source_path("scripts/nnef_models.py");
  std::error_code ec;
  if (!fs::exists(dir / "shapes.shapes") ||
      fs::last_write_time(dir / "shapes.shapes", ec) < fs::last_write_time(script)) {
    const std::string cmd =
        "python3 '" + script.string() + "' '" + dir.string() + "' > '" + dir.string() + ".log' 2>&1";
    if (std::system(cmd.c_str()) != 0)
      throw std::runtime_error(
          "scripts/nnef_models.py failed (are PyPI onnx, onnxruntime, nnef and nnef-tools installed? "
          "scripts/install-oracles.sh); see " +
          dir.string() + ".log");
  }
  return dir;
}

std::vector<float> read_floats(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> r(bytes.size() / 4);
  std::memcpy(r.data(), bytes.data(), r.size() * 4);
  return r;
}

struct Case {
  Shape input;
  std::vector<float> x;
  std::vector<std::vector<float>> expected;  // onnxruntime's outputs
};

Case read_case(const fs::path& dir, const std::string& name) {
  Case c;
  std::ifstream shapes(dir / (name + ".shapes"));
  std::string line;
  while (std::getline(shapes, line)) {
    std::istringstream s(line);
    std::string kind;
    s >> kind;
    if (kind == "input") {
      int64_t d;
      while (s >> d) c.input.push_back(d);
    } else {
      c.expected.push_back(
          read_floats(dir / (name + ".output" + std::to_string(c.expected.size()) + ".bin")));
    }
  }
  c.x = read_floats(dir / (name + ".input.bin"));
  return c;
}

template <typename Model>
std::vector<HostTensor> evaluate(const Model& m, const std::string& input, const Case& c) {
  reference::Feeds feeds;
  feeds[input] = HostTensor(c.input, std::vector<double>(c.x.begin(), c.x.end()));
  for (const auto& [name, v] : m.parameters)
    feeds[name] =
        HostTensor(m.graph.node(*m.graph.find(name)).shape, std::vector<double>(v.begin(), v.end()));
  return reference::evaluate_outputs(m.graph, feeds);
}

void expect_close(const std::vector<double>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - double(want[i])));
  EXPECT_LE(worst, 1e-5) << what;
}

class NnefModels : public ::testing::TestWithParam<std::string> {};

TEST_P(NnefModels, EqualTheOnnxImportAndOnnxruntime) {
  const fs::path dir = models();
  const std::string name = GetParam();
  const Case c = read_case(dir, name);
  const NnefModel nm = load_nnef((dir / (name + ".nnef")).string());
  const OnnxModel om = load_onnx((dir / (name + ".onnx")).string());
  ASSERT_EQ(nm.inputs.size(), 1u);
  EXPECT_EQ(nm.inputs[0].shape, c.input);
  EXPECT_FALSE(nm.parameters.empty());
  const std::vector<HostTensor> ny = evaluate(nm, nm.inputs[0].name, c);
  const std::vector<HostTensor> oy = evaluate(om, om.inputs[0].name, c);
  ASSERT_EQ(ny.size(), c.expected.size());
  ASSERT_EQ(oy.size(), c.expected.size());
  for (size_t k = 0; k < ny.size(); ++k) {
    EXPECT_EQ(ny[k].shape, oy[k].shape) << name << " output " << k;
    expect_close(ny[k].data, c.expected[k], name + " output " + std::to_string(k) + " vs onnxruntime");
    std::vector<float> onnx_out(oy[k].data.begin(), oy[k].data.end());
    expect_close(ny[k].data, onnx_out, name + " output " + std::to_string(k) + " vs load_onnx");
  }
}

INSTANTIATE_TEST_SUITE_P(NnefTools, NnefModels, ::testing::Values("mlp", "cnn", "shapes"));

class NnefModelsGpu : public GpuTest {};

// The CNN (conv, batch_normalization, max_pool, clamp, avg_pool, mean_reduce, linear) on the GPU.
TEST_F(NnefModelsGpu, CnnMatchesOnnxruntime) {
  const fs::path dir = models();
  const Case c = read_case(dir, "cnn");
  NnefModel m = load_nnef((dir / "cnn.nnef").string());
  Session s = build_with(m.graph, session_config(false), shared_device(), {});
  for (const auto& [name, values] : m.parameters) s.set_parameter(name, values);
  s.set_input(m.inputs[0].name, c.x);
  s.run();
  const std::vector<float> y = s.read_output(0);
  ASSERT_EQ(y.size(), c.expected[0].size());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], c.expected[0][i], 1e-4) << i;
}

}  // namespace
}  // namespace meganeura::test
