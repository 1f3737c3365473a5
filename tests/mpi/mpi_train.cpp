// Launched by mpirun (tests/CMakeLists.txt, tests/mpi/run.sh): data-parallel training on the job's ranks
// against one process training on the whole global batch.
//
//   mpi_train [--optimizer sgd|adam] [--steps N] [--order ranked|mpi] [--bucket-bytes B]
//             [--die-at STEP] [--stall-at STEP] [--timeout S]
//
// Every rank trains an MLP for N steps with its shard of each global batch (LoaderOptions::rank/world) and
// gradients averaged inside step(); ranks other than 0 start from deliberately wrong parameters, so the run
// also proves the broadcast from rank 0. Then every rank checks that its parameters are bit-identical to rank
// 0's, and rank 0 trains the same model alone on the global batch (the same loader seed, batch size x world)
// and compares: max |distributed - single| / max |single| per parameter within 1e-6 (SGD) or 1e-5 (Adam).
// Prints PASS or FAIL lines; exit code 0 only when everything passed.
// --die-at / --stall-at: rank 1 exits (without MPI_Finalize) or sleeps forever before that step; the others
// must exit with an error within the collective timeout instead of hanging (exit code 3 from the job's
// abort).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "meganeura/meganeura.hpp"
#include "meganeura/train/session_target.hpp"

using namespace meganeura;

namespace {

constexpr int64_t kBatch = 4;  // per rank

Graph mlp(int64_t batch) {
  Graph g;
  const NodeId x = g.input("x", {batch, 6});
  NodeId h = g.tanh(g.add(g.matmul(x, g.parameter("w1", {6, 12})), g.parameter("b1", {12})));
  h = g.relu(g.add(g.matmul(h, g.parameter("w2", {12, 10})), g.parameter("b2", {10})));
  const NodeId z = g.add(g.matmul(h, g.parameter("w3", {10, 3})), g.parameter("b3", {3}));
  g.set_outputs({g.cross_entropy_loss(z, g.input("labels", {batch, 3}))});
  return g;
}

std::shared_ptr<TensorDataset> data(int64_t rows) {
  auto ds = std::make_shared<TensorDataset>();
  std::vector<float> x, y;
  for (int64_t i = 0; i < rows; ++i) {
    const int c = int(i % 3);
    for (int d = 0; d < 6; ++d)
      x.push_back((d % 3 == c ? 1.5f : 0.0f) + 0.5f * std::sin(0.37f * float(i) + 1.3f * d));
    for (int k = 0; k < 3; ++k) y.push_back(k == c ? 1.0f : 0.0f);
  }
  ds->add_f32("x", {6}, x);
  ds->add_f32("labels", {3}, y);
  return ds;
}

struct Args {
  std::string optimizer = "sgd", order = "ranked";
  int steps = 20, die_at = -1, stall_at = -1;
  uint64_t bucket_bytes = 64;  // several buckets even for this small model
  double timeout = 60;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) throw ConfigError("[mpi_train] expected a value after " + k + ", got none");
      return argv[++i];
    };
    if (k == "--optimizer")
      a.optimizer = val();
    else if (k == "--order")
      a.order = val();
    else if (k == "--steps")
      a.steps = std::stoi(val());
    else if (k == "--die-at")
      a.die_at = std::stoi(val());
    else if (k == "--stall-at")
      a.stall_at = std::stoi(val());
    else if (k == "--bucket-bytes")
      a.bucket_bytes = std::stoull(val());
    else if (k == "--timeout")
      a.timeout = std::stod(val());
    else
      throw ConfigError(
          "[mpi_train] expected --optimizer, --order, --steps, --die-at, --stall-at, --bucket-bytes "
          "or --timeout, got '" +
          k + "'");
  }
  return a;
}

Trainer make_trainer(const Args& a, int64_t batch, const dist::DistributedConfig& d) {
  SessionConfig c = SessionConfig::from_env();
  c.distributed = d;
  c.optimizer.kind = parse_optimizer(a.optimizer);
  c.optimizer.learning_rate = a.optimizer == "sgd" ? 0.1 : 0.01;
  TrainConfig t;
  t.batch_size = batch;
  t.epochs = 1;
  t.progress = ProgressMode::Off;
  t.seed = 7;
  return Trainer(build(mlp(batch), c), t);
}

DataLoader loader(int64_t rows, int64_t batch, int rank, int world) {
  LoaderOptions o;
  o.batch_size = batch;
  o.seed = 11;
  o.rank = rank;
  o.world = world;
  return DataLoader(data(rows), o);
}

