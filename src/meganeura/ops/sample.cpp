// Token sampling: Sample(logits [B, V], seen [B, V], params f32 [B, 5], rng i32 [B, 3]) → i32 [B], one token
// id per row (ops/sample.hpp has the parameter layout and the generator). Per row, in this order (that of
// Hugging Face's logits processors):
//   z = logits, with the repetition penalty r on tokens whose seen entry is > 0 (z < 0 ? z·r : z/r);
//   temperature <= 0: the argmax of z, the lowest id among equal maxima (greedy);
//   else z /= temperature, then a token survives the filters that are on:
//     top-k   z >= the k-th largest z (ties at that value survive);
//     top-p   among the top-k survivors, z >= t where t is the largest value whose set {z >= t} holds at
//     least
//             p of their probability (the smallest top set reaching p, ties kept);
//     min-p   exp(z - max z) >= min_p;
//   and the draw is Gumbel-max: the survivor with the largest z - log(-log(u)), u = the (seed, step, row,
//   token) uniform, so P(v) = exp(z_v) / Σ exp(z) over survivors. Not differentiable.
#include <algorithm>
#include <cmath>

#include "meganeura/ir/storage.hpp"
#include "meganeura/ops/helpers.hpp"
#include "meganeura/ops/sample.hpp"

namespace meganeura::ops {

namespace {

TypeInfo sample_shape(const ShapeCtx& c) {
  const Shape& l = c.shape(0);
  if (l.size() != 2 || l[0] <= 0 || l[1] <= 0)
    c.fail("logits of shape [batch, vocab]", "logits " + shape_str(l));
  if (!is_float(c.dtype(0))) c.fail("float logits", std::string(dtype_name(c.dtype(0))) + " logits");
  if (c.shape(1) != l || !is_float(c.dtype(1)))
    c.fail("a float seen mask of the logits' shape " + shape_str(l),
           std::string(dtype_name(c.dtype(1))) + " seen " + shape_str(c.shape(1)));
  if (c.shape(2) != Shape{l[0], kSampleParams} || c.dtype(2) != DType::F32)
    c.fail("f32 params [" + std::to_string(l[0]) + ", " + std::to_string(kSampleParams) + "]",
           std::string(dtype_name(c.dtype(2))) + " params " + shape_str(c.shape(2)));
  if (c.shape(3) != Shape{l[0], kSampleRng} || c.dtype(3) != DType::I32)
    c.fail("i32 rng [" + std::to_string(l[0]) + ", " + std::to_string(kSampleRng) + "]",
           std::string(dtype_name(c.dtype(3))) + " rng " + shape_str(c.shape(3)));
  return {{l[0]}, DType::I32};
}

HostTensor sample_ref(const Node& n, const std::vector<const HostTensor*>& in) {
  const HostTensor &logits = *in[0], &seen = *in[1], &params = *in[2], &rng = *in[3];
  const int64_t B = logits.shape[0], V = logits.shape[1];
  HostTensor out(n.shape);
  std::vector<double> z(size_t(V), 0.0);
  std::vector<char> keep(size_t(V), 1);
  for (int64_t b = 0; b < B; ++b) {
    const double* p = &params.data[size_t(b * kSampleParams)];
    const double temperature = p[kTemperature], top_k = p[kTopK], top_p = p[kTopP], min_p = p[kMinP],
                 penalty = p[kPenalty];
    for (int64_t v = 0; v < V; ++v) {
      double x = logits.data[size_t(b * V + v)];
      if (penalty != 1.0 && seen.data[size_t(b * V + v)] > 0.0) x = x < 0.0 ? x * penalty : x / penalty;
      z[size_t(v)] = x;
    }
    if (!(temperature > 0.0)) {
      out.data[size_t(b)] = double(std::max_element(z.begin(), z.end()) - z.begin());  // first maximum
      continue;
    }
    for (double& x : z) x /= temperature;
    const double m = *std::max_element(z.begin(), z.end());
    std::vector<double> sorted(z);
    // NaN first (as the GPU's order-preserving keys put it), so the order is total; the token is then
    // unspecified
    std::sort(sorted.begin(), sorted.end(),
              [](double a, double b) { return a > b || (std::isnan(a) && !std::isnan(b)); });
    double t = -INFINITY;
    if (top_k >= 1.0 && top_k < double(V)) t = sorted[size_t(top_k) - 1];
    if (top_p < 1.0) {
      double total = 0.0, cum = 0.0;
      for (double x : sorted)
        if (x >= t) total += std::exp(x - m);
      for (double x : sorted) {
        if (x < t) break;
        cum += std::exp(x - m);
        if (cum >= top_p * total) {
          t = std::max(t, x);
          break;
        }
      }
    }
    if (min_p > 0.0) t = std::max(t, m + std::log(min_p));
    const uint32_t key = sample_key(i32_bits(rng.data[size_t(b * kSampleRng + kSeedLo)]),
                                    i32_bits(rng.data[size_t(b * kSampleRng + kSeedHi)]),
                                    i32_bits(rng.data[size_t(b * kSampleRng + kStep)]), uint32_t(b));
    int64_t best = -1;
    double best_score = 0.0;
    for (int64_t v = 0; v < V; ++v) {
      if (!(z[size_t(v)] >= t)) continue;
      const double u = (double(sample_bits(key, uint32_t(v))) + 0.5) / 8388608.0;
      const double s = z[size_t(v)] - std::log(-std::log(u));
      if (best < 0 || s > best_score) {
        best = v;
        best_score = s;
      }
    }
    out.data[size_t(b)] = double(std::max<int64_t>(best, 0));
  }
  return out;
}

}  // namespace

void register_sample(OpTable& t) { t.add({Op::Sample, 4, sample_shape, nullptr, sample_ref, nullptr}); }

}  // namespace meganeura::ops
