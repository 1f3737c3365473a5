// Trains the README's two-layer MLP (784-128-10, batch 32) — or a small CNN with --model cnn — on
// Fashion-MNIST and reports test accuracy. `--json` ends the output with one JSON line.
// `mpirun -np N mnist --distributed ...` trains data-parallel: --batch is each rank's, the global batch N
// times it (docs/distributed.md); rank 0 prints and saves.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "flags.hpp"
#include "meganeura/data/loader.hpp"
#include "meganeura/meganeura.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/train/session_target.hpp"
#include "meganeura/train/trainer.hpp"
#include "models.hpp"

using namespace meganeura;

namespace {

struct Options {
  int epochs = 1;
  int64_t batch = 32;
  std::string optimizer = "adam";
  double lr = 0;  // 0: 0.1 for SGD, 2e-3 for the Adam family (docs/training.md has the measurements)
  double momentum = 0;
  double weight_decay = 0;
  std::string schedule = "cosine";
  int64_t warmup = 0;
  double clip = 0;
  int accum = 1;
  std::string data = kDefaultMnistDir;
  std::string model = "mlp";
  uint64_t seed = 0;
  int64_t limit = 0;  // use only the first N training images (quick runs)
  bool json = false;
  std::string history, save;
  bool distributed = false;
  Precision precision = Precision::F32;
};

// Fills `o` from the command line; false when --help was asked.
void add_flags(cli::Flags& f, Options& o) {
  f.option("--epochs", o.epochs, "epochs to train");
  f.option("--batch", o.batch, "batch size");
  f.choice("--optimizer", o.optimizer, {"sgd", "adam", "adamw", "laprop"}, "update rule");
  f.option("--lr", o.lr, "learning rate (0: 0.1 for sgd, 2e-3 for the Adam family)");
  f.option("--momentum", o.momentum, "SGD momentum");
  f.option("--weight-decay", o.weight_decay, "weight decay");
  f.choice("--schedule", o.schedule, {"constant", "step", "cosine"}, "learning-rate schedule");
  f.option("--warmup", o.warmup, "linear warm-up steps");
  f.option("--clip", o.clip, "clip gradients by global norm (0: off)");
  f.option("--accum", o.accum, "micro-batches per update");
  f.choice("--model", o.model, {"mlp", "cnn"}, "the model");
  f.precision(o.precision);
  f.option("--data", o.data, "folder with the IDX files", "DIR");
  f.option("--seed", o.seed, "initialisation and shuffling seed");
  f.option("--limit", o.limit, "train on the first N images only (0: all)");
  f.option("--history", o.history, "loss history (.json, .csv or .svg)", "FILE");
  f.option("--save", o.save, "checkpoint at the end", "FILE");
  f.flag("--json", o.json, "end with one JSON line");
  f.flag("--distributed", o.distributed, "data-parallel under mpirun (docs/distributed.md)");
  f.epilog("`meganeura train` runs the same recipes with --resume and JSON events.");
}

// Returns the logits; the parameters are named so that checkpoints and the eval graph agree.
NodeId build_model(Graph& g, const std::string& model, int64_t batch) {
  const NodeId x = g.input("x", {batch, 784});
  if (model == "mlp") {
    const NodeId h = g.relu(g.add(g.matmul(x, g.parameter("w1", {784, 128})), g.parameter("b1", {128})));
    return g.named(g.add(g.matmul(h, g.parameter("w2", {128, 10})), g.parameter("b2", {10})), "logits");
  }
  // The CNN's parameters take Trainer::init_parameters' values (by name and shape), not the nn layers' own.
  nn::Context ctx(g);
  return g.named(examples::cnn_logits(g, ctx, x, batch), "logits");
}

int run(const Options& o) {
  ImageSet train_set = load_mnist(o.data, Split::Train);
  const ImageSet test_set = load_mnist(o.data, Split::Test);
  if (o.limit > 0 && o.limit < train_set.count) {
    train_set.count = o.limit;
    train_set.images.resize(static_cast<size_t>(o.limit * 784));
    train_set.labels.resize(static_cast<size_t>(o.limit));
  }
  auto train_data = std::make_shared<TensorDataset>(to_dataset(train_set, LabelEncoding::OneHot));
  auto test_data = std::make_shared<TensorDataset>(to_dataset(test_set, LabelEncoding::OneHot));
  SessionConfig cfg = SessionConfig::from_env();
  if (o.distributed && !cfg.distributed.comm) cfg.distributed.comm = dist::Communicator::world();
  const int rank = cfg.distributed.rank(), world = cfg.distributed.size();
  DataLoader train_loader(train_data, {.batch_size = o.batch,
                                       .shuffle = true,
                                       .seed = o.seed,
                                       .drop_last = true,
                                       .rank = rank,
                                       .world = world});
  DataLoader test_loader(test_data, {.batch_size = o.batch, .shuffle = false, .seed = 0, .drop_last = false});

  Graph g;
  const NodeId logits = build_model(g, o.model, o.batch);
  const NodeId labels = g.input("labels", {o.batch, 10});
  g.set_outputs({g.cross_entropy_loss(logits, labels)});
  Graph eval_graph;
  eval_graph.set_outputs({build_model(eval_graph, o.model, o.batch)});

  OptimizerConfig opt;
  opt.kind = parse_optimizer(o.optimizer);
  opt.learning_rate = o.lr > 0 ? o.lr : (opt.kind == OptimizerKind::Sgd ? 0.1 : 2e-3);
  opt.momentum = o.momentum;
  opt.weight_decay = o.weight_decay;
  opt.clip_grad_norm = o.clip;
  opt.grad_accumulation = o.accum;
  cfg.training = true;
  cfg.optimizer = opt;
  cfg.precision = o.precision;

  TrainConfig tc;
  tc.epochs = o.epochs;
  tc.batch_size = o.batch;
  tc.schedule.kind = parse_schedule(o.schedule);
  tc.schedule.warmup_steps = o.warmup;
  tc.seed = o.seed;
  tc.log_interval = 200;

  Session session = build(g, cfg);
  const std::string device = session.caps().name;
  Trainer trainer(std::move(session), tc);
  trainer.init_parameters();
  auto& train_session = static_cast<SessionTarget&>(trainer.target()).session();
  SessionConfig eval_cfg = cfg;  // on the training session's device (a rank's own GPU)
  eval_cfg.training = false;
  eval_cfg.optimizer.kind = OptimizerKind::None;
  Session eval = build(eval_graph, eval_cfg, train_session);
  EvalResult last;
  trainer.set_evaluator([&] {
    for (const TensorInfo& p : parameter_infos(eval.graph()))
      eval.set_parameter(p.name, train_session.read_parameter(p.name));
    last = evaluate(eval, test_loader);
    return last;
  });
  const History& h = trainer.train(train_loader, o.epochs);
  if (!o.save.empty()) trainer.save(o.save);  // rank 0 writes, the others wait for it
  if (rank != 0) return 0;                    // every rank trained and evaluated; rank 0 reports
  if (!o.history.empty()) h.save(o.history);
  int64_t steps = 0;
  double seconds = 0;
  for (const EpochRecord& e : h.epochs) {
    steps += e.steps;
    seconds += e.seconds;
  }
  const double steps_per_s = seconds > 0 ? static_cast<double>(steps) / seconds : 0.0;
  if (o.json) {
    nlohmann::json j = {{"test_accuracy", last.accuracy},
                        {"epochs", static_cast<int>(h.epochs.size())},
                        {"steps_per_s", steps_per_s},
                        {"device", device},
                        {"ranks", world}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s on %s: test accuracy %.4f, test loss %.4f after %zu epoch(s), %.1f steps/s\n",
                o.model.c_str(), device.c_str(), last.accuracy, last.loss, h.epochs.size(), steps_per_s);
    if (world > 1)
      std::printf("%d ranks, global batch %lld; %s\n", world, static_cast<long long>(o.batch * world),
                  train_session.distributed_stats().to_text().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  cli::Flags f("mnist",
               "Trains the README's MLP (or a small CNN) on Fashion-MNIST and reports the test accuracy.");
  add_flags(f, o);
  return cli::run(f, argc, argv, [&] { return run(o); });
}
