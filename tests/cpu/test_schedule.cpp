// Scheduling into archetypes: kernel counts and the fusion rules, device-free.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "meganeura/autodiff/autodiff.hpp"
#include "meganeura/schedule/schedule.hpp"

using namespace meganeura;

namespace {

struct Mlp {
  Graph g;
  NodeId x, labels, w1, w2, h, logits, loss;
  Mlp() {
    x = g.input("x", {32, 784});
    labels = g.input("labels", {32, 10});
    w1 = g.parameter("w1", {784, 128});
    h = g.relu(g.matmul(x, w1));
    w2 = g.parameter("w2", {128, 10});
    logits = g.matmul(h, w2);
    loss = g.cross_entropy_loss(logits, labels);
    g.set_outputs({loss});
  }
};

std::vector<Archetype> archetypes(const KernelGraph& kg) {
  std::vector<Archetype> a;
  for (const Kernel& k : kg.kernels) a.push_back(k.arch);
  return a;
}

const Kernel& kernel_writing(const KernelGraph& kg, NodeId n) {
  for (const Kernel& k : kg.kernels)
    if (k.root == n) return k;
  throw std::runtime_error("no kernel writes node " + std::to_string(n.v));
}

}  // namespace

TEST(Schedule, MlpForwardIsThreeKernels) {
  // x·w1 with relu as its epilogue (the matmul has one consumer in a forward graph), h·w2, and the
  // cross-entropy row reduction that also takes the batch mean: 3 dispatches.
  Mlp m;
  KernelGraph kg = schedule(m.g, {m.loss});
  ASSERT_EQ(kg.kernels.size(), 3u) << kg.to_text(m.g);
  EXPECT_EQ(archetypes(kg),
            (std::vector<Archetype>{Archetype::MatMul, Archetype::MatMul, Archetype::RowReduce}));
  EXPECT_EQ(kernel_writing(kg, m.h).core, m.g.node(m.h).inputs[0]);
  // Levels follow dependencies: each kernel needs the previous one.
  EXPECT_EQ(kg.kernels[0].level, 0);
  EXPECT_EQ(kg.kernels[1].level, 1);
  EXPECT_EQ(kg.kernels[2].level, 2);
}

