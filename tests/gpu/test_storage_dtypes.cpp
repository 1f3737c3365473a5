// Storage dtypes on the GPU: f16 and bf16 parameters, inputs, activations and outputs against the CPU
// reference, which rounds every value of a 16-bit dtype to that dtype (ir/storage.hpp). Matmuls, norms and
// reductions accumulate in f32 whatever they read, so against the float64 reference they agree to f32
// accumulation error; a value stored in 16 bits may differ from the reference by one unit in its last place
// where the f32 computation and the f64 one round to neighbours.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "gpu_fixture.hpp"
#include "meganeura/ir/storage.hpp"
#include "meganeura/meganeura.hpp"
#include "meganeura/reference/interpreter.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/session/pipeline.hpp"

using namespace meganeura;

namespace {

class StorageDtypes : public test::GpuTest {};

Session session(const Graph& g) {
  static KernelCache cache;
  SessionConfig cfg = test::gpu_config();
  cfg.training = false;
  cfg.optimizer.kind = OptimizerKind::None;
  cfg.dump_plan.clear();
  std::shared_ptr<runtime::Device> dev(&test::gpu_device(), [](runtime::Device*) {});
  return build_with(g, cfg, dev, {.cache = &cache});
}

// Random feeds for every input and parameter (integer inputs get indices below `rows`), set in the session
// and given to the reference (which rounds them to their dtypes itself).
reference::Feeds feed_all(const Graph& g, Session& s, std::mt19937& rng, int64_t rows = 1) {
  reference::Feeds feeds;
  for (NodeId n : g.inputs()) {
    const Node& nd = g.node(n);
    std::vector<double> d;
    if (nd.dtype == DType::I32) {
      std::vector<int32_t> v(size_t(numel(nd.shape)));
      for (int32_t& x : v) x = int32_t(rng() % uint32_t(rows));
      s.set_input(nd.prov.name, v);
      d.assign(v.begin(), v.end());
    } else {
      std::vector<float> v = test::random_vec(size_t(numel(nd.shape)), rng);
      s.set_input(nd.prov.name, v);
      d.assign(v.begin(), v.end());
    }
    feeds[nd.prov.name] = HostTensor(nd.shape, d);
  }
  for (NodeId n : g.parameters()) {
    const Node& nd = g.node(n);
    std::vector<float> v = test::random_vec(size_t(numel(nd.shape)), rng, 0.5f);
    s.set_parameter(nd.prov.name, v);
    feeds[nd.prov.name] = HostTensor(nd.shape, std::vector<double>(v.begin(), v.end()));
  }
  return feeds;
}

// |got - want| <= atol + rtol |want|, plus one unit of `dt`'s last place at |want| for 16-bit outputs.
void expect_close(const std::vector<float>& got, const HostTensor& want, DType dt, double atol, double rtol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.data.size()) << what;
  const int mant = dt == DType::F16 ? 11 : dt == DType::BF16 ? 8 : 0;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want.data[i];
    double tol = atol + rtol * std::fabs(w);
    if (mant) tol += std::ldexp(std::fabs(w), 1 - mant) + 6e-8;
    if (!(std::fabs(double(got[i]) - w) <= tol) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: gpu " << got[i] << " vs reference " << w;
  }
  EXPECT_EQ(bad, 0u) << what;
}

}  // namespace

