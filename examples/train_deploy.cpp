// Train with an optimizer, save a checkpoint, reload it into a fresh inference session (no gradient or
// optimizer buffers), check that its predictions are identical, and print the test accuracy.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "flags.hpp"
#include "meganeura/data/loader.hpp"
#include "meganeura/meganeura.hpp"
#include "meganeura/train/session_target.hpp"
#include "meganeura/train/trainer.hpp"

using namespace meganeura;

namespace {

constexpr int64_t kBatch = 32;

NodeId mlp(Graph& g) {
  const NodeId x = g.input("x", {kBatch, 784});
  const NodeId h = g.relu(g.matmul(x, g.parameter("w1", {784, 128})));
  return g.named(g.matmul(h, g.parameter("w2", {128, 10})), "logits");
}

// Logits of every test batch, concatenated (the short last batch padded, as evaluate() does).
std::vector<float> all_logits(Session& s, DataLoader& test) {
  std::vector<float> out;
  test.start_epoch(0);
  while (auto b = test.next()) {
    std::vector<float> x = b->at("x").f32;
    x.resize(static_cast<size_t>(kBatch * 784), 0.0f);
    s.set_input("x", x);
    s.run();
    const std::vector<float> z = s.read_output(0);
    out.insert(out.end(), z.begin(), z.begin() + b->rows * 10);
  }
  return out;
}

int run(std::string data, std::string path, int epochs, int64_t limit) {
  if (path.empty()) path = (std::filesystem::temp_directory_path() / "meganeura-train-deploy.ckpt").string();

  ImageSet train_set = load_mnist(data, Split::Train);
  if (limit > 0 && limit < train_set.count) {
    train_set.count = limit;
    train_set.images.resize(static_cast<size_t>(limit * 784));
    train_set.labels.resize(static_cast<size_t>(limit));
  }
  auto train_data = std::make_shared<TensorDataset>(to_dataset(train_set, LabelEncoding::OneHot));
  auto test_data =
      std::make_shared<TensorDataset>(to_dataset(load_mnist(data, Split::Test), LabelEncoding::OneHot));
  DataLoader train_loader(train_data, {.batch_size = kBatch, .shuffle = true, .seed = 1});
  DataLoader test_loader(test_data, {.batch_size = kBatch, .shuffle = false, .seed = 0, .drop_last = false});

  Graph g;
  const NodeId logits = mlp(g);
  g.set_outputs({g.cross_entropy_loss(logits, g.input("labels", {kBatch, 10}))});
  SessionConfig cfg = SessionConfig::from_env();
  cfg.training = true;
  cfg.optimizer.kind = OptimizerKind::Adam;
  cfg.optimizer.learning_rate = 1e-3;
  TrainConfig tc;
  tc.epochs = epochs;
  tc.batch_size = kBatch;
  Trainer trainer(build(g, cfg), tc);
  trainer.init_parameters();
  trainer.train(train_loader, epochs);
  trainer.save(path);
  std::printf("saved %s (%zu tensors, parameters and optimizer state)\n", path.c_str(),
              inspect_checkpoint(path).entries.size());

  // The deployed model: a fresh inference session, parameters from the checkpoint only.
  Graph eval_graph;
  eval_graph.set_outputs({mlp(eval_graph)});
  Session deployed = build_inference_session(eval_graph);
  SessionStore store(deployed);
  const RestoreReport r = restore_checkpoint(path, store);
  const MemorySummary mem = deployed.memory_summary();
  std::printf(
      "restored %zu parameters (%zu optimizer tensors skipped); inference memory: %llu B parameters, "
      "%llu B gradients, %llu B optimizer state\n",
      r.parameters, r.skipped_optimizer_state, static_cast<unsigned long long>(mem.parameters),
      static_cast<unsigned long long>(mem.gradients), static_cast<unsigned long long>(mem.optimizer_state));
  if (mem.gradients != 0 || mem.optimizer_state != 0)
    throw SessionError("[train_deploy] expected an inference session without gradient or optimizer buffers");

  // The reference: a second inference session fed the trained parameters straight from the trainer.
  Session reference = build_inference_session(eval_graph);
  auto& trained = static_cast<SessionTarget&>(trainer.target()).session();
  for (const TensorInfo& p : parameter_infos(eval_graph))
    reference.set_parameter(p.name, trained.read_parameter(p.name));
  const std::vector<float> a = all_logits(reference, test_loader), b = all_logits(deployed, test_loader);
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
  if (a.size() != b.size() || differ != 0)
    throw SessionError("[train_deploy] expected identical predictions after reload, got " +
                       std::to_string(differ) + " differing logits of " + std::to_string(a.size()));
  const EvalResult acc = evaluate(deployed, test_loader);
  std::printf("identical predictions on %lld test images; test accuracy %.4f\n",
              static_cast<long long>(acc.examples), acc.accuracy);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string data = kDefaultMnistDir, path;
  int epochs = 1;
  int64_t limit = 0;
  cli::Flags f("train_deploy",
               "Trains the MLP with Adam, saves a checkpoint, reloads it into a fresh inference session\n"
               "and checks that its predictions are identical.");
  f.option("--data", data, "folder with the Fashion-MNIST IDX files", "DIR");
  f.option("--epochs", epochs, "epochs to train");
  f.option("--limit", limit, "train on the first N images only (0: all)");
  f.option("--checkpoint", path, "where to save (default: a file in the temporary folder)", "FILE");
  return cli::run(f, argc, argv, [&] { return run(data, path, epochs, limit); });
}
