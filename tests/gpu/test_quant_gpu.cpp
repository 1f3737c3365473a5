// Block-quantized parameters (GGUF Q4_0 .. Q6_K) kept in block form on the GPU and dequantized inside the
// matmul and gather kernels. The oracle is quant/'s CPU dequantizer (bit-exact against PyPI gguf,
// tests/oracle) followed by a float64 product: the GPU sums in f32, so products agree to f32 accumulation
// error; a gather copies dequantized values, which the GLSL port computes in the reference's order (no fused
// multiply-add), so they agree exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "gpu_fixture.hpp"
#include "meganeura/ir/storage.hpp"
#include "meganeura/meganeura.hpp"
#include "meganeura/models/llama.hpp"
#include "meganeura/quant/quant.hpp"
#include "meganeura/reference/interpreter.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/session/pipeline.hpp"

using namespace meganeura;

namespace {

class QuantGpu : public test::GpuTest {};

constexpr DType kBlockTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                                 DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

SessionConfig inference() {
  SessionConfig cfg = test::gpu_config();
  cfg.training = false;
  cfg.optimizer.kind = OptimizerKind::None;
  cfg.dump_plan.clear();
  return cfg;
}

Session session(const Graph& g) {
  static KernelCache cache;
  std::shared_ptr<runtime::Device> dev(&test::gpu_device(), [](runtime::Device*) {});
  return build_with(g, inference(), dev, {.cache = &cache});
}

// Random blocks of type t for `n` values (quantized from normal values; K types spread over their
// sub-blocks).
std::vector<std::byte> random_blocks(DType t, size_t n, std::mt19937& rng) {
  std::vector<float> v = test::random_vec(n, rng);
  for (size_t i = 0; i < n; ++i) v[i] *= 1.0f + float((i / 16) % 5);  // sub-block scales that differ
  return to_storage(v, t);
}

std::vector<float> dequantized(DType t, const std::vector<std::byte>& b) {
  std::vector<float> out =
      quant::dequantize(quant_type(t), std::span(reinterpret_cast<const uint8_t*>(b.data()), b.size()));
  return out;
}

// C = X · Wᵀ (trans_b) or X · W, X [M, K] f32, W quantized; against the float64 product of W's dequantized
// values.
void check_product(DType t, int64_t M, int64_t N, int64_t K, bool trans_b, std::mt19937& rng) {
  const std::string what = std::string(dtype_name(t)) + " M=" + std::to_string(M) +
                           " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                           (trans_b ? " x·Wᵀ" : " x·W");
  Graph g;
  const NodeId x = g.input("x", {M, K});
  const NodeId w = g.parameter("w", trans_b ? Shape{N, K} : Shape{K, N}, t);
  g.set_outputs({g.named(g.matmul(x, w, false, trans_b), "y")});
  Session s = session(g);
  const std::vector<float> xv = test::random_vec(size_t(M * K), rng);
  const std::vector<std::byte> wb = random_blocks(t, size_t(N * K), rng);
  const std::vector<float> wv = dequantized(t, wb);
  s.set_input("x", xv);
  s.set_parameter_bytes("w", wb);
  s.run();
  const std::vector<float> got = s.read_output("y");
  ASSERT_EQ(got.size(), size_t(M * N)) << what;
  size_t bad = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double want = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double wk = trans_b ? wv[size_t(n * K + k)] : wv[size_t(k * N + n)];
        want += double(xv[size_t(m * K + k)]) * wk;
        mag += std::fabs(double(xv[size_t(m * K + k)]) * wk);
      }
      const double gv = got[size_t(m * N + n)];
      if (!(std::fabs(gv - want) <= 2e-6 * mag + 1e-6) && bad++ < 5)
        ADD_FAILURE() << what << " [" << m << "," << n << "]: gpu " << gv << " vs reference " << want;
    }
  EXPECT_EQ(bad, 0u) << what;
}

}  // namespace

