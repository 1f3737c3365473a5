// Frames in flight: steps queued on the GPU (SessionConfig::frames_in_flight 3) against the same steps run
// one at a time (frames_in_flight 1). Each step has its own inputs and learning rate, so a step that read
// another frame's staging, or an output read from the wrong readback, changes the bits compared here.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "gpu_fixture.hpp"
#include "meganeura/meganeura.hpp"
#include "meganeura/session/pipeline.hpp"

using namespace meganeura;

namespace {

class FramesGpu : public test::GpuTest {};

// 6 rows (no multiple of any tile), two layers, a named loss and the logits as a second output.
Graph mlp(int64_t batch = 6) {
  Graph g;
  const NodeId x = g.input("x", {batch, 5});
  const NodeId h = g.relu(g.matmul(x, g.parameter("w1", {5, 9})));
  const NodeId z = g.named(g.matmul(h, g.parameter("w2", {9, 3})), "logits");
  g.set_outputs({g.named(g.cross_entropy_loss(z, g.input("labels", {batch, 3})), "loss"), z});
  return g;
}

Session session(const Graph& g, int frames, OptimizerKind kind = OptimizerKind::Adam, int accumulation = 1) {
  static KernelCache cache;
  SessionConfig cfg = test::gpu_config();
  cfg.dump_plan.clear();
  cfg.frames_in_flight = frames;
  cfg.optimizer.kind = kind;
  cfg.optimizer.learning_rate = 0.05;
  cfg.optimizer.grad_accumulation = accumulation;
  std::shared_ptr<runtime::Device> dev(&test::gpu_device(), [](runtime::Device*) {});
  return build_with(g, cfg, dev, {.cache = &cache});
}

// Inputs and a learning rate per step; some steps keep the previous ones (nothing set), so a frame must
// bring its staging up to date from another frame.
struct Steps {
  std::vector<std::vector<float>> x, labels;
  std::vector<double> lr;
  std::vector<float> w1, w2;
  Steps(int n, int64_t batch = 6) {
    std::mt19937 rng(11);
    for (int k = 0; k < n; ++k) {
      x.push_back(test::random_vec(size_t(batch * 5), rng));
      std::vector<float> l(size_t(batch * 3), 0.0f);
      for (int64_t r = 0; r < batch; ++r) l[size_t(r * 3 + int64_t(rng() % 3))] = 1.0f;
      labels.push_back(l);
      lr.push_back(0.05 * (1.0 + 0.3 * k));
    }
    w1 = test::random_vec(45, rng, 0.5f);
    w2 = test::random_vec(27, rng, 0.5f);
  }
  bool sets_inputs(int k) const { return k % 4 != 2; }
  bool sets_lr(int k) const { return k % 3 != 1; }
  void init(Session& s) const {
    s.set_parameter("w1", w1);
    s.set_parameter("w2", w2);
  }
  void prepare(Session& s, int k) const {
    if (sets_inputs(k)) {
      s.set_input("x", x[size_t(k)]);
      s.set_input("labels", labels[size_t(k)]);
    }
    if (sets_lr(k)) s.set_learning_rate(lr[size_t(k)]);
  }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// Runs `n` steps one at a time; returns each step's loss.
std::vector<float> run_synchronously(Session& s, const Steps& st, int n) {
  std::vector<float> losses;
  st.init(s);
  for (int k = 0; k < n; ++k) {
    st.prepare(s, k);
    s.run();
    losses.push_back(s.read_output("loss").at(0));
  }
  return losses;
}

// Submits `n` steps in groups of 3 without waiting, then reads each of the group's losses by step id.
std::vector<float> run_queued(Session& s, const Steps& st, int n) {
  std::vector<float> losses;
  st.init(s);
  for (int k = 0; k < n; k += 3) {
    std::vector<uint64_t> ids;
    for (int j = k; j < std::min(n, k + 3); ++j) {
      st.prepare(s, j);
      ids.push_back(s.step());
    }
    for (uint64_t id : ids) losses.push_back(s.read_output("loss", id).at(0));
  }
  return losses;
}

}  // namespace

TEST_F(FramesGpu, QueuedAdamStepsEqualSynchronousStepsBitForBit) {
  const int n = 9;
  const Steps st(n);
  Session sync = session(mlp(), 1);
  Session queued = session(mlp(), 3);
  const std::vector<float> want = run_synchronously(sync, st, n);
  const std::vector<float> got = run_queued(queued, st, n);
  ASSERT_EQ(got.size(), want.size());
  for (int k = 0; k < n; ++k) EXPECT_EQ(got[size_t(k)], want[size_t(k)]) << "loss of step " << k + 1;
  // Steps differ (their inputs and rates do), so equal losses are each step's own.
  EXPECT_NE(want[0], want[1]);
  for (const char* p : {"w1", "w2"})
    EXPECT_TRUE(same_bits(queued.read_parameter(p), sync.read_parameter(p))) << p;
  EXPECT_TRUE(same_bits(queued.read_output("logits"), sync.read_output("logits")));
  EXPECT_EQ(queued.optimizer_step(), uint64_t(n));
}

TEST_F(FramesGpu, QueuedAccumulationEqualsSynchronous) {
  const int n = 8;
  const Steps st(n);
  Session sync = session(mlp(), 1, OptimizerKind::Adam, 2);
  Session queued = session(mlp(), 3, OptimizerKind::Adam, 2);
  const std::vector<float> want = run_synchronously(sync, st, n);
  const std::vector<float> got = run_queued(queued, st, n);
  for (int k = 0; k < n; ++k) EXPECT_EQ(got[size_t(k)], want[size_t(k)]) << "loss of step " << k + 1;
  for (const char* p : {"w1", "w2"})
    EXPECT_TRUE(same_bits(queued.read_parameter(p), sync.read_parameter(p))) << p;
  EXPECT_EQ(queued.optimizer_step(), uint64_t(n / 2));
}

TEST_F(FramesGpu, ReadingAStepWhoseFrameWasReusedThrows) {
  const Steps st(5);
  Session s = session(mlp(), 3, OptimizerKind::Sgd);
  st.init(s);
  std::vector<uint64_t> ids;
  for (int k = 0; k < 4; ++k) {
    st.prepare(s, k);
    ids.push_back(s.step());
  }
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 2, 3, 4}));
  try {
    s.read_output("loss", 1);
    ADD_FAILURE() << "step 1's frame was reused by step 4";
  } catch (const SessionError& e) {
    EXPECT_NE(std::string(e.what()).find("step 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(s.read_output(size_t(0), 0), SessionError);
  EXPECT_THROW(s.read_output(size_t(0), 5), SessionError);
  EXPECT_THROW(s.read_output(size_t(2), 4), SessionError);
  EXPECT_THROW(s.read_output("nope", 4), SessionError);
  // Steps 2..4 are still held, and the latest step is step 4.
  for (uint64_t id : {2, 3, 4}) EXPECT_EQ(s.read_output("loss", id).size(), 1u);
  EXPECT_TRUE(same_bits(s.read_output("loss"), s.read_output("loss", 4)));
  EXPECT_THROW(session(mlp(), 0), ConfigError);
}

// The Trainer keeps 3 steps queued: the same history and parameters as one step at a time, through a
// cosine schedule (a new rate every update) and shuffled batches.
TEST_F(FramesGpu, TrainerEpochWithQueuedStepsEqualsSynchronous) {
  auto data = std::make_shared<TensorDataset>();
  std::mt19937 rng(5);
  std::vector<float> x = test::random_vec(60 * 5, rng), y(60 * 3, 0.0f);
  for (int r = 0; r < 60; ++r) y[size_t(r * 3 + r % 3)] = 1.0f;
  data->add_f32("x", {5}, x);
  data->add_f32("labels", {3}, y);
  TrainConfig c;
  c.batch_size = 6;
  c.epochs = 2;
  c.log_interval = 3;
  c.progress = ProgressMode::Off;
  c.schedule.kind = ScheduleKind::Cosine;
  Trainer sync(session(mlp(), 1), c);
  Trainer queued(session(mlp(), 3), c);
  EXPECT_EQ(queued.target().steps_in_flight(), 3);
  sync.init_parameters();
  queued.init_parameters();
  DataLoader l1(data, {.batch_size = 6, .shuffle = true, .seed = 2});
  DataLoader l2(data, {.batch_size = 6, .shuffle = true, .seed = 2});
  const History& a = sync.train(l1, 2);
  const History& b = queued.train(l2, 2);
  ASSERT_EQ(a.steps.size(), b.steps.size());
  ASSERT_GE(a.steps.size(), 6u);
  for (size_t i = 0; i < a.steps.size(); ++i) {
    EXPECT_EQ(a.steps[i].step, b.steps[i].step);
    EXPECT_EQ(a.steps[i].loss, b.steps[i].loss) << "history point " << i;
    EXPECT_EQ(a.steps[i].lr, b.steps[i].lr);
  }
  ASSERT_EQ(b.epochs.size(), 2u);
  for (size_t e = 0; e < 2; ++e) EXPECT_EQ(a.epochs[e].train_loss, b.epochs[e].train_loss);
  for (const char* p : {"w1", "w2"})
    EXPECT_TRUE(same_bits(queued.target().read_parameter(p), sync.target().read_parameter(p))) << p;
}

// The device seam: submission ids, waiting for one, and host memory that lists copy to and from.
TEST_F(FramesGpu, DeviceSubmissionIdsAndHostMemory) {
  runtime::Device& dev = device();
  const runtime::Buffer host = dev.alloc_host(64), gpu = dev.alloc(64);
  std::byte* p = dev.host_pointer(host);
  for (int i = 0; i < 64; ++i) p[i] = std::byte(i);
  std::unique_ptr<runtime::CommandList> a = dev.record(), b = dev.record();
  a->copy(runtime::slice(host, 0, 32), runtime::slice(gpu, 32, 32), 32);
  a->finish();
  b->barrier();
  b->copy(runtime::slice(gpu, 32, 32), runtime::slice(host, 32, 32), 32);  // into the second half
  b->finish();
  const uint64_t first = dev.submit(*a);
  const uint64_t second = dev.submit(*b);
  EXPECT_EQ(second, first + 1);
  dev.wait(second);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(int(p[32 + i]), i);
  std::vector<uint8_t> back(32);
  dev.download(gpu, back.data(), 32, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(back[size_t(i)], i);
  dev.wait(0);
  EXPECT_THROW(dev.wait(second + 1), DeviceError);
  EXPECT_THROW(dev.host_pointer(gpu), DeviceError);
  // A list submitted twice waits for its first submission; both complete.
  const uint64_t third = dev.submit(*a), fourth = dev.submit(*a);
  EXPECT_EQ(fourth, third + 1);
  dev.wait();
  a.reset();
  b.reset();
  dev.free(host);
  dev.free(gpu);
}

// Inputs and outputs above a frame's size limit (16 MiB) bypass the staging: uploaded when set, read from the
// device for the latest step only; the small ones beside them still go through the frames.
TEST_F(FramesGpu, LargeValuesBypassTheFrames) {
  const int64_t n = (16 << 20) / 4 + 3;
  Graph g;
  const NodeId x = g.input("x", {n});
  const NodeId a = g.input("a", {1});
  g.set_outputs({g.named(g.mul(x, g.scalar(2.0)), "big"), g.named(g.mul(a, g.scalar(3.0)), "small")});
  SessionConfig cfg = test::gpu_config();
  cfg.training = false;
  cfg.dump_plan.clear();
  std::shared_ptr<runtime::Device> dev(&test::gpu_device(), [](runtime::Device*) {});
  Session s = build(g, cfg, dev);
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i % 1000);
  s.set_input("x", v);
  s.set_input("a", std::vector<float>{1.0f});
  const uint64_t first = s.step();
  s.set_input("a", std::vector<float>{2.0f});
  const uint64_t second = s.step();
  const std::vector<float> big = s.read_output("big", second);
  ASSERT_EQ(big.size(), size_t(n));
  EXPECT_EQ(big[0], 0.0f);
  EXPECT_EQ(big[size_t(n - 1)], 2.0f * float((n - 1) % 1000));
  EXPECT_THROW(s.read_output("big", first), SessionError);
  EXPECT_EQ(s.read_output("small", first).at(0), 3.0f);
  EXPECT_EQ(s.read_output("small", second).at(0), 6.0f);
}
