// The Trainer driven through a host model (linear regression with hand-written gradients): schedules,
// update counting under gradient accumulation, callbacks, history, progress and checkpoint resume.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "meganeura/core/error.hpp"
#include "meganeura/train/progress.hpp"
#include "meganeura/train/trainer.hpp"

namespace fs = std::filesystem;
using namespace meganeura;

namespace {

// y_hat = x @ w + b with x [B, 2], w [2, 1], b [1]; loss = mean((y_hat - y)^2). Stands in for a Session:
// its step applies fused SGD (with momentum, whose buffers are its optimizer state) and accumulates
// gradients over grad_accumulation steps, as a session does.
// Steps run at submit_step; with depth > 1 it pretends to queue them as a session does, and checks that the
// Trainer reads each loss once, in order, with at most `depth` steps unread.
class FakeLinear : public TrainTarget {
 public:
  FakeLinear(int64_t batch, OptimizerConfig opt, int depth = 1)
      : batch_(batch), opt_(opt), lr_(opt.learning_rate), depth_(depth) {}
  std::vector<float> w{0.1f, -0.1f}, b{0.0f};
  std::vector<float> mw{0, 0}, mb{0};  // momentum
  std::vector<double> lrs_seen;
  int runs = 0;
  uint64_t updates = 0;

  std::vector<TensorInfo> inputs() const override {
    return {{"x", TensorRole::Parameter, DType::F32, {batch_, 2}},
            {"y", TensorRole::Parameter, DType::F32, {batch_, 1}}};
  }
  std::vector<TensorInfo> parameters() const override {
    return {{"w", TensorRole::Parameter, DType::F32, {2, 1}}, {"b", TensorRole::Parameter, DType::F32, {1}}};
  }
  void set_input(const std::string& name, const DataTensor& v) override { (name == "x" ? x_ : y_) = v.f32; }
  uint64_t submit_step() override {
    EXPECT_LT(unread_.size(), size_t(depth_)) << "more than steps_in_flight() steps submitted";
    unread_.push_back(run_step());
    return ++submitted;
  }
  double step_loss(uint64_t id) override {
    EXPECT_EQ(id, submitted - unread_.size() + 1) << "losses read out of order";
    const double loss = unread_.front();
    unread_.erase(unread_.begin());
    return loss;
  }
  int steps_in_flight() const override { return depth_; }
  uint64_t submitted = 0;
  double run_step() {
    ++runs;
    double loss = 0;
    for (int64_t r = 0; r < batch_; ++r) {
      const double e = x_[2 * r] * w[0] + x_[2 * r + 1] * w[1] + b[0] - y_[r];
      loss += e * e / batch_;
      acc_[0] += 2 * e * x_[2 * r] / batch_;
      acc_[1] += 2 * e * x_[2 * r + 1] / batch_;
      acc_[2] += 2 * e / batch_;
    }
    if (++phase_ < opt_.grad_accumulation) return loss;
    float* p[3] = {&w[0], &w[1], &b[0]};
    float* m[3] = {&mw[0], &mw[1], &mb[0]};
    for (int i = 0; i < 3; ++i) {
      double g = acc_[i] / opt_.grad_accumulation;
      if (opt_.momentum != 0) g = *m[i] = static_cast<float>(opt_.momentum * *m[i] + g);
      *p[i] -= static_cast<float>(lr_ * g);
      acc_[i] = 0;
    }
    phase_ = 0;
    ++updates;
    return loss;
  }
  OptimizerConfig fused_optimizer() const override { return opt_; }
  void set_learning_rate(double lr) override {
    lr_ = lr;
    lrs_seen.push_back(lr);
  }
  std::vector<float> read_parameter(const std::string& n) override { return n == "w" ? w : b; }
  void set_parameter(const std::string& n, std::span<const float> v) override {
    (n == "w" ? w : b).assign(v.begin(), v.end());
  }
  std::vector<TensorInfo> optimizer_state() const override {
    if (opt_.momentum == 0) return {};
    return {{"optim.momentum/w", TensorRole::OptimizerState, DType::F32, {2, 1}},
            {"optim.momentum/b", TensorRole::OptimizerState, DType::F32, {1}}};
  }
  std::vector<float> read_optimizer_state(const std::string& n) override {
    return n == "optim.momentum/w" ? mw : mb;
  }
  void set_optimizer_state(const std::string& n, std::span<const float> v) override {
    (n == "optim.momentum/w" ? mw : mb).assign(v.begin(), v.end());
  }
  uint64_t optimizer_step() const override { return updates; }
  void set_optimizer_step(uint64_t s) override {
    updates = s;
    phase_ = 0;
    acc_[0] = acc_[1] = acc_[2] = 0;
  }