// Every block type through the GEMV tier (M = 1, 3, 8: eight values of a block per lane) and the scalar tiles
// (M = 17, 70: element-wise dequantizing loads), N ragged (neither a multiple of 4 nor of a tile), K several
// blocks.
TEST_F(QuantGpu, MatmulOfEveryBlockTypeAgreesWithTheCpuReference) {
  std::mt19937 rng(41);
  for (DType t : kBlockTypes) {
    const int64_t K = dtype_block_elems(t) == 32 ? 96 : 512;
    for (int64_t M : {1, 3, 8, 17, 70}) check_product(t, M, M == 70 ? 67 : 13, K, true, rng);
  }
}

// A weight quantized along its output dimension (x·W, W [K, N]): element-wise loads in both tiers.
TEST_F(QuantGpu, UntransposedQuantizedOperandAgreesWithTheCpuReference) {
  std::mt19937 rng(42);
  for (DType t : {DType::Q8_0, DType::Q4_1, DType::Q6_K}) {
    const int64_t N = dtype_block_elems(t) == 32 ? 64 : 256;
    for (int64_t M : {2, 17}) check_product(t, M, N, 37, false, rng);
  }
}

// Mixed16 prefill-sized products over a 16-bit or block-quantized weight (kernels::kMinStagedLoadMacs, at
// least kMinStagedRows rows) first copy the activation rounded to f16 and the weight converted to f16 (one
// dispatch, "matmul.f16-copy"), then multiply f16 buffers (the cooperative tier where the device's self-test
// passed one; the scalar tier here). Oracle: the float64 product of A rounded to f16 and W dequantized on the
// CPU, then rounded to f16. Decode-sized products (16 rows) and F32 sessions keep the loads.
TEST_F(QuantGpu, Mixed16PrefillProductsMultiplyAnF16CopyOfTheWeight) {
  std::mt19937 rng(45);
  const int64_t M = 512, N = 512, K = 512;  // 2^27 multiply-adds
  auto copies = [](const Session& s) {
    size_t n = 0;
    for (const PipelineReport& p : s.pipelines()) n += p.variant == "matmul.f16-copy";
    return n;
  };
  auto half = [](double v) { return double(f16_bits_to_f32(f32_to_f16_bits(float(v)))); };
  for (DType t : {DType::F16, DType::BF16, DType::Q8_0, DType::Q4_1, DType::Q6_K}) {
    for (bool trans_b : {true, false}) {
      if (!trans_b && t != DType::Q8_0 && t != DType::F16) continue;
      const std::string what = std::string(dtype_name(t)) + (trans_b ? " x·Wᵀ" : " x·W");
      Graph g;
      const NodeId x = g.input("x", {M, K});
      const NodeId w = g.parameter("w", trans_b ? Shape{N, K} : Shape{K, N}, t);
      g.set_outputs({g.named(g.matmul(x, w, false, trans_b), "y")});
      SessionConfig cfg = inference();
      cfg.precision = Precision::Mixed16;
      std::shared_ptr<runtime::Device> dev(&test::gpu_device(), [](runtime::Device*) {});
      Session s = build(g, cfg, dev);
      EXPECT_EQ(copies(s), 1u) << what;
      const std::vector<float> xv = test::random_vec(size_t(M * K), rng);
      std::vector<float> wv = test::random_vec(size_t(N * K), rng);
      for (size_t i = 0; i < wv.size(); ++i) wv[i] *= 1.0f + float((i / 16) % 5);
      const std::vector<std::byte> wb = to_storage(wv, t);
      wv = from_storage(wb.data(), wv.size(), t);
      s.set_input("x", xv);
      s.set_parameter_bytes("w", wb);
      s.run();
      const std::vector<float> got = s.read_output("y");
      ASSERT_EQ(got.size(), size_t(M * N)) << what;
      std::vector<double> xh(xv.size()), wh(wv.size());
      for (size_t i = 0; i < xv.size(); ++i) xh[i] = half(xv[i]);
      for (size_t i = 0; i < wv.size(); ++i) wh[i] = half(wv[i]);
      size_t bad = 0;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double want = 0, mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double p = xh[size_t(m * K + k)] * (trans_b ? wh[size_t(n * K + k)] : wh[size_t(k * N + n)]);
            want += p;
            mag += std::fabs(p);
          }
          const double gv = got[size_t(m * N + n)];
          if (!(std::fabs(gv - want) <= 2e-6 * mag + 1e-6) && bad++ < 5)
            ADD_FAILURE() << what << " [" << m << "," << n << "]: gpu " << gv << " vs reference " << want;
        }
      EXPECT_EQ(bad, 0u) << what;
      EXPECT_EQ(copies(build(g, inference(), dev)), 0u) << what << ": F32 keeps the loads";
    }
  }
  Graph decode;  // 16 rows of a wide weight: 2^27 multiply-adds, but the copy would cost a weight a step
  decode.set_outputs({decode.matmul(decode.input("x", {16, 512}), decode.parameter("w", {16384, 512}, DType::Q8_0),
                                    false, true)});
  SessionConfig cfg = inference();
  cfg.precision = Precision::Mixed16;
  std::shared_ptr<runtime::Device> dev(&test::gpu_device(), [](runtime::Device*) {});
  EXPECT_EQ(copies(build(decode, cfg, dev)), 0u) << "16 rows";
}

