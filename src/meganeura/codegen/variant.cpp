// Kernel variants: their text form and the tuner's search space (variant.hpp).
#include "meganeura/codegen/variant.hpp"

#include <sstream>

#include "meganeura/codegen/codegen.hpp"
#include "meganeura/core/error.hpp"

namespace meganeura {

std::string KernelVariant::to_string() const {
  if (is_default()) return "default";
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : " ") + part; };
  if (workgroup) add("wg=" + std::to_string(workgroup));
  if (per_thread) add("per=" + std::to_string(per_thread));
  if (tier) add(std::string("tier=") + kernels::tier_name(*tier));
  if (!tile.empty()) add("tile=" + tile);
  if (split) add("split=" + std::to_string(split));
  return s;
}

KernelVariant KernelVariant::parse(const std::string& text) {
  KernelVariant v;
  if (text == "default") return v;
  auto bad = [&](const std::string& why) -> ConfigError {
    return ConfigError(
        "[KernelVariant::parse] expected 'default' or space-separated wg=N, per=N, tier=NAME, "
        "tile=BMxBNxBK/WMxWN or 128|64|16, split=N, got '" +
        text + "' (" + why + ")");
  };
  std::istringstream in(text);
  std::string part;
  bool any = false;
  while (in >> part) {
    const size_t eq = part.find('=');
    if (eq == std::string::npos) throw bad("no '=' in '" + part + "'");
    const std::string key = part.substr(0, eq), value = part.substr(eq + 1);
    auto number = [&]() -> uint32_t {
      if (value.empty() || value.size() > 9 || value.find_first_not_of("0123456789") != std::string::npos)
        throw bad(key + " is not a positive number");
      const uint32_t n = uint32_t(std::stoul(value));
      if (n == 0) throw bad(key + " is 0");
      return n;
    };
    if (key == "wg")
      v.workgroup = number();
    else if (key == "per")
      v.per_thread = number();
    else if (key == "tier") {
      try {
        v.tier = kernels::parse_tier(value);
      } catch (const ConfigError&) {
        throw bad("unknown tier '" + value + "'");
      }
    } else if (key == "tile") {
      try {
        const bool scalar = value == "128" || value == "64" || value == "16";
        v.tile = scalar ? value : kernels::CoopMatTile::parse(value).to_string();
      } catch (const ConfigError&) {
        throw bad("bad tile '" + value + "'");
      }
    } else if (key == "split") {
      v.split = number();
    } else {
      throw bad("unknown key '" + key + "'");
    }
    any = true;
  }
  if (!any) throw bad("empty");
  return v;
}

bool tunable(Archetype a) {
  switch (a) {
    case Archetype::Pointwise:
    case Archetype::RowReduce:
    case Archetype::MatMul:
    case Archetype::Copy:
    case Archetype::Gather:
    case Archetype::Optimizer:
    case Archetype::Accumulate: return true;
    default: return false;
  }
}

std::vector<KernelVariant> tune_candidates(const Graph& g, const KernelGraph& kg, size_t kernel,
                                           const runtime::DeviceCaps& caps, const CodegenOptions& options) {
  const Kernel& k = kg.kernels.at(kernel);
  std::vector<KernelVariant> out{KernelVariant{}};
  auto wg_only = [](uint32_t wg, uint32_t per = 0) {
    KernelVariant v;
    v.workgroup = wg;
    v.per_thread = per;
    return v;
  };
  auto matmul = [](kernels::MatmulTier tier, const std::string& tile = "") {
    KernelVariant v;
    v.tier = tier;
    v.tile = tile;
    v.split = tier == kernels::MatmulTier::Gemv ? 0 : 1;
    return v;
  };
  if (!tunable(k.arch)) return out;
  const uint32_t max_x = caps.max_workgroup_size[0] ? caps.max_workgroup_size[0] : 1024;
  const uint32_t max_inv = caps.max_workgroup_invocations ? caps.max_workgroup_invocations : 1024;
  auto fits = [&](uint32_t wg) { return wg <= max_x && wg <= max_inv; };
  switch (k.arch) {
    case Archetype::Pointwise:
      for (uint32_t wg : {64u, 128u, 256u, 512u})
        for (uint32_t per : {1u, 2u, 4u, 8u})
          if (fits(wg)) out.push_back(wg_only(wg, per));
      break;
    case Archetype::RowReduce:
      for (uint32_t wg : {32u, 64u, 128u, 256u, 512u})
        if (fits(wg)) out.push_back(wg_only(wg));
      break;
    case Archetype::Copy:
    case Archetype::Gather:
    case Archetype::Optimizer:
    case Archetype::Accumulate:
      for (uint32_t wg : {64u, 128u, 256u, 512u})
        if (fits(wg)) out.push_back(wg_only(wg));
      break;
    case Archetype::MatMul: {
      const Shape& os = g.node(k.core).shape;
      const int64_t m = os.size() >= 2 ? os[os.size() - 2] : 1;
      if (m <= 8) out.push_back(matmul(kernels::MatmulTier::Gemv));
      for (const char* tile : {"128", "64", "16"}) out.push_back(matmul(kernels::MatmulTier::Scalar, tile));
      const kernels::MatmulTier best = options.matmul_best;
      if ((best == kernels::MatmulTier::CoopMatNV || best == kernels::MatmulTier::CoopMatKHR) &&
          options.precision == Precision::Mixed16) {
        for (const char* tile : {"128x128x32/2x4", "128x128x32/2x4/d2", "64x128x32/2x4", "128x64x32/4x2",
                                 "64x64x32/2x4", "128x256x32/4x4/g4/s1"})
          out.push_back(matmul(best, tile));
      }
      break;
    }
    default: break;
  }
  return out;
}

}  // namespace meganeura
