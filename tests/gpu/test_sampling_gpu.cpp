// Op::Sample on the GPU and in the CPU reference: greedy against hand-written argmaxes (ties to the lowest
// id), GPU against reference token by token, and the distribution of 20 000 draws from one logit row against
// the formulas (softmax over the survivors of each filter, computed here independently) by chi-square, for
// temperature, top-k, top-p, min-p and repetition penalty. Draws are rows of one batch: the generator is a
// function of (seed, step, row, token), so every row is an independent draw.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "gpu_fixture.hpp"
#include "meganeura/meganeura.hpp"
#include "meganeura/ops/sample.hpp"
#include "meganeura/reference/interpreter.hpp"

using namespace meganeura;

namespace {

class Sampling : public test::GpuTest {};

struct Rows {
  int64_t n = 0, v = 0;
  std::vector<float> logits, seen, params;
  std::vector<int32_t> rng;
};

struct Params {
  double temperature = 1.0, top_k = 0, top_p = 1.0, min_p = 0.0, penalty = 1.0;
};

// n copies of one row (logits, seen) with one set of parameters, seed and step.
Rows repeat(const std::vector<float>& logits, const std::vector<float>& seen, const Params& p, int64_t n,
            uint64_t seed, int32_t step = 0) {
  Rows r;
  r.n = n;
  r.v = int64_t(logits.size());
  for (int64_t i = 0; i < n; ++i) {
    r.logits.insert(r.logits.end(), logits.begin(), logits.end());
    r.seen.insert(r.seen.end(), seen.begin(), seen.end());
    r.params.insert(r.params.end(),
                    {float(p.temperature), float(p.top_k), float(p.top_p), float(p.min_p), float(p.penalty)});
    r.rng.insert(r.rng.end(), {int32_t(uint32_t(seed)), int32_t(uint32_t(seed >> 32)), step});
  }
  return r;
}

Graph sample_graph(int64_t n, int64_t v) {
  Graph g;
  const NodeId l = g.input("logits", {n, v});
  const NodeId s = g.input("seen", {n, v});
  const NodeId p = g.input("params", {n, ops::kSampleParams});
  const NodeId r = g.input("rng", {n, ops::kSampleRng}, DType::I32);
  g.set_outputs({g.named(g.sample(l, s, p, r), "token")});
  return g;
}

SessionConfig inference() {
  SessionConfig cfg = test::gpu_config();
  cfg.training = false;
  cfg.optimizer.kind = OptimizerKind::None;
  cfg.dump_plan.clear();
  return cfg;
}

std::vector<int> gpu_sample(const Rows& r) {
  std::shared_ptr<runtime::Device> dev(&test::gpu_device(), [](runtime::Device*) {});
  Session s = build(sample_graph(r.n, r.v), inference(), dev);
  s.set_input("logits", r.logits);
  s.set_input("seen", r.seen);
  s.set_input("params", r.params);
  s.set_input("rng", r.rng);
  s.run();
  const std::vector<float> t = s.read_output("token");
  return std::vector<int>(t.begin(), t.end());
}

std::vector<int> reference_sample(const Rows& r) {
  const Graph g = sample_graph(r.n, r.v);
  reference::Feeds f;
  f["logits"] = HostTensor({r.n, r.v}, std::vector<double>(r.logits.begin(), r.logits.end()));
  f["seen"] = HostTensor({r.n, r.v}, std::vector<double>(r.seen.begin(), r.seen.end()));
  f["params"] = HostTensor({r.n, ops::kSampleParams}, std::vector<double>(r.params.begin(), r.params.end()));
  f["rng"] = HostTensor({r.n, ops::kSampleRng}, std::vector<double>(r.rng.begin(), r.rng.end()));
  const std::vector<double> t = reference::evaluate_outputs(g, f)[0].data;
  return std::vector<int>(t.begin(), t.end());
}

// The distribution the rules define, written out here: penalty, temperature, then the filters on a sorted
// copy.
std::vector<double> expected_distribution(const std::vector<float>& logits, const std::vector<float>& seen,
                                          const Params& p) {
  const size_t V = logits.size();
  std::vector<double> z(V);
  for (size_t i = 0; i < V; ++i) {
    double x = logits[i];
    if (seen[i] > 0) x = x < 0 ? x * p.penalty : x / p.penalty;
    z[i] = x / p.temperature;
  }
  std::vector<size_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return z[a] > z[b]; });
  std::vector<char> keep(V, 1);
  if (p.top_k > 0)
    for (size_t r = size_t(p.top_k); r < V; ++r) keep[order[r]] = 0;  // (no ties in these rows)
  const double m = z[order[0]];
  if (p.top_p < 1) {
    double total = 0, cum = 0;
    for (size_t i = 0; i < V; ++i)
      if (keep[i]) total += std::exp(z[i] - m);
    bool reached = false;
    for (size_t r = 0; r < V; ++r) {
      const size_t i = order[r];
      if (!keep[i]) continue;
      if (reached) keep[i] = 0;
      cum += std::exp(z[i] - m);
      if (cum >= p.top_p * total) reached = true;
    }
  }
  if (p.min_p > 0)
    for (size_t i = 0; i < V; ++i)
      if (std::exp(z[i] - m) < p.min_p) keep[i] = 0;
  std::vector<double> prob(V, 0.0);
  double s = 0;
  for (size_t i = 0; i < V; ++i)
    if (keep[i]) s += prob[i] = std::exp(z[i] - m);
  for (double& x : prob) x /= s;
  return prob;
}