 private:
  int64_t batch_;
  OptimizerConfig opt_;
  double lr_;
  double acc_[3] = {0, 0, 0};
  int phase_ = 0;
  std::vector<float> x_, y_;
  int depth_;
  std::vector<double> unread_;
};

std::shared_ptr<TensorDataset> line_data(int n) {
  auto ds = std::make_shared<TensorDataset>();
  std::vector<float> x, y;
  for (int i = 0; i < n; ++i) {
    const float a = std::sin(0.7f * i), c = std::cos(1.3f * i);
    x.push_back(a);
    x.push_back(c);
    y.push_back(3 * a - 2 * c + 0.5f);
  }
  ds->add_f32("x", {2}, x);
  ds->add_f32("y", {1}, y);
  return ds;
}

TrainConfig quiet(int64_t batch) {
  TrainConfig c;
  c.batch_size = batch;
  c.progress = ProgressMode::Off;
  c.log_interval = 4;
  return c;
}

OptimizerConfig sgd(double lr, double momentum = 0, int accumulation = 1) {
  OptimizerConfig o;
  o.kind = OptimizerKind::Sgd;
  o.learning_rate = lr;
  o.momentum = momentum;
  o.grad_accumulation = accumulation;
  return o;
}

struct Setup {
  FakeLinear* model;
  std::unique_ptr<Trainer> trainer;
};

Setup make(TrainConfig c, OptimizerConfig opt = sgd(0.1), int depth = 1) {
  auto m = std::make_unique<FakeLinear>(c.batch_size, opt, depth);
  FakeLinear* raw = m.get();
  return {raw, std::make_unique<Trainer>(std::move(m), std::move(c))};
}

}  // namespace

TEST(Schedule, ConstantWarmupStepCosine) {
  LrSchedule s;
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 0.1, 57, 100), 0.1);
  s.warmup_steps = 4;
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 0.1, 0, 100), 0.025);
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 0.1, 3, 100), 0.1);
  s = {};
  s.kind = ScheduleKind::Step;
  s.step_size = 10;
  s.gamma = 0.5;
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 0.1, 9, 100), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 0.1, 25, 100), 0.025);
  s = {};
  s.kind = ScheduleKind::Cosine;
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 0.1, 0, 11), 0.1);
  EXPECT_NEAR(learning_rate_at(s, 0.1, 5, 11), 0.05, 1e-15);
  EXPECT_NEAR(learning_rate_at(s, 0.1, 10, 11), 0.0, 1e-15);
  s.min_lr = 0.01;
  EXPECT_NEAR(learning_rate_at(s, 0.1, 10, 11), 0.01, 1e-15);
  EXPECT_THROW(parse_schedule("linear"), ConfigError);
}

TEST(Trainer, SgdFitsTheLine) {
  auto s = make(quiet(8));
  DataLoader loader(line_data(64), {.batch_size = 8, .shuffle = true, .seed = 3});
  const History& h = s.trainer->train(loader, 40);
  EXPECT_EQ(h.epochs.size(), 40u);
  EXPECT_LT(h.epochs.back().train_loss, 1e-4);
  EXPECT_LT(h.epochs.back().train_loss, h.epochs.front().train_loss);
  EXPECT_NEAR(s.model->w[0], 3.0, 1e-2);
  EXPECT_NEAR(s.model->w[1], -2.0, 1e-2);
  EXPECT_NEAR(s.model->b[0], 0.5, 1e-2);
  EXPECT_EQ(s.trainer->update_step(), 40 * 8);
}