TEST(Schedule, MlpTrainingStepIsNineKernels) {
  //   forward: x·w1 with relu as its epilogue (relu's backward mask reads relu's output, so the matmul's
  //            result has one consumer), h·w2, cross-entropy                                   = 3
  //   backward: softmax(logits) with the (p - targets)·scale epilogue (one row kernel), hᵀ·dlogits,
  //            dlogits·w2ᵀ with the relu mask as epilogue, xᵀ·dh                               = 4
  //   update: one fused SGD kernel per parameter                                               = 2
  Mlp m;
  Graph t = differentiate(m.g, m.loss);
  std::vector<NodeId> roots{m.loss};
  std::vector<std::pair<NodeId, NodeId>> pg;
  for (NodeId p : t.parameters()) {
    roots.push_back(*t.gradient(p));
    pg.push_back({p, *t.gradient(p)});
  }
  KernelGraph kg = schedule(t, roots);
  append_optimizer(kg, t, pg, {});
  EXPECT_EQ(kg.kernels.size(), 9u) << kg.to_text(t);
  EXPECT_EQ(kg.count(Archetype::MatMul), 5u) << kg.to_text(t);
  EXPECT_EQ(kg.count(Archetype::Pointwise), 0u) << kg.to_text(t);
  EXPECT_EQ(kernel_writing(kg, m.h).core, m.g.node(m.h).inputs[0]) << kg.to_text(t);
  EXPECT_EQ(kg.count(Archetype::Optimizer), 2u);
  EXPECT_EQ(kg.count(Archetype::Counter), 0u);  // plain SGD needs no step count
  // No kernel recomputes a node another kernel computes.
  std::vector<NodeId> computed;
  for (const Kernel& k : kg.kernels) {
    if (k.arch == Archetype::Optimizer) continue;
    std::vector<NodeId> mine(k.epilogue);
    mine.insert(mine.end(), k.prologue.begin(), k.prologue.end());
    if (k.core.valid()) mine.push_back(k.core);
    std::sort(mine.begin(), mine.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    for (NodeId n : mine) {
      EXPECT_EQ(std::count(computed.begin(), computed.end(), n), 0) << "node " << n.v << " computed twice";
      computed.push_back(n);
    }
  }
}

TEST(Schedule, TrainingFusesBiasAndActivationIntoTheMatmul) {
  // x·w + b followed by an activation whose gradient reads its output: the pre-activation has no other
  // reader, so bias and activation are the matmul's epilogue in the training step too. gelu's gradient
  // needs its input, so its pre-activation is stored and gelu stays a pointwise kernel.
  struct Act {
    const char* name;
    std::function<NodeId(Graph&, NodeId)> f;
    bool fuses;
  };
  std::vector<Act> acts{{"relu", [](Graph& g, NodeId x) { return g.relu(x); }, true},
                        {"sigmoid", [](Graph& g, NodeId x) { return g.sigmoid(x); }, true},
                        {"tanh", [](Graph& g, NodeId x) { return g.tanh(x); }, true},
                        {"leaky_relu", [](Graph& g, NodeId x) { return g.leaky_relu(x, 0.01); }, true},
                        {"elu", [](Graph& g, NodeId x) { return g.elu(x, 1.0); }, true},
                        {"gelu", [](Graph& g, NodeId x) { return g.gelu(x); }, false}};
  for (const Act& a : acts) {
    Graph g;
    NodeId x = g.input("x", {8, 16});
    NodeId w = g.parameter("w", {16, 12});
    NodeId b = g.parameter("b", {12});
    NodeId pre = g.add(g.matmul(x, w), b);
    NodeId h = a.f(g, pre);
    NodeId loss = g.sum(g.square(h));
    Graph t = differentiate(g, loss);
    std::vector<NodeId> roots{loss, *t.gradient(w), *t.gradient(b)};
    KernelGraph kg = schedule(t, roots);
    const Kernel& k = kernel_writing(kg, h);
    EXPECT_EQ(k.arch == Archetype::MatMul, a.fuses) << a.name << "\n" << kg.to_text(t);
    EXPECT_EQ(k.fused(pre), a.fuses) << a.name << "\n" << kg.to_text(t);
    EXPECT_EQ(std::count(kg.materialised.begin(), kg.materialised.end(), pre), a.fuses ? 0 : 1) << a.name;
  }
}

TEST(Schedule, PointwiseChainIsOneKernelWithFillsInlined) {
  Graph g;
  NodeId x = g.input("x", {4, 5});
  NodeId b = g.input("b", {5});
  NodeId y = g.add(g.mul(g.exp(x), g.scalar(2.0)), b);  // broadcasting b inside the same dispatch
  NodeId z = g.tanh(g.sub(y, g.fill(1.0, {4, 5})));
  KernelGraph kg = schedule(g, {z});
  ASSERT_EQ(kg.kernels.size(), 1u) << kg.to_text(g);
  EXPECT_EQ(kg.kernels[0].arch, Archetype::Pointwise);
  EXPECT_EQ(kg.kernels[0].reads, (std::vector<NodeId>{x, b}));  // no buffer for either Fill
}

TEST(Schedule, MultiUseProducerIsStored) {
  Graph g;
  NodeId x = g.input("x", {8});
  NodeId y = g.exp(x);
  NodeId a = g.mul(y, g.scalar(2.0));
  NodeId c = g.log(y);
  KernelGraph kg = schedule(g, {a, c});
  EXPECT_EQ(kg.kernels.size(), 3u) << kg.to_text(g);
  EXPECT_EQ(kernel_writing(kg, a).reads, std::vector<NodeId>{y});
}

TEST(Schedule, UsesInsideOneKernelStillFuse) {
  // y feeds two nodes of the same kernel: computed once, into a local.
  Graph g;
  NodeId x = g.input("x", {8});
  NodeId y = g.exp(x);
  NodeId z = g.add(y, g.sin(y));
  KernelGraph kg = schedule(g, {z});
  EXPECT_EQ(kg.kernels.size(), 1u) << kg.to_text(g);
}

TEST(Schedule, OutputIsNeverFusedAway) {
  Graph g;
  NodeId x = g.input("x", {8});
  NodeId y = g.exp(x);
  NodeId z = g.mul(y, y);
  KernelGraph kg = schedule(g, {y, z});
  ASSERT_EQ(kg.kernels.size(), 2u);
  EXPECT_EQ(kernel_writing(kg, z).reads, std::vector<NodeId>{y});
}

TEST(Schedule, MatmulEpilogueTakesBiasAndActivation) {
  Graph g;
  NodeId x = g.input("x", {3, 6});
  NodeId w = g.parameter("w", {6, 4});
  NodeId b = g.parameter("b", {4});
  NodeId y = g.relu(g.add(g.matmul(x, w), b));
  KernelGraph kg = schedule(g, {y});
  ASSERT_EQ(kg.kernels.size(), 1u) << kg.to_text(g);
  EXPECT_EQ(kg.kernels[0].arch, Archetype::MatMul);
  EXPECT_EQ(kg.kernels[0].reads, (std::vector<NodeId>{x, w, b}));
}

TEST(Schedule, ReductionTakesPrologueAndEpilogue) {
  Graph g;
  NodeId x = g.input("x", {4, 16});
  NodeId ss = g.sqrt(g.sum(g.square(x), {1}));  // prologue square, epilogue sqrt
  KernelGraph kg = schedule(g, {ss});
  ASSERT_EQ(kg.kernels.size(), 1u) << kg.to_text(g);
  EXPECT_EQ(kg.kernels[0].arch, Archetype::RowReduce);
  EXPECT_EQ(kg.kernels[0].prologue.size(), 1u);
  EXPECT_EQ(kg.kernels[0].reads, std::vector<NodeId>{x});
}

TEST(Schedule, SoftmaxMinusTargetIsOneRowKernel) {
  Graph g;
  NodeId z = g.input("z", {4, 10});
  NodeId t = g.input("t", {4, 10});
  NodeId d = g.mul(g.sub(g.softmax(z), t), g.scalar(0.25));
  KernelGraph kg = schedule(g, {d});
  ASSERT_EQ(kg.kernels.size(), 1u) << kg.to_text(g);
  EXPECT_EQ(kg.kernels[0].arch, Archetype::RowReduce);
}

TEST(Schedule, TwoCoresNeverShareAKernel) {
  Graph g;
  NodeId a = g.input("a", {4, 4});
  NodeId p = g.matmul(a, a);
  NodeId q = g.matmul(a, a, true, false);
  NodeId r = g.add(p, q);
  KernelGraph kg = schedule(g, {r});
  EXPECT_EQ(kg.kernels.size(), 2u) << kg.to_text(g);
  EXPECT_EQ(kg.count(Archetype::MatMul), 2u);
}

TEST(Schedule, ReshapeIsAnAliasOfStoredSource) {
  Graph g;
  NodeId x = g.input("x", {4, 6});
  NodeId e = g.exp(x);
  NodeId r = g.reshape(e, {24});
  NodeId y = g.relu(r);
  KernelGraph kg = schedule(g, {y});
  EXPECT_EQ(kg.kernels.size(), 2u) << kg.to_text(g);
  EXPECT_EQ(kg.storage_of(r), e);
  EXPECT_EQ(kernel_writing(kg, y).reads, std::vector<NodeId>{r});
}

TEST(Schedule, UnfusedIsOneKernelPerNode) {
  Graph g;
  NodeId x = g.input("x", {4, 6});
  NodeId y = g.sum(g.relu(g.exp(x)), {1});
  ScheduleOptions o;
  o.fuse = false;
  KernelGraph kg = schedule(g, {y}, o);
  EXPECT_EQ(kg.kernels.size(), 3u);
}

TEST(Schedule, OptimizerKernelsComeLast) {
  Mlp m;
  Graph t = differentiate(m.g, m.loss);
  std::vector<NodeId> roots{m.loss};
  std::vector<std::pair<NodeId, NodeId>> pg;
  for (NodeId p : t.parameters()) {
    roots.push_back(*t.gradient(p));
    pg.push_back({p, *t.gradient(p)});
  }
  KernelGraph kg = schedule(t, roots);
  size_t before = kg.kernels.size();
  int top = 0;
  for (const Kernel& k : kg.kernels) top = std::max(top, k.level);
  append_optimizer(kg, t, pg, {.needs_step = true});
  ASSERT_EQ(kg.kernels.size(), before + 3);
  // The step counter costs no level: it is first, beside the first forward kernels.
  EXPECT_EQ(kg.kernels.front().arch, Archetype::Counter);
  EXPECT_EQ(kg.kernels.front().level, 0);
  EXPECT_EQ(kg.kernels[1].level, 0);
  for (size_t i = before + 1; i < kg.kernels.size(); ++i) {
    EXPECT_EQ(kg.kernels[i].arch, Archetype::Optimizer);
    EXPECT_EQ(kg.kernels[i].level, top + 1);
  }
  // producer indices follow the insertion
  for (const auto& [node, index] : kg.producer) EXPECT_TRUE(kg.kernels[index].fused(node));
}

TEST(Schedule, UpdatesFuseIntoTheKernelsComputingTheirGradients) {
  Mlp m;
  Graph t = differentiate(m.g, m.loss);
  std::vector<NodeId> roots{m.loss};
  std::vector<std::pair<NodeId, NodeId>> pg;
  for (NodeId p : t.parameters()) {
    roots.push_back(*t.gradient(p));
    pg.push_back({p, *t.gradient(p)});
  }
  const KernelGraph plain = schedule(t, roots);
  KernelGraph kg = plain;
  append_optimizer(kg, t, pg, {.needs_step = true, .fuse = true});
  EXPECT_EQ(kg.count(Archetype::Optimizer), 0u) << kg.to_text(t);
  EXPECT_EQ(kg.kernels.size(), plain.kernels.size() + 1) << kg.to_text(t);  // + the step counter
  for (auto [p, gr] : pg) {
    const Kernel& k = kernel_writing(kg, gr);
    EXPECT_EQ(k.update, p);
    EXPECT_EQ(std::count(kg.materialised.begin(), kg.materialised.end(), gr), 0);  // never stored
    // after every kernel reading the parameter (w2 is read by dh = dlogits·w2ᵀ in the backward pass)
    for (const Kernel& o : kg.kernels) {
      if (std::count(o.reads.begin(), o.reads.end(), p)) {
        EXPECT_LT(o.level, k.level) << o.label << "\n" << kg.to_text(t);
      }
    }
  }
  for (size_t i = 1; i < kg.kernels.size(); ++i) EXPECT_LE(kg.kernels[i - 1].level, kg.kernels[i].level);
  for (const auto& [node, index] : kg.producer) EXPECT_TRUE(kg.kernels[index].fused(node));

  // Clipping and accumulation read whole gradients: no fusion.
  for (UpdatePlan plan :
       {UpdatePlan{.clip = true, .fuse = true}, UpdatePlan{.accumulate = true, .fuse = true}}) {
    KernelGraph c = plain;
    append_optimizer(c, t, pg, plan);
    EXPECT_EQ(c.count(Archetype::Optimizer), 2u);
    for (const Kernel& k : c.kernels) EXPECT_FALSE(k.update.valid());
  }
}

TEST(Schedule, UpdatesStayUnfusedWhereTheGradientIsReadOrNotOneThreadPerElement) {
  Graph g;
  NodeId x = g.input("x", {4, 6});
  NodeId w = g.parameter("w", {6, 3});
  NodeId v = g.parameter("v", {5});
  NodeId loss = g.add(g.sum(g.square(g.matmul(x, w))), g.sum(g.square(v)));  // dv = 2v·1: pointwise, reads v
  g.set_outputs({loss});
  Graph t = differentiate(g, loss);
  NodeId gw = *t.gradient(w), gv = *t.gradient(v);
  t.set_outputs({loss, gw});  // the weight gradient is returned too: it must be stored
  std::vector<std::pair<NodeId, NodeId>> pg{{w, gw}, {v, gv}};
  KernelGraph kg = schedule(t, {loss, gw, gv});
  append_optimizer(kg, t, pg, {.fuse = true});
  EXPECT_EQ(kg.count(Archetype::Optimizer), 2u) << kg.to_text(t);
  for (const Kernel& k : kg.kernels) EXPECT_FALSE(k.update.valid()) << k.label;
}

TEST(Schedule, NormsAreOneRowReductionWithTheirProducersAndConsumersFused) {
  // rms_norm(x + residual) * 2: the residual add is the norm's prologue, the scaling its epilogue.
  Graph g;
  NodeId x = g.input("x", {4, 33});
  NodeId res = g.input("res", {4, 33});
  NodeId w = g.parameter("w", {33});
  NodeId y = g.mul(g.rms_norm(g.add(x, res), w), g.scalar(2.0));
  g.set_outputs({y});
  KernelGraph kg = schedule(g, {y});
  ASSERT_EQ(kg.kernels.size(), 1u) << kg.to_text(g);
  EXPECT_EQ(kg.kernels[0].arch, Archetype::RowReduce);
  EXPECT_EQ(kg.kernels[0].prologue.size(), 1u);
  for (Op op : {Op::LayerNorm, Op::BatchNorm, Op::GroupNorm}) EXPECT_EQ(op_class(op), OpClass::Reduce);
}

TEST(Schedule, RopeAndDropoutAreCopyKernelsAndAScatterIsAlwaysARoot) {
  Graph g;
  NodeId q = g.input("q", {1, 2, 5, 8});
  NodeId y = g.add(g.rope(g.dropout(q, 0.1, 3), 10000.0, 4), g.scalar(1.0));
  NodeId idx = g.input("idx", {6}, DType::I32);
  NodeId v = g.input("v", {6, 3});
  NodeId s = g.relu(g.scatter_add(idx, v, 4));
  g.set_outputs({y, s});
  KernelGraph kg = schedule(g, {y, s});
  // dropout, rope (+1 fused as its epilogue), scatter-add, relu
  ASSERT_EQ(kg.kernels.size(), 4u) << kg.to_text(g);
  EXPECT_EQ(kg.count(Archetype::Copy), 2u);
  EXPECT_EQ(kernel_writing(kg, y).arch, Archetype::Copy);
  EXPECT_EQ(kernel_writing(kg, g.node(s).inputs[0]).arch, Archetype::Scatter);
  EXPECT_EQ(kernel_writing(kg, s).arch, Archetype::Pointwise);
}

TEST(Schedule, CnnTrainingStepConvAndWindowKernels) {
  // conv -> +bias -> relu -> max-pool, twice, then a linear layer. Conv kernels: two forward (bias as the
  // epilogue), conv2's input gradient, two weight gradients (the conv's input x needs none) = 5. Window
  // kernels: two max-pools and two max-pool gradients, each gradient with relu's backward mask fused as
  // its epilogue = 4.
  Graph g;
  NodeId x = g.input("x", {2, 1, 8, 8});
  NodeId t = x;
  int64_t cin = 1;
  for (int64_t cout : {4, 6}) {
    NodeId w = g.parameter("w" + std::to_string(cout), {cout, cin, 3, 3});
    NodeId b = g.parameter("b" + std::to_string(cout), {cout});
    t = g.max_pool2d(g.relu(g.add(g.conv2d(t, w, {1, 1}, {1, 1}), g.reshape(b, {cout, 1, 1}))), {2, 2});
    cin = cout;
  }
  NodeId logits = g.matmul(g.reshape(t, {2, 6 * 2 * 2}), g.parameter("fc", {24, 3}));
  NodeId loss = g.sum(g.mul(logits, logits));
  Graph d = differentiate(g, loss);
  std::vector<NodeId> roots{loss};
  for (NodeId p : d.parameters()) roots.push_back(*d.gradient(p));
  KernelGraph kg = schedule(d, roots);
  EXPECT_EQ(kg.count(Archetype::Conv), 5u) << kg.to_text(d);
  EXPECT_EQ(kg.count(Archetype::Copy), 4u) << kg.to_text(d);
  for (const Kernel& k : kg.kernels) {
    if (k.core.valid() && d.node(k.core).op == Op::MaxPool2dGrad) {
      EXPECT_FALSE(k.epilogue.empty()) << "relu's mask is not fused into " << k.label;
    }
  }
}

// Attention: the forward and its log-sum-exp share a kernel, dK and dV share one, dQ is alone; a kernel
// reading the forward's value runs at a later level even though the kernel is rooted at the (higher-id)
// log-sum-exp.
TEST(Schedule, AttentionSiblingsAndLevels) {
  Graph g;
  auto q = g.parameter("q", {1, 4, 5, 8});
  auto k = g.parameter("k", {1, 2, 6, 8});
  auto v = g.parameter("v", {1, 2, 6, 8});
  auto y = g.scaled_dot_product_attention(q, k, v, true);
  auto loss = g.sum(g.mul(y, g.input("r", {1, 4, 5, 8})));
  Graph d = differentiate(g, loss, {q, k, v});
  std::vector<NodeId> roots{loss, *d.gradient(q), *d.gradient(k), *d.gradient(v)};
  const KernelGraph kg = schedule(d, roots);
  EXPECT_EQ(kg.count(Archetype::Attention), 3u) << kg.to_text(d);
  size_t with_siblings = 0;
  for (const Kernel& kn : kg.kernels) {
    with_siblings += kn.siblings.size();
    // the forward value, not its log-sum-exp, roots the forward kernel (phase and label follow it)
    if (!kn.siblings.empty()) {
      const Op op = d.node(kn.root).op;
      EXPECT_TRUE(op == Op::Attention || op == Op::AttentionGradK) << op_name(op);
    }
    for (NodeId r : kn.reads) {
      auto it = kg.producer.find(kg.storage_of(r));
      if (it != kg.producer.end()) {
        EXPECT_LT(kg.kernels[it->second].level, kn.level) << kg.to_text(d);
      }
    }
  }
  EXPECT_EQ(with_siblings, 2u);
  // unfused: one kernel per attention node
  ScheduleOptions off;
  off.fuse = false;
  EXPECT_EQ(schedule(d, roots, off).count(Archetype::Attention), 5u);
}
