// The training front end of `meganeura train` and the mnist example (one recipe, cli/train.hpp): the README's
// MLP or the small CNN on Fashion-MNIST (IDX files), with the optimizers, schedules, clipping and
// accumulation of SessionConfig/TrainConfig, checkpoints (--save), --resume and data-parallel --distributed.
#include "train.hpp"

#include <cstdio>
#include <filesystem>
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

namespace meganeura::cli {
namespace {

struct Options {
  std::string model = "mlp";
  int epochs = 1;
  int64_t batch = 32;
  std::string optimizer = "adam";
  double lr = 0;  // 0: 0.1 for SGD, 2e-3 for the Adam family (docs/training.md)
  double momentum = 0, weight_decay = 0, clip = 0;
  std::string schedule = "cosine";
  int64_t warmup = 0;
  int accum = 1;
  std::string data = kDefaultMnistDir;
  uint64_t seed = 0;
  int64_t limit = 0;
  std::string history, save, resume, progress = "auto";
  bool json = false, distributed = false;
  Precision precision = Precision::F32;
};

// The logits; parameter names are what checkpoints hold, so the evaluation graph and a resumed run agree.
NodeId logits_of(Graph& g, const std::string& model, int64_t batch, uint64_t seed) {
  const NodeId x = g.input("x", {batch, 784});
  if (model == "mlp") {
    const NodeId h = g.relu(g.add(g.matmul(x, g.parameter("w1", {784, 128})), g.parameter("b1", {128})));
    return g.named(g.add(g.matmul(h, g.parameter("w2", {128, 10})), g.parameter("b2", {10})), "logits");
  }
  nn::Context ctx(g, seed);
  return g.named(examples::cnn_logits(g, ctx, x, batch), "logits");
}

ProgressMode progress_mode(const std::string& s) {
  if (s == "bar") return ProgressMode::Bar;
  if (s == "lines") return ProgressMode::Lines;
  if (s == "off") return ProgressMode::Off;
  return ProgressMode::Auto;
}

int train(const Options& o) {
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
  const NodeId logits = logits_of(g, o.model, o.batch, o.seed);
  g.set_outputs({g.cross_entropy_loss(logits, g.input("labels", {o.batch, 10}))});
  Graph eval_graph;
  eval_graph.set_outputs({logits_of(eval_graph, o.model, o.batch, o.seed)});

  cfg.training = true;
  cfg.precision = o.precision;
  cfg.seed = o.seed;
  cfg.optimizer.kind = parse_optimizer(o.optimizer);
  cfg.optimizer.learning_rate = o.lr > 0 ? o.lr : (cfg.optimizer.kind == OptimizerKind::Sgd ? 0.1 : 2e-3);
  cfg.optimizer.momentum = o.momentum;
  cfg.optimizer.weight_decay = o.weight_decay;
  cfg.optimizer.clip_grad_norm = o.clip;
  cfg.optimizer.grad_accumulation = o.accum;

  TrainConfig tc;
  tc.epochs = o.epochs;
  tc.batch_size = o.batch;
  tc.schedule.kind = parse_schedule(o.schedule);
  tc.schedule.warmup_steps = o.warmup;
  tc.seed = o.seed;
  tc.log_interval = 200;
  tc.progress = o.json && o.progress == "auto" ? ProgressMode::Off : progress_mode(o.progress);

  Session session = build(g, cfg);
  const std::string device = session.caps().name;
  Trainer trainer(std::move(session), tc);
  int done = 0;
  if (!o.resume.empty()) {
    const RestoreReport r = trainer.restore(o.resume);
    done = std::stoi(trainer.metadata().at("epochs_done"));
    if (o.json)
      json_line(nlohmann::json{{"event", "resumed"},
                               {"checkpoint", o.resume},
                               {"epochs_done", done},
                               {"parameters", r.parameters},
                               {"optimizer_state", r.optimizer_state}}
                    .dump());
    else
      std::fprintf(stderr, "resumed %s: %d epoch(s) done, %zu parameters, %zu optimizer tensors\n",
                   o.resume.c_str(), done, r.parameters, r.optimizer_state);
  } else {
    trainer.init_parameters();  // the recipe's measured initialisation (docs/training.md), seeded by --seed
  }
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
  if (o.json && rank == 0) {  // the other ranks of a distributed run train quietly
    trainer.on_step([&](const StepEvent& e) {
      if ((e.step_in_epoch + 1) % tc.log_interval != 0) return;
      json_line(nlohmann::json{
          {"event", "step"}, {"epoch", e.epoch + 1}, {"step", e.step}, {"loss", e.loss}, {"lr", e.lr}}
                    .dump());
    });
    trainer.on_epoch_end([&](const EpochRecord& r) {
      nlohmann::json j{{"event", "epoch"},
                       {"epoch", r.epoch + 1},
                       {"epochs", o.epochs},
                       {"train_loss", r.train_loss},
                       {"steps", r.steps},
                       {"seconds", r.seconds},
                       {"steps_per_s", r.steps_per_s}};
      if (r.test_loss) j["test_loss"] = *r.test_loss;
      if (r.test_accuracy) j["test_accuracy"] = *r.test_accuracy;
      json_line(j.dump());
    });
  }
  const int remaining = o.epochs - done;
  if (remaining <= 0) {
    if (o.json)
      json_line(nlohmann::json{{"event", "done"}, {"epochs_done", done}, {"epochs_trained", 0}}.dump());
    else
      std::printf("nothing to train: the checkpoint has %d of --epochs %d done\n", done, o.epochs);
    return 0;
  }
  const History& h = trainer.train(train_loader, remaining);
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
    json_line(nlohmann::json{
        {"event", "done"},
        {"model", o.model},
        {"device", device},
        {"precision", precision_name(o.precision)},
        {"epochs_done", done + static_cast<int>(h.epochs.size())},
        {"epochs_trained", h.epochs.size()},
        {"epochs", done + static_cast<int>(h.epochs.size())},
        {"ranks", world},
        {"test_loss", last.loss},
        {"test_accuracy", last.accuracy},
        {"steps_per_s", steps_per_s},
        {"checkpoint",
         o.save}}.dump());
  } else {
    std::printf("%s on %s: test accuracy %.4f, test loss %.4f after %d epoch(s), %.1f steps/s%s%s\n",
                o.model.c_str(), device.c_str(), last.accuracy, last.loss,
                done + static_cast<int>(h.epochs.size()), steps_per_s, o.save.empty() ? "" : ", saved ",
                o.save.c_str());
    if (world > 1)
      std::printf("%d ranks, global batch %lld; %s\n", world, static_cast<long long>(o.batch * world),
                  train_session.distributed_stats().to_text().c_str());
  }
  return 0;
}

}  // namespace