TEST(Trainer, ScheduleSetsTheRateOfEachUpdateAndAccumulationCarriesOverEpochs) {
  TrainConfig c = quiet(8);
  c.schedule.kind = ScheduleKind::Cosine;
  c.epochs = 2;
  auto s = make(c, sgd(0.2));
  DataLoader loader(line_data(32), {.batch_size = 8, .shuffle = false});
  s.trainer->train(loader, 2);
  ASSERT_EQ(s.model->lrs_seen.size(), 8u);  // lr changes every update under cosine
  for (int i = 0; i < 8; ++i) EXPECT_DOUBLE_EQ(s.model->lrs_seen[i], learning_rate_at(c.schedule, 0.2, i, 8));

  // 3 batches per epoch, 2 per update: 6 batches over 2 epochs are 3 updates, one spanning the epoch end.
  auto acc = make(c, sgd(0.2, 0, 2));
  DataLoader l3(line_data(24), {.batch_size = 8, .shuffle = false});
  acc.trainer->train(l3, 2);
  EXPECT_EQ(acc.model->runs, 6);
  EXPECT_EQ(acc.model->updates, 3u);
  EXPECT_EQ(acc.trainer->update_step(), 3);
  std::vector<double> want;  // the rate each micro-batch set: that of the update it contributes to
  for (int u = 0; u < 3; ++u) want.push_back(learning_rate_at(c.schedule, 0.2, u, 3));
  std::vector<double> seen = acc.model->lrs_seen;
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  EXPECT_EQ(seen, want);

  auto too_few = make(quiet(8), sgd(0.2, 0, 5));
  EXPECT_THROW(too_few.trainer->train(l3, 1), ConfigError);
  OptimizerConfig none;
  none.kind = OptimizerKind::None;
  EXPECT_THROW(make(quiet(8), none), ConfigError);
}

TEST(Trainer, CallbacksStopAndHistoryRenderings) {
  auto s = make(quiet(8));
  int steps = 0, epochs = 0;
  s.trainer->on_step([&](const StepEvent& e) {
    ++steps;
    EXPECT_EQ(e.step, steps);
    if (steps == 11) s.trainer->request_stop();
  });
  s.trainer->on_epoch_end([&](const EpochRecord&) { ++epochs; });
  s.trainer->set_evaluator([] { return EvalResult{0.5, 0.75, 10}; });
  DataLoader loader(line_data(64), {.batch_size = 8, .shuffle = true});
  const History& h = s.trainer->train(loader, 5);
  EXPECT_EQ(steps, 11);
  EXPECT_EQ(epochs, 2);
  ASSERT_EQ(h.epochs.size(), 2u);
  EXPECT_EQ(h.epochs[1].steps, 3);
  EXPECT_EQ(h.epochs[1].test_accuracy.value_or(-1), 0.75);
  const nlohmann::json j = nlohmann::json::parse(h.to_json());
  EXPECT_EQ(j["epochs"].size(), 2u);
  EXPECT_EQ(j["steps"].size(), h.steps.size());
  EXPECT_EQ(j["epochs"][0]["test_loss"].get<double>(), 0.5);
  const std::string csv = h.to_csv();
  EXPECT_EQ(static_cast<size_t>(std::count(csv.begin(), csv.end(), '\n')), 1 + h.steps.size() + 2);
  EXPECT_EQ(csv.rfind("kind,step,epoch,loss", 0), 0u);
  const std::string svg = h.to_svg();
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_NE(svg.find("<circle"), std::string::npos);
  const fs::path p = fs::temp_directory_path() / ("meganeura-history-" + std::to_string(::getpid()) + ".svg");
  h.save(p.string());
  EXPECT_GT(fs::file_size(p), 100u);
  fs::remove(p);
  EXPECT_THROW(h.save("history.txt"), ConfigError);
}