// Chi-square of the counts against `prob` over its support, against the 0.999 quantile; draws outside the
// support fail outright.
void expect_distribution(const std::vector<int>& draws, const std::vector<double>& prob,
                         const std::string& what) {
  std::vector<double> count(prob.size(), 0.0);
  for (int t : draws) {
    ASSERT_TRUE(t >= 0 && size_t(t) < prob.size()) << what << ": token " << t;
    count[size_t(t)] += 1;
  }
  double chi2 = 0;
  int support = 0;
  for (size_t i = 0; i < prob.size(); ++i) {
    if (prob[i] == 0) {
      EXPECT_EQ(count[i], 0) << what << ": token " << i << " is filtered out but was drawn";
      continue;
    }
    ++support;
    const double e = prob[i] * double(draws.size());
    chi2 += (count[i] - e) * (count[i] - e) / e;
  }
  // chi-square 0.999 quantiles for 1..7 degrees of freedom
  const double q999[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32};
  ASSERT_GE(support, 2) << what;
  ASSERT_LE(support, 8) << what;
  EXPECT_LT(chi2, q999[support - 1]) << what << ": chi-square " << chi2 << " over " << support << " tokens";
}

const std::vector<float> kRow = {1.0f, 2.2f, -0.5f, 0.3f, 1.7f, -1.2f, 0.9f, 0.0f};
const std::vector<float> kNone(8, 0.0f);

void check_distribution(const Params& p, const std::vector<float>& seen, const std::string& what,
                        uint64_t seed) {
  const Rows r = repeat(kRow, seen, p, 20000, seed);
  const std::vector<double> prob = expected_distribution(kRow, seen, p);
  const std::vector<int> gpu = gpu_sample(r);
  expect_distribution(gpu, prob, what + " (GPU)");
  expect_distribution(reference_sample(r), prob, what + " (reference)");
}

}  // namespace

// Greedy: the first maximum wins (lowest id among equal logits), after the repetition penalty.
TEST_F(Sampling, GreedyIsTheFirstArgmaxOfThePenalisedLogits) {
  Rows r;
  r.n = 4;
  r.v = 5;
  r.logits = {0.5f,  3.0f,  3.0f,  -1.0f, 2.0f,    // tie between 1 and 2: 1
              -2.0f, -1.0f, -1.0f, -3.0f, -1.0f,   // three-way tie: 1
              1.0f,  4.0f,  2.5f,  0.0f,  3.0f,    // 1 penalised 4 -> 2 (r = 2): 4 wins with 3
              -1.0f, -0.2f, -0.5f, -3.0f, -4.0f};  // 1 penalised -0.2 -> -0.6 (r = 3): 2 wins with -0.5
  r.seen = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0};
  r.params = {0, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 0, 1, 0, 2, -1, 0, 1, 0, 3};
  r.rng = std::vector<int32_t>(12, 7);
  const std::vector<int> want = {1, 1, 4, 2};
  EXPECT_EQ(gpu_sample(r), want);
  EXPECT_EQ(reference_sample(r), want);
}

