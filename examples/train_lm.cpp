// Trains a decoder-only transformer language model (nn::CausalLm: RMSNorm, rotary attention with grouped KV
// heads, SwiGLU) on bytes of a text, one process or data-parallel under MPI, and reports throughput.
//
//   train_lm [--text FILE] [--steps N] [--batch B] [--seq S] [--layers L] [--dim D] [--heads H] [--kv-heads
//   K]
//            [--lr X] [--precision f32|mixed16] [--smollm2] [--warmup N] [--distributed] [--json]
//   mpirun -np 2 train_lm --distributed --steps 50
//
// Tokens are bytes (vocabulary 256) unless --smollm2, which takes SmolLM2-135M's configuration (vocabulary
// 49152, 30 blocks of 576) over random token ids: the configuration of the scaling benchmark
// (scripts/device/mpi-scaling.sh).
// --batch is per rank: the global batch is B x ranks, and rank r trains on the r-th B windows of every global
// batch. Prints the loss every 10 steps and, at the end, tokens/s over the steps after --warmup and the
// all-reduce figures (Session::distributed_stats); --json: one JSON line instead.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meganeura/meganeura.hpp"
#include "meganeura/nn/nn.hpp"
#include "meganeura/runtime/device.hpp"

using namespace meganeura;

namespace {

struct Options {
  std::string text;
  int steps = 60, warmup = 5;
  int64_t batch = 4, seq = 32;
  nn::CausalLmConfig model{
      .vocab = 256, .dim = 64, .layers = 2, .heads = 4, .kv_heads = 2, .ffn_hidden = 128};
  double lr = 3e-3;
  std::string precision = "f32";
  bool smollm2 = false, distributed = false, json = false;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw ConfigError("[train_lm] expected a value after " + a + ", got none");
      return argv[++i];
    };
    if (a == "--text")
      o.text = value();
    else if (a == "--steps")
      o.steps = std::stoi(value());
    else if (a == "--warmup")
      o.warmup = std::stoi(value());
    else if (a == "--batch")
      o.batch = std::stoll(value());
    else if (a == "--seq")
      o.seq = std::stoll(value());
    else if (a == "--layers")
      o.model.layers = std::stoll(value());
    else if (a == "--dim")
      o.model.dim = std::stoll(value());
    else if (a == "--heads")
      o.model.heads = std::stoll(value());
    else if (a == "--kv-heads")
      o.model.kv_heads = std::stoll(value());
    else if (a == "--lr")
      o.lr = std::stod(value());
    else if (a == "--precision")
      o.precision = value();
    else if (a == "--smollm2")
      o.smollm2 = true;
    else if (a == "--distributed")
      o.distributed = true;
    else if (a == "--json")
      o.json = true;
    else
      throw ConfigError("[train_lm] unknown option '" + a + "' (see the comment at the top of train_lm.cpp)");
  }
  if (o.smollm2) {
    const int64_t layers = o.model.layers == 2 ? 30 : o.model.layers;  // --layers still shortens it
    o.model = nn::CausalLmConfig::smollm2_135m();
    o.model.layers = layers;
  }
  if (o.precision != "f32" && o.precision != "mixed16")
    throw ConfigError("[train_lm] expected --precision f32 or mixed16, got " + o.precision);
  if (o.steps <= o.warmup) throw ConfigError("[train_lm] expected --steps above --warmup");
  o.model.ffn_hidden = o.smollm2 ? o.model.ffn_hidden : 2 * o.model.dim;
  return o;
}

// A built-in text (when no --text): a few sentences repeated with variations, enough for the loss to fall.
std::string default_text() {
  const char* words[] = {"the",  "model", "learns", "to",  "predict", "the",    "next", "byte", "of",
                         "a",    "text",  "from",   "the", "bytes",   "before", "it",   "and",  "every",
                         "rank", "sees",  "its",    "own", "share",   "of",     "each", "batch"};
  std::string t;
  std::mt19937 rng(5);
  for (int s = 0; s < 400; ++s) {
    const size_t start = rng() % 12, len = 6 + rng() % 10;
    for (size_t w = 0; w < len; ++w) t += std::string(w ? " " : "") + words[(start + w) % 26];
    t += ". ";
  }
  return t;
}