// A target that queues 3 steps: the same losses, history and parameters as a synchronous one (the learning
// rate of each step is set before it is submitted), step callbacks run late, and a stop finishes the steps
// already submitted.
TEST(Trainer, PipelinedTargetMatchesSynchronousAndStopsAfterSubmittedSteps) {
  TrainConfig c = quiet(8);
  c.schedule.kind = ScheduleKind::Cosine;
  c.epochs = 3;
  auto sync = make(c, sgd(0.2, 0.5, 2));
  auto piped = make(c, sgd(0.2, 0.5, 2), 3);
  DataLoader l1(line_data(40), {.batch_size = 8, .shuffle = true, .seed = 5});
  DataLoader l2(line_data(40), {.batch_size = 8, .shuffle = true, .seed = 5});
  std::vector<uint64_t> submitted_at_callback;
  piped.trainer->on_step([&](const StepEvent&) { submitted_at_callback.push_back(piped.model->submitted); });
  const History& a = sync.trainer->train(l1, 3);
  const History& b = piped.trainer->train(l2, 3);
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) {
    EXPECT_EQ(a.steps[i].step, b.steps[i].step);
    EXPECT_EQ(a.steps[i].loss, b.steps[i].loss);
    EXPECT_EQ(a.steps[i].lr, b.steps[i].lr);
  }
  ASSERT_EQ(a.epochs.size(), 3u);
  for (size_t e = 0; e < 3; ++e) EXPECT_EQ(a.epochs[e].train_loss, b.epochs[e].train_loss);
  EXPECT_EQ(sync.model->w, piped.model->w);
  EXPECT_EQ(sync.model->b, piped.model->b);
  EXPECT_EQ(sync.model->lrs_seen, piped.model->lrs_seen);
  // 5 steps per epoch: callbacks see steps 1..3 once 3 were submitted, then one behind each new submission;
  // the queue drains at each epoch end.
  ASSERT_EQ(submitted_at_callback.size(), 15u);
  const std::vector<uint64_t> first_epoch(submitted_at_callback.begin(), submitted_at_callback.begin() + 5);
  EXPECT_EQ(first_epoch, (std::vector<uint64_t>{3, 4, 5, 5, 5}));

  auto stop = make(quiet(8), sgd(0.1), 3);
  int seen = 0;
  stop.trainer->on_step([&](const StepEvent& e) {
    EXPECT_EQ(e.step, ++seen);
    EXPECT_EQ(e.step_in_epoch, seen);
    if (seen == 2) stop.trainer->request_stop();
  });
  DataLoader l3(line_data(64), {.batch_size = 8, .shuffle = false});
  const History& h = stop.trainer->train(l3, 1);
  EXPECT_EQ(stop.model->runs, 4);  // steps 3 and 4 were queued when step 2 asked to stop
  EXPECT_EQ(seen, 4);
  ASSERT_EQ(h.epochs.size(), 1u);
  EXPECT_EQ(h.epochs[0].steps, 4);
}

TEST(Trainer, ResumeFromCheckpointMatchesUninterruptedTraining) {
  const fs::path path =
      fs::temp_directory_path() / ("meganeura-resume-" + std::to_string(::getpid()) + ".ckpt");
  TrainConfig c = quiet(8);
  c.schedule.kind = ScheduleKind::Cosine;
  c.epochs = 2;
  const OptimizerConfig opt = sgd(0.05, 0.9);
  auto straight = make(c, opt);
  DataLoader l1(line_data(32), {.batch_size = 8, .shuffle = true, .seed = 9});
  straight.trainer->train(l1, 2);

  auto first = make(c, opt);
  DataLoader l2(line_data(32), {.batch_size = 8, .shuffle = true, .seed = 9});
  first.trainer->train(l2, 1);
  first.trainer->save(path.string());
  auto second = make(c, opt);
  second.model->w = {7, 7};
  const RestoreReport r = second.trainer->restore(path.string());
  EXPECT_EQ(r.optimizer_state, 2u);  // the momentum of w and b
  EXPECT_EQ(second.model->updates, 4u);
  DataLoader l3(line_data(32), {.batch_size = 8, .shuffle = true, .seed = 9});
  second.trainer->train(l3, 1);
  EXPECT_EQ(second.trainer->update_step(), straight.trainer->update_step());
  EXPECT_EQ(second.model->w, straight.model->w);
  EXPECT_EQ(second.model->b, straight.model->b);
  fs::remove(path);
}

