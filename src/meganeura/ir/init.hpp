#pragma once
// How a parameter gets its first values when a session is built (SessionConfig::init): the rule its layer
// chose (nn layers record one with Graph::set_init), or the default rule for a bare Graph::parameter.
// Values depend only on (seed, parameter name, shape), never on creation order, and come from our own
// generator rather than <random>'s distributions, whose output differs between standard libraries.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace meganeura {

enum class Init : uint8_t {
  Default,  // rank >= 2: U(-b, b), b = 1/sqrt(fan_in) as torch.nn.Linear (fan_in: the first axis of a
            // [in, out] matrix, all but the first of a conv weight); rank <= 1: ones for names that look
            // like a norm scale (norm, gamma, scale, ln), else zeros
  Zeros,
  Ones,
  KaimingUniform,  // U(-b, b), b = sqrt(6 / fan_in): for layers followed by ReLU
  KaimingNormal,   // N(0, 2 / fan_in)
  XavierUniform,   // U(-b, b), b = sqrt(6 / (fan_in + fan_out))
  XavierNormal,    // N(0, 2 / (fan_in + fan_out))
  Normal,          // N(0, std^2)
};

struct ParamInit {
  Init rule = Init::Default;
  int64_t fan_in = 1, fan_out = 1;
  double std = 1.0;
  std::optional<uint64_t> seed;  // the layer's (nn::Context's); unset: the session's SessionConfig::seed
};

// Host values for `count` elements under an explicit rule (Default: GraphError, it needs the shape);
// deterministic in (seed, name).
std::vector<float> initialise(Init init, size_t count, int64_t fan_in, int64_t fan_out, double std,
                              uint64_t seed, const std::string& name);

// A parameter's first values: `init`'s rule (Default resolved from the shape and name), seeded by init.seed
// or else `seed`.
std::vector<float> initial_values(const std::string& name, const std::vector<int64_t>& shape,
                                  const ParamInit& init, uint64_t seed);

}  // namespace meganeura