// An f16 embedding table, f16 and bf16 weights against f32 activations through GEMV (3 rows) and the scalar
// tiles (21 rows), an RMSNorm with an f16 weight, SwiGLU: the decoder-layer pattern with 16-bit weights.
TEST_F(StorageDtypes, SixteenBitWeightsMatchTheReference) {
  for (int64_t rows : {3, 21}) {
    for (DType wt : {DType::F16, DType::BF16}) {
      Graph g;
      const NodeId ids = g.input("ids", {rows}, DType::I32);
      const NodeId emb = g.cast(g.embedding(g.parameter("emb", {11, 24}, wt), ids), DType::F32);
      const NodeId h = g.rms_norm(emb, g.parameter("norm", {24}, wt), 1e-5);
      const NodeId gate = g.matmul(h, g.parameter("w_gate", {24, 19}, wt));
      const NodeId up = g.matmul(h, g.parameter("w_up", {24, 19}, wt));
      const NodeId act = g.mul(g.silu(gate), up);
      const NodeId down = g.matmul(act, g.parameter("w_down", {24, 19}, wt), false, true);
      g.set_outputs({g.named(g.add(down, emb), "y")});
      Session s = session(g);
      std::mt19937 rng{uint32_t(rows)};
      reference::Feeds feeds = feed_all(g, s, rng, 11);
      s.run();
      const auto want = reference::evaluate_outputs(g, feeds);
      expect_close(s.read_output(0), want[0], DType::F32, 1e-5, 1e-4,
                   std::string(dtype_name(wt)) + " weights, rows " + std::to_string(rows));
      // The weights stay 16-bit on the device: read back, they are the rounded values.
      const std::vector<float> w = s.read_parameter("w_up");
      const HostTensor& fed = feeds["w_up"];
      for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(double(w[i]), dtype_round(fed.data[i], wt)) << i;
    }
  }
}

// Values stored as f16/bf16 between kernels (activations and outputs), a matmul of two f16 operands storing
// f16, a softmax reading an f16 value and casts in both directions.
TEST_F(StorageDtypes, SixteenBitActivationsAndCasts) {
  for (DType t : {DType::F16, DType::BF16}) {
    for (int64_t rows : {2, 17}) {
      Graph g;
      const NodeId x = g.cast(g.input("x", {rows, 12}), t);  // f32 -> 16-bit, fused into its consumer
      const NodeId w = g.parameter("w", {12, 9}, t);
      const NodeId y = g.named(g.matmul(g.exp(x), w), "y");               // 16-bit operands, 16-bit result
      const NodeId p = g.named(g.softmax(g.mul(y, g.scalar(0.5))), "p");  // a reduction over a 16-bit value
      const NodeId back = g.named(g.cast(g.add(p, g.input("bias", {9}, t)), DType::F32), "back");
      g.set_outputs({y, p, back});
      Session s = session(g);
      std::mt19937 rng(7);
      reference::Feeds feeds = feed_all(g, s, rng);
      s.run();
      const auto want = reference::evaluate_outputs(g, feeds);
      const std::string what = std::string(dtype_name(t)) + " rows " + std::to_string(rows);
      expect_close(s.read_output("y"), want[0], t, 1e-5, 1e-4, what + " y");
      expect_close(s.read_output("p"), want[1], t, 1e-5, 1e-4, what + " p");
      expect_close(s.read_output("back"), want[2], t, 1e-5, 1e-4, what + " back");
    }
  }
}

// A parameter declared f16 occupies two bytes an element on the device, and bytes uploaded as stored come
// back as the values they encode.
TEST_F(StorageDtypes, HalfWeightsTakeHalfTheMemoryAndUploadAsBytes) {
  auto make = [](DType t) {
    Graph g;
    g.set_outputs({g.matmul(g.input("x", {2, 64}), g.parameter("w", {64, 32}, t))});
    return g;
  };
  Session f32 = session(make(DType::F32));
  Session f16 = session(make(DType::F16));
  EXPECT_EQ(f32.memory_summary().parameters, 64u * 32u * 4u);
  EXPECT_EQ(f16.memory_summary().parameters, 64u * 32u * 2u);

  std::vector<uint16_t> bits(64 * 32);
  for (size_t i = 0; i < bits.size(); ++i)
    bits[i] = uint16_t(0x3C00u + (i % 7) * 0x0400u);  // 1, 2, 4, ... 64
  f16.set_parameter_bytes("w", std::as_bytes(std::span(bits)));
  const std::vector<float> back = f16.read_parameter("w");
  for (size_t i = 0; i < bits.size(); ++i) ASSERT_EQ(back[i], float(1u << (i % 7))) << i;
  EXPECT_THROW(f16.set_parameter_bytes("w", std::as_bytes(std::span(bits).subspan(1))), SessionError);
}