TEST(Trainer, MismatchedCheckpointLeavesTheModelAlone) {
  const fs::path path =
      fs::temp_directory_path() / ("meganeura-mismatch-" + std::to_string(::getpid()) + ".ckpt");
  MemoryStore other;
  other.add_f32("w", {1, 2}, {1, 2});
  other.add_f32("b", {1}, {3});
  save_checkpoint(path.string(), other);
  auto s = make(quiet(8));
  EXPECT_THROW(s.trainer->restore(path.string()), CheckpointError);
  EXPECT_EQ(s.model->w, (std::vector<float>{0.1f, -0.1f}));
  EXPECT_EQ(s.model->b, (std::vector<float>{0.0f}));
  fs::remove(path);
}

TEST(Trainer, WrongBatchShapeIsNamed) {
  auto s = make(quiet(8));
  auto ds = std::make_shared<TensorDataset>();
  ds->add_f32("x", {3}, std::vector<float>(24, 0));
  ds->add_f32("y", {1}, std::vector<float>(8, 0));
  DataLoader loader(ds, {.batch_size = 8});
  try {
    s.trainer->train(loader, 1);
    FAIL() << "no error";
  } catch (const SessionError& e) {
    EXPECT_NE(std::string(e.what()).find("'x'"), std::string::npos) << e.what();
  }
  DataLoader wrong(line_data(16), {.batch_size = 4});
  EXPECT_THROW(s.trainer->train(wrong, 1), ConfigError);
}

TEST(Trainer, InitParametersIsSeededAndBounded) {
  auto a = make(quiet(8));
  auto b = make(quiet(8));
  TrainConfig c = quiet(8);
  c.seed = 1;
  auto d = make(c);
  a.trainer->init_parameters();
  b.trainer->init_parameters();
  d.trainer->init_parameters();
  EXPECT_EQ(a.model->w, b.model->w);
  EXPECT_NE(a.model->w, d.model->w);
  for (float v : a.model->w) EXPECT_LE(std::abs(v), 1.0 / std::sqrt(2.0));
  EXPECT_EQ(a.model->b[0], 0.0f);
}

TEST(Progress, LinesWhenNotATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  Progress p(f, ProgressMode::Auto, 2);
  EXPECT_FALSE(p.is_bar());
  p.begin_epoch(0, 3, 4);
  for (int i = 1; i <= 4; ++i) p.step(i, 0.5, 10.0);
  p.end_epoch("done");
  std::rewind(f);
  char buf[1024] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const std::string text(buf, n);
  EXPECT_NE(text.find("epoch 1/3 step 2/4 loss 0.5000 10.0 steps/s ETA 0:00"), std::string::npos) << text;
  EXPECT_NE(text.find("step 4/4"), std::string::npos) << text;
  EXPECT_EQ(text.find("step 1/4"), std::string::npos) << text;
  EXPECT_NE(text.find("done\n"), std::string::npos);
  const std::string bar = Progress::bar_line(1, 10, 5, 10, 0.25, 2.0, 10);
  EXPECT_EQ(bar, "epoch 2/10 [#####.....] 5/10 2.0 steps/s loss 0.2500 ETA 0:03");
  EXPECT_EQ(Progress::format_duration(3725), "1:02:05");
}