uint64_t fnv(const std::vector<float>& v, uint64_t h) {
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * 4; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

int run(const Args& a) {
  dist::DistributedConfig d;
  d.comm = dist::Communicator::world();
  d.comm->set_timeout(a.timeout);
  d.order = a.order == "mpi" ? dist::ReduceOrder::Mpi : dist::ReduceOrder::Ranked;
  d.bucket_bytes = a.bucket_bytes;
  const int rank = d.rank(), world = d.size();
  const int64_t rows = int64_t(a.steps) * kBatch * world;

  Trainer tr = make_trainer(a, kBatch, d);
  tr.init_parameters();
  if (rank != 0)  // wrong on purpose: train() must replace them with rank 0's
    for (const TensorInfo& p : tr.target().parameters())
      tr.target().set_parameter(p.name, std::vector<float>(size_t(p.byte_size() / 4), 0.25f * float(rank)));
  tr.on_step([&](const StepEvent& e) {
    if (rank == 1 && e.step + 1 == a.die_at) {
      std::fprintf(stderr, "rank 1: exiting before step %d (--die-at)\n", a.die_at);
      dist::Communicator::die(9);
    }
    if (rank == 1 && e.step + 1 == a.stall_at) {
      std::fprintf(stderr, "rank 1: stalling before step %d (--stall-at)\n", a.stall_at);
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  });
  DataLoader ld = loader(rows, kBatch, rank, world);
  const History& h = tr.train(ld, 1);
  auto* target = dynamic_cast<SessionTarget*>(&tr.target());
  if (rank == 0 && target) std::printf("%s\n", target->session().distributed_stats().to_text().c_str());
  std::printf("rank %d: %lld steps, last loss %.6f\n", rank, static_cast<long long>(h.epochs.back().steps),
              h.epochs.back().train_loss);

  int failures = 0;
  // Bit-identical parameters on every rank.
  uint64_t mine = 1469598103934665603ull;
  std::vector<std::pair<std::string, std::vector<float>>> params;
  for (const TensorInfo& p : tr.target().parameters()) {
    params.emplace_back(p.name, tr.target().read_parameter(p.name));
    mine = fnv(params.back().second, mine);
  }
  uint64_t root = mine;
  d.comm->broadcast(&root, sizeof root, 0, "the parameter hash");
  const double differ = d.comm->sum(std::vector<double>{root != mine ? 1.0 : 0.0}, "the hash check")[0];
  if (rank == 0) {
    std::printf("%s: parameters bit-identical on all %d ranks (%d differ)\n", differ == 0 ? "PASS" : "FAIL",
                world, int(differ));
    failures += differ != 0;
  }

  if (rank == 0) {
    // One process, global batch: the oracle the ranks together must reproduce.
    Trainer single = make_trainer(a, kBatch * world, {});
    single.init_parameters();
    DataLoader ls = loader(rows, kBatch * world, 0, 1);
    single.train(ls, 1);
    const double tol = a.optimizer == "sgd" ? 1e-6 : 1e-5;
    double worst = 0;
    for (const auto& [name, got] : params) {
      const std::vector<float> want = single.target().read_parameter(name);
      double diff = 0, scale = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        diff = std::max(diff, double(std::fabs(got[i] - want[i])));
        scale = std::max(scale, double(std::fabs(want[i])));
      }
      const double rel = diff / std::max(scale, 1e-30);
      worst = std::max(worst, rel);
      if (!(rel <= tol)) {
        std::printf(
            "FAIL: parameter %s: max |distributed - single| / max |single| = %.3g, expected <= %.0e\n",
            name.c_str(), rel, tol);
        ++failures;
      }
    }
    // A run where nothing trained would match trivially: the parameters must have moved.
    Trainer fresh = make_trainer(a, kBatch * world, {});
    fresh.init_parameters();
    double moved = 0;
    for (const auto& [name, got] : params) {
      const std::vector<float> init = fresh.target().read_parameter(name);
      for (size_t i = 0; i < init.size(); ++i) moved = std::max(moved, double(std::fabs(got[i] - init[i])));
    }
    std::printf(
        "%s: %d ranks vs one process, %s, %d steps: worst relative difference %.3g (tolerance %.0e); "
        "parameters moved by up to %.3g\n",
        failures == 0 && moved > 1e-3 ? "PASS" : "FAIL", world, a.optimizer.c_str(), a.steps, worst, tol,
        moved);
    failures += moved <= 1e-3;
  }
  const double total = d.comm->sum(std::vector<double>{double(failures)}, "the verdict")[0];
  return total == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_train: %s\n", e.what());
    return 2;
  }
}