// Gather of quantized rows (a GGUF token_embd): each row dequantized on the GPU equals quant/'s dequantizer.
TEST_F(QuantGpu, GatherOfQuantizedRowsEqualsTheDequantizedTable) {
  std::mt19937 rng(43);
  for (DType t : kBlockTypes) {
    const int64_t V = 7, D = dtype_block_elems(t) == 32 ? 64 : 256;
    Graph g;
    const NodeId table = g.parameter("table", {V, D}, t);
    const NodeId idx = g.input("idx", {5}, DType::I32);
    g.set_outputs({g.named(g.embedding(table, idx), "rows")});
    Session s = session(g);
    const std::vector<std::byte> tb = random_blocks(t, size_t(V * D), rng);
    const std::vector<float> tv = dequantized(t, tb);
    const std::vector<int32_t> iv = {3, 0, 6, 3, 5};
    s.set_parameter_bytes("table", tb);
    s.set_input("idx", iv);
    s.run();
    const std::vector<float> got = s.read_output("rows");
    ASSERT_EQ(got.size(), size_t(5 * D));
    size_t bad = 0;
    for (size_t r = 0; r < iv.size(); ++r)
      for (int64_t d = 0; d < D; ++d)
        if (got[r * size_t(D) + size_t(d)] != tv[size_t(iv[r] * D + d)] && bad++ < 5)
          ADD_FAILURE() << dtype_name(t) << " row " << iv[r] << " [" << d << "]: gpu "
                        << got[r * size_t(D) + size_t(d)] << " vs reference " << tv[size_t(iv[r] * D + d)];
    EXPECT_EQ(bad, 0u) << dtype_name(t);
  }
}

// set_parameter quantizes on the host (quant::quantize), read_parameter dequantizes, set_parameter_bytes
// takes the blocks as they are (wrong sizes refused), and memory_summary counts the blocks' bytes.
TEST_F(QuantGpu, ParameterUploadReadBackAndMemorySummary) {
  std::mt19937 rng(44);
  Graph g;
  const NodeId x = g.input("x", {1, 64});
  const NodeId w = g.parameter("w", {96, 64}, DType::Q4_1);
  g.set_outputs({g.named(g.matmul(x, w, false, true), "y")});
  Session s = session(g);
  const std::vector<float> v = test::random_vec(96 * 64, rng);
  s.set_parameter("w", v);
  const std::vector<std::byte> blocks = to_storage(v, DType::Q4_1);
  EXPECT_EQ(blocks.size(), 96u * 2u * 20u);
  EXPECT_EQ(s.read_parameter("w"), dequantized(DType::Q4_1, blocks));
  const std::vector<std::byte> other = random_blocks(DType::Q4_1, 96 * 64, rng);
  s.set_parameter_bytes("w", other);
  EXPECT_EQ(s.read_parameter("w"), dequantized(DType::Q4_1, other));
  EXPECT_THROW(s.set_parameter_bytes("w", std::span(other).first(other.size() - 20)), SessionError);
  EXPECT_EQ(s.memory_summary().parameters, 96u * 64u / 32u * 20u);  // 3840 bytes, not 24576 in f32
}

