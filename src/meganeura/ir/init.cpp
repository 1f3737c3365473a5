#include "meganeura/ir/init.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "meganeura/core/error.hpp"

namespace meganeura {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ULL;
  return h;
}

struct Rng {
  uint64_t state;
  double uniform() { return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {
    double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log1p(-u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }
};

bool looks_like_norm_scale(const std::string& name) {
  for (const char* key : {"norm", "gamma", "scale", "ln"})
    if (name.find(key) != std::string::npos) return true;
  return false;
}

}  // namespace

std::vector<float> initialise(Init init, size_t count, int64_t fan_in, int64_t fan_out, double std,
                              uint64_t seed, const std::string& name) {
  std::vector<float> out(count);
  Rng rng{seed ^ fnv1a(name)};
  const double fi = static_cast<double>(std::max<int64_t>(fan_in, 1));
  const double fo = static_cast<double>(std::max<int64_t>(fan_out, 1));
  auto fill_uniform = [&](double bound) {
    for (auto& v : out) v = static_cast<float>((2.0 * rng.uniform() - 1.0) * bound);
  };
  auto fill_normal = [&](double s) {
    for (auto& v : out) v = static_cast<float>(rng.normal() * s);
  };
  switch (init) {
    case Init::Default:
      throw GraphError("[initialise] expected an explicit rule for '" + name + "', got Init::Default");
    case Init::Zeros: break;
    case Init::Ones: std::fill(out.begin(), out.end(), 1.0f); break;
    case Init::KaimingUniform: fill_uniform(std::sqrt(6.0 / fi)); break;
    case Init::KaimingNormal: fill_normal(std::sqrt(2.0 / fi)); break;
    case Init::XavierUniform: fill_uniform(std::sqrt(6.0 / (fi + fo))); break;
    case Init::XavierNormal: fill_normal(std::sqrt(2.0 / (fi + fo))); break;
    case Init::Normal: fill_normal(std); break;
  }
  return out;
}

std::vector<float> initial_values(const std::string& name, const std::vector<int64_t>& shape,
                                  const ParamInit& init, uint64_t seed) {
  size_t count = 1;
  for (int64_t d : shape) count *= static_cast<size_t>(d);
  const uint64_t s = init.seed.value_or(seed);
  if (init.rule != Init::Default)
    return initialise(init.rule, count, init.fan_in, init.fan_out, init.std, s, name);
  if (shape.size() <= 1)
    return initialise(looks_like_norm_scale(name) ? Init::Ones : Init::Zeros, count, 1, 1, 1, s, name);
  // x @ w with w [in, out]: fan-in is the first axis; conv weights [out, in, kh, kw]: all but the first.
  int64_t fan_in = shape[0];
  if (shape.size() > 2) {
    fan_in = 1;
    for (size_t i = 1; i < shape.size(); ++i) fan_in *= shape[i];
  }
  std::vector<float> out(count);
  Rng rng{s ^ fnv1a(name)};
  const double bound = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(fan_in, 1)));
  for (auto& v : out) v = static_cast<float>((2.0 * rng.uniform() - 1.0) * bound);
  return out;
}

}  // namespace meganeura