// Random rows and parameters: the GPU draws the reference's token (f32 against float64 may differ where two
// Gumbel scores or a threshold sit within rounding of each other: at most 1 % of rows).
TEST_F(Sampling, GpuDrawsTheReferenceTokens) {
  std::mt19937 rng(3);
  Rows r;
  r.n = 400;
  r.v = 300;
  std::uniform_real_distribution<float> u(-3.0f, 3.0f), u01(0.0f, 1.0f);
  for (int64_t i = 0; i < r.n; ++i) {
    for (int64_t j = 0; j < r.v; ++j) {
      r.logits.push_back(u(rng));
      r.seen.push_back(rng() % 4 == 0 ? 1.0f : 0.0f);
    }
    const int kind = int(i % 5);
    r.params.insert(r.params.end(),
                    {kind == 0 ? 0.0f : 0.5f + u01(rng), kind == 1 ? float(1 + rng() % 40) : 0.0f,
                     kind == 2 ? 0.2f + 0.7f * u01(rng) : 1.0f, kind == 3 ? 0.3f * u01(rng) : 0.0f,
                     kind == 4 ? 1.0f + u01(rng) : 1.0f});
    r.rng.insert(r.rng.end(), {int32_t(rng()), int32_t(rng()), int32_t(i)});
  }
  const std::vector<int> gpu = gpu_sample(r), ref = reference_sample(r);
  int differ = 0;
  for (int64_t i = 0; i < r.n; ++i) differ += gpu[size_t(i)] != ref[size_t(i)];
  EXPECT_LE(differ, 4) << "rows where the GPU's token differs from the reference's";
}

TEST_F(Sampling, TemperatureDrawsFollowTheSoftmax) {
  Params p;
  p.temperature = 1.0;
  check_distribution(p, kNone, "temperature 1", 11);
  p.temperature = 0.6;
  check_distribution(p, kNone, "temperature 0.6", 12);
}

TEST_F(Sampling, TopKDrawsFollowTheRenormalisedSoftmax) {
  Params p;
  p.temperature = 0.8;
  p.top_k = 3;
  check_distribution(p, kNone, "top-k 3", 13);
}

TEST_F(Sampling, TopPDrawsFollowTheRenormalisedSoftmax) {
  Params p;
  p.top_p = 0.8;
  check_distribution(p, kNone, "top-p 0.8", 14);
  p.top_k = 4;  // top-p over the top-k survivors
  p.top_p = 0.7;
  check_distribution(p, kNone, "top-k 4 then top-p 0.7", 15);
}

TEST_F(Sampling, MinPDrawsFollowTheRenormalisedSoftmax) {
  Params p;
  p.temperature = 0.9;
  p.min_p = 0.2;
  check_distribution(p, kNone, "min-p 0.2", 16);
}

TEST_F(Sampling, RepetitionPenaltyDrawsFollowThePenalisedSoftmax) {
  Params p;
  p.penalty = 1.8;
  const std::vector<float> seen = {0, 1, 1, 0, 1, 0, 0, 0};  // a positive, a negative and the top logit
  check_distribution(p, seen, "repetition penalty 1.8", 17);
}

// Draws are a function of (seed, step, row): the same inputs give the same tokens, another seed or step
// others.
TEST_F(Sampling, DrawsAreDeterministicForASeed) {
  Params p;
  const Rows a = repeat(kRow, kNone, p, 2000, 42), b = repeat(kRow, kNone, p, 2000, 43),
             c = repeat(kRow, kNone, p, 2000, 42, 1), d = repeat(kRow, kNone, p, 2000, 42ull | (1ull << 40));
  const std::vector<int> ta = gpu_sample(a);
  EXPECT_EQ(gpu_sample(a), ta);
  EXPECT_EQ(reference_sample(a), ta);
  auto same = [&](const std::vector<int>& x) {
    size_t k = 0;
    for (size_t i = 0; i < x.size(); ++i) k += x[i] == ta[i];
    return k;
  };
  // independent draws agree on about Σp² ≈ 27 % of rows; far from all of them
  EXPECT_LT(same(gpu_sample(b)), 1000u) << "another seed";
  EXPECT_LT(same(gpu_sample(c)), 1000u) << "another step";
  EXPECT_LT(same(gpu_sample(d)), 1000u) << "another high half of the seed";
}

TEST(SamplingShapes, BadOperandsAreShapeErrors) {
  Graph g;
  const NodeId l = g.input("logits", {2, 5});
  const NodeId s = g.input("seen", {2, 5});
  const NodeId p = g.input("params", {2, 5});
  const NodeId r = g.input("rng", {2, 3}, DType::I32);
  EXPECT_THROW(g.sample(l, s, p, g.input("rng_f", {2, 3})), ShapeError);
  EXPECT_THROW(g.sample(l, s, g.input("params4", {2, 4}), r), ShapeError);
  EXPECT_THROW(g.sample(l, g.input("seen3", {2, 3}), p, r), ShapeError);
  EXPECT_THROW(g.sample(g.input("flat", {10}), s, p, r), ShapeError);
  EXPECT_NO_THROW(g.sample(l, s, p, r));
}