// A tiny Llama whose GGUF-style storage mixes Q4_1 (embedding, tied head, attention), Q6_K (ffn_down, over an
// intermediate of 256) and f32 (norms, the other FFN weights): prefill then cached decode against the
// reference interpreter fed the dequantized weights, at every position.
TEST_F(QuantGpu, MixedQuantizedLlamaDecodeMatchesTheReference) {
  models::LlamaConfig c;
  c.vocab = 37;
  c.hidden = 32;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.intermediate = 256;
  c.rope_theta = 10000.0;
  c.max_context = 12;
  c.tensor_dtypes["token_embd.weight"] = DType::Q4_1;
  for (int l = 0; l < 2; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    for (const char* n : {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight"})
      c.tensor_dtypes[b + n] = DType::Q4_1;
    c.tensor_dtypes[b + "ffn_down.weight"] = DType::Q6_K;
  }
  auto w = models::llama_random_weights(c, 5);
  std::map<std::string, std::vector<std::byte>> bytes;
  for (auto& [name, v] : w) {
    const DType t = c.dtype_of(name);
    if (!is_quantized(t)) continue;
    for (float& x : v) x *= 4.0f;  // larger weights, so that quantization error is not below the tolerance
    bytes[name] = to_storage(v, t);
    v = dequantized(t, bytes[name]);
  }
  std::shared_ptr<runtime::Device> dev(&test::gpu_device(), [](runtime::Device*) {});
  Session prefill = build(models::build_llama(c, 1, 9).graph, inference(), dev);  // 9 rows: the scalar tiles
  Session decode = build(models::build_llama(c, 1, 1).graph, inference(), prefill);
  for (const auto& [name, v] : w) {
    if (bytes.count(name))
      prefill.set_parameter_bytes(name, bytes.at(name));
    else
      prefill.set_parameter(name, v);
  }
  std::mt19937 rng(9);
  std::vector<int32_t> seq;
  for (int i = 0; i < 12; ++i) seq.push_back(int32_t(rng() % uint32_t(c.vocab)));

  auto reference = [&](int64_t L) {
    const models::LlamaStep st = models::build_llama(c, 1, L);
    reference::Feeds f;
    for (const auto& [name, v] : w)
      f[name] =
          HostTensor(st.graph.node(*st.graph.find(name)).shape, std::vector<double>(v.begin(), v.end()));
    for (NodeId s : st.graph.states())
      f[st.graph.node(s).prov.name] = HostTensor(st.graph.node(s).shape, 0.0);
    f["tokens"] = HostTensor({1, L}, std::vector<double>(seq.begin(), seq.begin() + L));
    f["start"] = HostTensor({1}, 0.0);
    f["last"] = HostTensor({1}, double(L - 1));
    return reference::evaluate_outputs(st.graph, f)[0].data;
  };
  auto expect_close = [&](const std::vector<float>& got, const std::vector<double>& want,
                          const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (!(std::fabs(double(got[i]) - want[i]) <= 1e-4 * (1.0 + std::fabs(want[i]))) && bad++ < 5)
        ADD_FAILURE() << what << " [" << i << "]: gpu " << got[i] << " vs reference " << want[i];
    EXPECT_EQ(bad, 0u) << what;
  };
  prefill.set_input("tokens", std::vector<int32_t>(seq.begin(), seq.begin() + 9));
  prefill.set_input("start", std::vector<int32_t>{0});
  prefill.set_input("last", std::vector<int32_t>{8});
  prefill.run();
  expect_close(prefill.read_output("logits"), reference(9), "prefill of 9 tokens");
  for (int64_t pos = 9; pos < 12; ++pos) {
    decode.set_input("tokens", std::vector<int32_t>{seq[size_t(pos)]});
    decode.set_input("start", std::vector<int32_t>{int32_t(pos)});
    decode.set_input("last", std::vector<int32_t>{0});
    decode.run();
    expect_close(decode.read_output("logits"), reference(pos + 1),
                 "decode at position " + std::to_string(pos));
  }
  // The weights stay in block form (Q4_1: 20 bytes per 32 values; Q6_K 210 per 256), each buffer whole words.
  uint64_t want = 0;
  for (const auto& [name, shape] : models::llama_parameters(c))
    want += (storage_bytes(c.dtype_of(name), numel(shape)) + 3) / 4 * 4;
  EXPECT_EQ(prefill.memory_summary().parameters, want);
}
