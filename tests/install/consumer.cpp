// Links against an installed meganeura and uses it without a GPU: the README's MLP as a graph, its first
// parameter's default initial values, a checkpoint round trip through a host store, and SessionConfig.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "meganeura/meganeura.hpp"

int main(int argc, char** argv) {
  using namespace meganeura;
  Graph g;
  const NodeId x = g.input("x", {32, 784});
  const NodeId labels = g.input("labels", {32, 10});
  const NodeId w1 = g.parameter("w1", {784, 128});
  const NodeId h = g.relu(g.matmul(x, w1));
  const NodeId logits = g.matmul(h, g.parameter("w2", {128, 10}));
  g.set_outputs({g.cross_entropy_loss(logits, labels)});
  const std::vector<float> w = initial_values("w1", g.node(w1).shape, g.init_of(w1), 0);
  float max_abs = 0;
  for (float v : w) max_abs = std::max(max_abs, std::abs(v));
  MemoryStore store;
  store.add_f32("w1", {784, 128}, w);
  const std::string path = (std::filesystem::temp_directory_path() / "meganeura_consumer.ckpt").string();
  save_checkpoint(path, store);
  const CheckpointContents c = inspect_checkpoint(path);
  std::filesystem::remove(path);
  const SessionConfig config;
  std::printf(
      "%s: %zu nodes, %zu parameters, |w1| <= %.4f, checkpoint v%u with %zu tensor(s), precision %s\n",
      argc > 0 ? argv[0] : "consumer", g.size(), g.parameters().size(), max_abs, c.version, c.entries.size(),
      precision_name(config.precision));
  // U(+-1/sqrt(784)): the bound is 1/28.
  return g.parameters().size() == 2 && max_abs > 0.03f && max_abs <= 1.0f / 28.0f && c.entries.size() == 1
             ? 0
             : 1;
}
