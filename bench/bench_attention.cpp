// Attention forward against its backward, per layer (issue 29 item 3: the backward within 2x of the forward
// at S = 128 .. 2048, head dims 64 and 128). One causal scaled_dot_product_attention over parameters q [B,
// Hq, S, D], k, v [B, Hkv, S, D] (SmolLM2's 9 query heads over 3 KV heads by default), loss sum(out * r) with
// r an input, trained with SGD at learning rate 0 (the step computes every gradient and changes nothing).
// Each dispatch is timed alone (Session::profile); the attention kernels are split by phase: the forward
// (which the backward needs for its log-sum-exp) against the backward phase's attention kernels (dQ, dK/dV
// parts and their sum). One JSON line per (S, D): fwd_ms, bwd_ms, bwd_over_fwd, and the families.
//   bench_attention                                    S = 128,512,1024,2048 x D = 64,128
//   bench_attention --seqs 16 --dims 8 --iters 2       smoke test (lavapipe)
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meganeura/runtime/device.hpp"
#include "meganeura/session/session.hpp"

using namespace meganeura;

namespace {

std::vector<int64_t> int_list(const std::string& v) {
  std::vector<int64_t> out;
  std::stringstream ss(v);
  for (std::string x; std::getline(ss, x, ',');) out.push_back(std::stoll(x));
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  std::vector<int64_t> seqs{128, 512, 1024, 2048}, dims{64, 128};
  int64_t batch = 1, heads = 9, kv_heads = 3;
  int iters = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) throw ConfigError("[bench_attention] expected a value after " + a);
    const std::string v = argv[++i];
    if (a == "--seqs")
      seqs = int_list(v);
    else if (a == "--dims")
      dims = int_list(v);
    else if (a == "--batch")
      batch = std::stoll(v);
    else if (a == "--heads")
      heads = std::stoll(v);
    else if (a == "--kv-heads")
      kv_heads = std::stoll(v);
    else if (a == "--iters")
      iters = std::stoi(v);
    else
      throw ConfigError("[bench_attention] unknown option " + a);
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto random = [&](size_t n) {
    std::vector<float> x(n);
    for (float& e : x) e = uni(rng);
    return x;
  };
  for (int64_t S : seqs) {
    for (int64_t D : dims) {
      Graph g;
      const NodeId q = g.parameter("q", {batch, heads, S, D});
      const NodeId k = g.parameter("k", {batch, kv_heads, S, D});
      const NodeId v = g.parameter("v", {batch, kv_heads, S, D});
      const NodeId r = g.input("r", {batch, heads, S, D});
      const NodeId out = g.scaled_dot_product_attention(q, k, v, true);
      g.set_outputs({g.named(g.sum(g.mul(out, r)), "loss")});
      SessionConfig c = SessionConfig::from_env();
      c.gpu_timing = true;
      c.optimizer.kind = OptimizerKind::Sgd;
      c.optimizer.learning_rate = 0.0;
      Session s = build(g, c);
      s.set_parameter("q", random(size_t(batch * heads * S * D)));
      s.set_parameter("k", random(size_t(batch * kv_heads * S * D)));
      s.set_parameter("v", random(size_t(batch * kv_heads * S * D)));
      s.set_input("r", random(size_t(batch * heads * S * D)));
      ProfileOptions po;
      po.warmup = 2;
      po.iterations = iters;
      const nlohmann::json p = nlohmann::json::parse(s.profile(po));
      double fwd = 0, bwd = 0;
      nlohmann::json fam = nlohmann::json::array();
      for (const auto& d : p["dispatches"]) {
        const std::string family = d["family"];
        const double ms = d["median_ns"].get<double>() * 1e-6;
        if (family.rfind("attention", 0) != 0) continue;
        (d["phase"] == "forward" ? fwd : bwd) += ms;
      }
      for (const auto& f : p["families"])
        fam.push_back({f["family"], f["dispatches"], f["median_ns_total"].get<double>() * 1e-6});
      const nlohmann::json line = {{"bench", "attention"},
                                   {"device", s.caps().name},
                                   {"batch", batch},
                                   {"heads", heads},
                                   {"kv_heads", kv_heads},
                                   {"seq", S},
                                   {"dim", D},
                                   {"fwd_ms", fwd},
                                   {"bwd_ms", bwd},
                                   {"bwd_over_fwd", fwd > 0 ? bwd / fwd : 0.0},
                                   {"families", fam}};
      std::printf("%s\n", line.dump().c_str());
      std::fflush(stdout);
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