int run(const Options& o) {
  SessionConfig cfg = SessionConfig::from_env();
  if (o.distributed && !cfg.distributed.comm) cfg.distributed.comm = dist::Communicator::world();
  const int rank = cfg.distributed.rank(), world = cfg.distributed.size();
  cfg.training = true;
  cfg.precision = o.precision == "mixed16" ? Precision::Mixed16 : Precision::F32;
  cfg.optimizer.kind = OptimizerKind::AdamW;
  cfg.optimizer.learning_rate = o.lr;
  cfg.optimizer.weight_decay = 0.01;

  std::string text = default_text();
  if (!o.text.empty()) {
    std::ifstream f(o.text, std::ios::binary);
    if (!f) throw DataError("[train_lm] expected a readable --text file, got '" + o.text + "'");
    std::stringstream ss;
    ss << f.rdbuf();
    text = ss.str();
  }
  if (int64_t(text.size()) < o.seq + 2)
    throw DataError("[train_lm] expected a text longer than --seq + 1 bytes, got " +
                    std::to_string(text.size()));

  const int64_t B = o.batch, S = o.seq, V = o.model.vocab;
  Graph g;
  nn::Context ctx(g, 42);  // the same seeded initial weights on every rank (rank 0's are broadcast anyway)
  nn::CausalLm lm(ctx, "", o.model);
  const NodeId logits = lm(g.input("tokens", {B, S}, DType::I32));
  const NodeId flat = g.reshape(logits, {B * S, V});
  g.set_outputs({g.named(g.cross_entropy_loss_index(flat, g.input("labels", {B * S}, DType::I32)), "loss")});
  Session session = build(g, cfg);
  for (const auto& [name, w] : ctx.weights()) session.set_parameter(name, w);
  session.broadcast_parameters(0);

  // Window starts of global batch `step`: the same generator on every rank; rank r takes windows [rB,
  // (r+1)B).
  std::vector<int32_t> tokens(size_t(B * S)), labels(size_t(B * S));
  auto fill = [&](int step) {
    std::mt19937_64 rng(1000003ull * uint64_t(step) + 17);
    for (int64_t w = 0; w < B * world; ++w) {
      const uint64_t r = rng();
      if (w / B != rank) continue;
      const int64_t row = w % B;
      const uint64_t start = r % uint64_t(int64_t(text.size()) - S - 1);
      for (int64_t t = 0; t < S; ++t) {
        const size_t at = size_t(row * S + t);
        if (o.smollm2) {  // random ids: throughput only
          tokens[at] = int32_t(((r >> 7) + uint64_t(t) * 2654435761u) % uint64_t(V));
          labels[at] = int32_t((uint64_t(tokens[at]) * 40503u + uint64_t(t)) % uint64_t(V));
          continue;
        }
        tokens[at] = int32_t(uint8_t(text[start + size_t(t)]));
        labels[at] = int32_t(uint8_t(text[start + size_t(t) + 1]));
      }
    }
  };
  using clock = std::chrono::steady_clock;
  clock::time_point t0 = clock::now();
  double first_loss = 0, loss = 0;
  const DistributedStats before_warm = session.distributed_stats();
  DistributedStats at_warm = before_warm;
  for (int step = 0; step < o.steps; ++step) {
    if (step == o.warmup) {
      session.wait();
      t0 = clock::now();
      at_warm = session.distributed_stats();
    }
    fill(step);
    session.set_input("tokens", tokens);
    session.set_input("labels", labels);
    session.step();
    if (step == 0 || step % 10 == 9 || step == o.steps - 1) {
      loss = session.read_output("loss")[0];
      if (world > 1) loss = cfg.distributed.comm->mean(loss, "the loss");
      if (step == 0) first_loss = loss;
      if (rank == 0 && !o.json) std::printf("step %d: loss %.4f\n", step + 1, loss);
    }
  }
  session.wait();
  const double seconds = std::chrono::duration<double>(clock::now() - t0).count();
  const int timed = o.steps - o.warmup;
  const double tokens_per_s = double(timed) * double(B * S * world) / seconds;
  DistributedStats d = session.distributed_stats();
  d.steps -= at_warm.steps;
  d.step_s -= at_warm.step_s;
  d.backward_s -= at_warm.backward_s;
  d.reduce_s -= at_warm.reduce_s;
  d.exposed_s -= at_warm.exposed_s;
  if (rank != 0) return 0;
  if (o.json) {
    const double n = double(std::max<uint64_t>(d.steps, 1));
    nlohmann::json j = {{"ranks", world},
                        {"batch_per_rank", B},
                        {"seq", S},
                        {"layers", o.model.layers},
                        {"precision", o.precision},
                        {"device", session.caps().name},
                        {"step_ms", 1e3 * seconds / timed},
                        {"tokens_per_s", tokens_per_s},
                        {"first_loss", first_loss},
                        {"last_loss", loss},
                        {"buckets", d.buckets},
                        {"gradient_mib", double(d.bytes) / (1 << 20)},
                        {"allreduce_ms", 1e3 * d.reduce_s / n},
                        {"exposed_ms", 1e3 * d.exposed_s / n},
                        {"backward_ms", 1e3 * d.backward_s / n},
                        {"hidden_fraction", d.hidden_fraction()}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf(
        "%d rank(s), global batch %lld x %lld tokens: %.0f tokens/s (%.1f ms a step), loss %.4f -> %.4f\n",
        world, static_cast<long long>(B * world), static_cast<long long>(S), tokens_per_s,
        1e3 * seconds / timed, first_loss, loss);
    if (world > 1) std::printf("%s\n", d.to_text().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_lm: %s\n", e.what());
    return 1;
  }
}