int train_main(int argc, char** argv) {
  Options o;
  const std::string program = argv[0];
  Flags f(
      program,
      "Trains the README's two-layer MLP (784-128-10) or a small CNN on Fashion-MNIST and reports the test\n"
      "accuracy after every epoch. Progress (steps/s, ETA) is a bar on a terminal and plain lines "
      "otherwise.");
  f.choice("--model", o.model, {"mlp", "cnn"}, "the recipe");
  f.option("--epochs", o.epochs, "epochs in all (a resumed run trains the ones the checkpoint lacks)");
  f.option("--batch", o.batch, "batch size");
  f.choice("--optimizer", o.optimizer, {"sgd", "adam", "adamw", "laprop"}, "update rule");
  f.option("--lr", o.lr, "learning rate (0: 0.1 for sgd, 2e-3 for the Adam family)");
  f.option("--momentum", o.momentum, "SGD momentum");
  f.option("--weight-decay", o.weight_decay, "weight decay");
  f.choice("--schedule", o.schedule, {"constant", "step", "cosine"}, "learning-rate schedule over --epochs");
  f.option("--warmup", o.warmup, "linear warm-up steps");
  f.option("--clip", o.clip, "clip gradients by global norm (0: off)");
  f.option("--accum", o.accum, "micro-batches per update (gradient accumulation)");
  f.precision(o.precision);
  f.option("--data", o.data, "folder with the Fashion-MNIST (or MNIST) IDX files", "DIR");
  f.option("--seed", o.seed, "initialisation and shuffling seed");
  f.option("--limit", o.limit, "train on the first N images only (0: all)");
  f.option("--history", o.history, "write the loss history (.json, .csv or .svg)", "FILE");
  f.option("--save", o.save, "write a checkpoint (parameters, optimizer state, epochs done) at the end",
           "FILE");
  f.option("--resume", o.resume, "continue from a checkpoint written by --save (same model and optimizer)",
           "FILE");
  f.choice("--progress", o.progress, {"auto", "bar", "lines", "off"},
           "progress on stderr (auto: a bar on a terminal)");
  f.flag("--json", o.json,
         "one JSON object per line on stdout (resumed, step, epoch, done events); no progress bar");
  f.flag(
      "--distributed", o.distributed,
      "data-parallel under mpirun: --batch is each rank's (docs/distributed.md); rank 0 reports and saves");
  f.epilog("example: " + program + " --model cnn --epochs 3 --save cnn.ckpt && " + program +
           " --model cnn --epochs 5 --resume cnn.ckpt");
  return run(f, argc, argv, [&] {
    if (o.epochs < 1)
      throw UsageError("[" + program + "] expected --epochs >= 1, got " + std::to_string(o.epochs));
    if (o.batch < 1)
      throw UsageError("[" + program + "] expected --batch >= 1, got " + std::to_string(o.batch));
    return train(o);
  });
}

}  // namespace meganeura::cli
