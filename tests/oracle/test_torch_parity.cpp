// Parity with PyTorch (float64, CPU): tests/oracle/make_reference.py, run by Debian's /usr/bin/python3,
// writes inputs, outputs and gradients for every op and 20 SGD steps of the README MLP; here each op is
// built through the Graph API, differentiated by autodiff and evaluated by the CPU reference interpreter,
// and (TorchParityGpu) compiled into a GPU session whose output and gradients are compared with torch too.
// A missing torch fails the test (it never skips).
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "gpu/gpu_opcheck.hpp"
#include "meganeura/autodiff/autodiff.hpp"
#include "meganeura/ir/graph.hpp"
#include "meganeura/nn/nn.hpp"
#include "meganeura/reference/interpreter.hpp"
#include "oracle/oracle.hpp"

using namespace meganeura;
using json = nlohmann::json;
using test::oracle;

namespace {

constexpr double kRelTol = 1e-6;

HostTensor tensor_of(const json& shape, const json& data) {
  return HostTensor(shape.get<Shape>(), data.get<std::vector<double>>());
}

// |a - b| <= tol * max(|b|, floor) with the floor a small fraction of the tensor's largest magnitude, so
// that elements near zero are judged relative to the tensor's scale rather than to themselves.
::testing::AssertionResult close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                                 const std::string& what) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs " << want.size();
  double scale = 0.0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  const double floor = std::max(scale * 1e-3, 1e-12);
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(got[i] - want[i]);
    // plus a float64 rounding allowance for values that are exactly zero mathematically (a bias before
    // batch norm), where both sides hold only rounding noise
    if (!(err <= tol * std::max(std::abs(want[i]), floor) + 1e-13))
      return ::testing::AssertionFailure()
             << what << "[" << i << "]: got " << got[i] << ", torch " << want[i] << " (|err| " << err << ")";
  }
  return ::testing::AssertionSuccess();
}

Reduction reduction_of(const json& a) {
  const std::string r = a.value("reduction", std::string("mean"));
  return r == "sum" ? Reduction::Sum : r == "none" ? Reduction::None : Reduction::Mean;
}

std::vector<int64_t> ints(const json& a, const char* key) { return a.at(key).get<std::vector<int64_t>>(); }

// Builds the case's op from its inputs through the public builder methods.
NodeId build(Graph& g, const std::string& op, const json& a, const std::vector<NodeId>& x) {
  using U = NodeId (Graph::*)(NodeId, Graph::Loc);
  static const std::map<std::string, U> unary = {
      {"neg", &Graph::neg},         {"abs", &Graph::abs},
      {"sign", &Graph::sign},       {"exp", &Graph::exp},
      {"log", &Graph::log},         {"sqrt", &Graph::sqrt},
      {"rsqrt", &Graph::rsqrt},     {"reciprocal", &Graph::reciprocal},
      {"square", &Graph::square},   {"relu", &Graph::relu},
      {"sigmoid", &Graph::sigmoid}, {"tanh", &Graph::tanh},
      {"silu", &Graph::silu},       {"softplus", &Graph::softplus},
      {"sin", &Graph::sin},         {"cos", &Graph::cos},
      {"erf", &Graph::erf},         {"global_avg_pool", &Graph::global_avg_pool}};
  using B = NodeId (Graph::*)(NodeId, NodeId, Graph::Loc);
  static const std::map<std::string, B> binary = {
      {"add", &Graph::add}, {"sub", &Graph::sub},         {"mul", &Graph::mul},         {"div", &Graph::div},
      {"pow", &Graph::pow}, {"maximum", &Graph::maximum}, {"minimum", &Graph::minimum}, {"eq", &Graph::eq},
      {"ne", &Graph::ne},   {"lt", &Graph::lt},           {"le", &Graph::le},           {"gt", &Graph::gt},
      {"ge", &Graph::ge},   {"gather", &Graph::gather}};
  using R = NodeId (Graph::*)(NodeId, std::vector<int64_t>, bool, Graph::Loc);
  static const std::map<std::string, R> reduce = {{"sum", &Graph::sum},
                                                  {"mean", &Graph::mean},
                                                  {"max", &Graph::max},
                                                  {"min", &Graph::min},
                                                  {"variance", &Graph::variance}};
  using L = NodeId (Graph::*)(NodeId, NodeId, Reduction, Graph::Loc);
  static const std::map<std::string, L> loss = {{"cross_entropy", &Graph::cross_entropy_loss},
                                                {"mse_loss", &Graph::mse_loss},
                                                {"l1_loss", &Graph::l1_loss},
                                                {"bce_with_logits", &Graph::bce_with_logits}};
  const auto loc = Graph::Loc::current();
  if (auto it = unary.find(op); it != unary.end()) return (g.*(it->second))(x[0], loc);
  if (auto it = binary.find(op); it != binary.end()) return (g.*(it->second))(x[0], x[1], loc);
  if (auto it = reduce.find(op); it != reduce.end())
    return (g.*(it->second))(x[0], ints(a, "axes"), a.at("keepdim").get<bool>(), loc);
  if (auto it = loss.find(op); it != loss.end()) return (g.*(it->second))(x[0], x[1], reduction_of(a), loc);
  if (op == "leaky_relu") return g.leaky_relu(x[0], a.at("alpha").get<double>());
  if (op == "elu") return g.elu(x[0], a.at("alpha").get<double>());
  if (op == "gelu") return g.gelu(x[0], a.at("tanh").get<bool>());
  if (op == "clamp") return g.clamp(x[0], a.at("lo").get<double>(), a.at("hi").get<double>());
  if (op == "where") return g.where(x[0], x[1], x[2]);
  if (op == "matmul")
    return g.matmul(x[0], x[1], a.value("transpose_a", false), a.value("transpose_b", false));
  if (op == "argmax") return g.argmax(x[0], a.at("axis").get<int64_t>(), a.at("keepdim").get<bool>());
  if (op == "softmax") return g.softmax(x[0], a.at("axis").get<int64_t>());
  if (op == "log_softmax") return g.log_softmax(x[0], a.at("axis").get<int64_t>());
  if (op == "cross_entropy_index")
    return g.cross_entropy_loss_index(x[0], x[1], a.at("ignore_index").get<int64_t>(), reduction_of(a));
  if (op == "layer_norm") return g.layer_norm(x[0], x[1], x[2], a.at("eps").get<double>());
  if (op == "rms_norm") return g.rms_norm(x[0], x[1], a.at("eps").get<double>());
  if (op == "batch_norm")
    return g.batch_norm(x[0], x[1], x[2], x[3], x[4], a.at("training").get<bool>(),
                        a.at("eps").get<double>());
  if (op == "group_norm")
    return g.group_norm(x[0], x[1], x[2], a.at("groups").get<int64_t>(), a.at("eps").get<double>());
  if (op == "reshape") return g.reshape(x[0], ints(a, "shape"));
  if (op == "permute") return g.permute(x[0], ints(a, "perm"));
  if (op == "transpose") return g.transpose(x[0], a.at("a").get<int64_t>(), a.at("b").get<int64_t>());
  if (op == "broadcast_to") return g.broadcast_to(x[0], ints(a, "shape"));
  if (op == "slice")
    return g.slice(x[0], a.at("axis").get<int64_t>(), a.at("start").get<int64_t>(),
                   a.at("stop").get<int64_t>(), a.at("step").get<int64_t>());
  if (op == "concat") return g.concat(x, a.at("axis").get<int64_t>());
  if (op == "split")
    return g.split(x[0], ints(a, "sizes"), a.at("axis").get<int64_t>()).at(a.at("index").get<size_t>());
  if (op == "squeeze") return g.squeeze(x[0], a.at("axis").get<int64_t>());
  if (op == "unsqueeze") return g.unsqueeze(x[0], a.at("axis").get<int64_t>());
  if (op == "pad") return g.pad(x[0], ints(a, "before"), ints(a, "after"), a.at("value").get<double>());
  if (op == "scatter_add") return g.scatter_add(x[0], x[1], a.at("rows").get<int64_t>());
  if (op == "conv2d")
    return g.conv2d(x[0], x[1], ints(a, "stride"), ints(a, "padding"), ints(a, "dilation"),
                    a.at("groups").get<int64_t>());
  if (op == "max_pool2d") return g.max_pool2d(x[0], ints(a, "kernel"), ints(a, "stride"), ints(a, "padding"));
  if (op == "avg_pool2d") return g.avg_pool2d(x[0], ints(a, "kernel"), ints(a, "stride"), ints(a, "padding"));
  if (op == "upsample_nearest") return g.upsample_nearest(x[0], a.at("factor").get<int64_t>());
  if (op == "sdpa") {
    std::optional<NodeId> mask;
    if (x.size() > 3) mask = x[3];
    return g.scaled_dot_product_attention(x[0], x[1], x[2], a.at("causal").get<bool>(), mask,
                                          a.at("scale").get<double>());
  }
  if (op == "rope") return g.rope(x[0], a.at("theta").get<double>(), a.at("offset").get<int64_t>());
  throw std::runtime_error("test_torch_parity: no builder for op '" + op + "'");
}

void check_case(const json& c) {
  const std::string name = c.at("name");
  SCOPED_TRACE(name);
  Graph g;
  std::vector<NodeId> ins;
  std::map<std::string, HostTensor> feeds;
  std::vector<std::pair<std::string, NodeId>> diff;
  for (const json& i : c.at("inputs")) {
    const std::string n = i.at("name");
    const Shape s = i.at("shape").get<Shape>();
    // differentiable inputs are parameters, so autodiff produces grad/<name> for them
    NodeId id = i.at("grad").get<bool>() ? g.parameter(n, s)
                                         : g.input(n, s, i.at("dtype") == "i32" ? DType::I32 : DType::F32);
    if (i.at("grad").get<bool>()) diff.emplace_back(n, id);
    ins.push_back(id);
    feeds[n] = tensor_of(i.at("shape"), i.at("data"));
  }
  NodeId out = build(g, c.at("op"), c.at("attrs"), ins);
  const json& ref = c.at("output");
  ASSERT_EQ(g.node(out).shape, ref.at("shape").get<Shape>());

  const bool has_grads = c.contains("upstream");
  NodeId loss;
  if (has_grads) {
    // L = sum(out * upstream): the gradients are those of the op with upstream chained in
    NodeId up = g.input("upstream__", g.node(out).shape);
    feeds["upstream__"] = HostTensor(g.node(out).shape, c.at("upstream").get<std::vector<double>>());
    loss = g.sum(g.mul(out, up));
  }
  g.set_outputs({out});
  std::vector<NodeId> wrt;
  for (auto& d : diff) wrt.push_back(d.second);
  Graph tg = has_grads ? differentiate(g, loss, wrt) : g;
  std::vector<NodeId> want{out};
  for (auto& [n, id] : diff) {
    if (!has_grads) break;
    auto gid = tg.gradient(id);
    ASSERT_TRUE(gid.has_value()) << "no gradient for " << n;
    want.push_back(*gid);
  }
  std::vector<HostTensor> vals = reference::evaluate(tg, feeds, want);
  EXPECT_TRUE(close(vals[0].data, ref.at("data").get<std::vector<double>>(), kRelTol, name + " output"));
  if (has_grads) {
    for (size_t i = 0; i < diff.size(); ++i)
      EXPECT_TRUE(close(vals[i + 1].data, c.at("grads").at(diff[i].first).get<std::vector<double>>(), kRelTol,
                        name + " grad " + diff[i].first));
  }
}

}  // namespace

TEST(TorchParity, ScriptRunsAndCoversEveryFamily) {
  const json& doc = oracle();
  std::set<std::string> ops;
  for (const json& c : doc.at("cases")) ops.insert(c.at("op").get<std::string>());
  for (const char* op : {"add", "matmul", "sum", "softmax", "cross_entropy", "cross_entropy_index",
                         "layer_norm", "batch_norm", "group_norm", "slice", "concat", "pad", "gather",
                         "scatter_add", "conv2d", "max_pool2d", "avg_pool2d", "sdpa", "rope"})
    EXPECT_TRUE(ops.count(op)) << op << " has no torch case";
}

// Every case, each failure traced with the case name (SCOPED_TRACE in check_case).
TEST(TorchParity, EveryOpMatchesTorch) {
  size_t n = 0;
  for (const json& c : oracle().at("cases")) {
    try {
      check_case(c);
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.at("name").get<std::string>() << ": " << e.what();
    }
    ++n;
  }
  EXPECT_GE(n, 100u);
}

TEST(TorchParity, ReadmeMlpTwentySgdSteps) {
  const json& m = oracle().at("mlp");
  Graph g;
  const Shape xs = m.at("x_shape").get<Shape>(), ls = m.at("labels_shape").get<Shape>();
  const Shape w1s = m.at("w1_shape").get<Shape>(), w2s = m.at("w2_shape").get<Shape>();
  // the README example, verbatim
  auto x = g.input("x", xs);
  auto labels = g.input("labels", ls);
  auto w1 = g.parameter("w1", w1s);
  auto h = g.relu(g.matmul(x, w1));
  auto w2 = g.parameter("w2", w2s);
  auto logits = g.matmul(h, w2);
  auto loss = g.cross_entropy_loss(logits, labels);
  g.set_outputs({loss});
  Graph tg = differentiate(g, loss);
  ASSERT_TRUE(tg.gradient(w1) && tg.gradient(w2));

  std::map<std::string, HostTensor> feeds{{"x", tensor_of(m.at("x_shape"), m.at("x"))},
                                          {"labels", tensor_of(m.at("labels_shape"), m.at("labels"))},
                                          {"w1", tensor_of(m.at("w1_shape"), m.at("w1_init"))},
                                          {"w2", tensor_of(m.at("w2_shape"), m.at("w2_init"))}};
  const double lr = m.at("lr").get<double>();
  const auto losses = m.at("losses").get<std::vector<double>>();
  ASSERT_EQ(losses.size(), 20u);
  for (size_t step = 0; step < losses.size(); ++step) {
    auto v = reference::evaluate(tg, feeds, {loss, *tg.gradient(w1), *tg.gradient(w2)});
    ASSERT_TRUE(close(v[0].data, {losses[step]}, kRelTol, "loss at step " + std::to_string(step)));
    for (size_t i = 0; i < v[1].size(); ++i) feeds["w1"].data[i] -= lr * v[1].data[i];
    for (size_t i = 0; i < v[2].size(); ++i) feeds["w2"].data[i] -= lr * v[2].data[i];
  }
  EXPECT_LT(losses.back(), losses.front());  // the oracle itself trains
  EXPECT_TRUE(close(feeds["w1"].data, m.at("w1_final").get<std::vector<double>>(), kRelTol, "final w1"));
  EXPECT_TRUE(close(feeds["w2"].data, m.at("w2_final").get<std::vector<double>>(), kRelTol, "final w2"));
}

// nn::TransformerBlock (RMSNorm, causal GQA with RoPE, SwiGLU, residuals) against the same block written
// in torch: the forward value and the gradients of the input and of every parameter, found by name.
TEST(TorchParity, TransformerBlockForwardAndGradients) {
  const json& t = oracle().at("transformer_block");
  const json& cfg = t.at("config");
  const int64_t B = cfg.at("batch"), S = cfg.at("seq"), D = cfg.at("dim");
  Graph g;
  nn::Context ctx(g, 0);
  nn::AttentionConfig ac;
  ac.dim = D;
  ac.heads = cfg.at("heads");
  ac.kv_heads = cfg.at("kv_heads");
  ac.rope_theta = cfg.at("theta");
  nn::TransformerBlock blk(ctx, "blk", ac, cfg.at("ffn_hidden").get<int64_t>(), cfg.at("eps").get<double>());
  NodeId x = g.parameter("x", {B, S, D});
  NodeId y = blk(x);
  NodeId up = g.input("upstream", {B, S, D});
  NodeId loss = g.sum(g.mul(y, up));
  Graph dg = differentiate(g, loss);

  reference::Feeds feeds{{"x", HostTensor({B, S, D}, t.at("x").get<std::vector<double>>())},
                         {"upstream", HostTensor({B, S, D}, t.at("upstream").get<std::vector<double>>())}};
  ASSERT_EQ(ctx.weights().size(), t.at("params").size());
  for (const auto& [name, p] : t.at("params").items()) {
    ASSERT_TRUE(ctx.weights().count(name)) << "the block has no parameter " << name;
    feeds[name] = tensor_of(p.at("shape"), p.at("data"));
  }
  std::vector<NodeId> want{y};
  std::vector<std::string> names;
  for (const auto& [name, _] : t.at("grads").items()) {
    auto p = g.find(name);
    ASSERT_TRUE(p.has_value()) << name;
    auto gr = dg.gradient(*p);
    ASSERT_TRUE(gr.has_value()) << "no gradient for " << name;
    want.push_back(*gr);
    names.push_back(name);
  }
  auto v = reference::evaluate(dg, feeds, want);
  EXPECT_TRUE(close(v[0].data, t.at("output").get<std::vector<double>>(), kRelTol, "block output"));
  for (size_t i = 0; i < names.size(); ++i)
    EXPECT_TRUE(close(v[i + 1].data, t.at("grads").at(names[i]).get<std::vector<double>>(), kRelTol,
                      "grad " + names[i]));
}

// A small CNN made of nn layers (Conv2d with bias, BatchNorm2d in training mode, grouped strided conv,
// Linear) with pooling and an index cross-entropy: the loss and every gradient against torch.
TEST(TorchParity, SmallCnnLossAndGradients) {
  const json& t = oracle().at("cnn");
  Graph g;
  nn::Context ctx(g, 0);
  nn::Conv2d conv1(ctx, "conv1", 3, 4, 3, 1, 1);
  nn::BatchNorm2d bn1(ctx, "bn1", 4, true);
  nn::Conv2d conv2(ctx, "conv2", 4, 6, 3, 2, 1, 1, 2);
  nn::Linear fc(ctx, "fc", 6, 5);
  NodeId x = g.parameter("x", {2, 3, 6, 6});
  NodeId labels = g.input("labels", {2}, DType::I32);
  NodeId h = g.max_pool2d(g.relu(bn1(conv1(x))), {2, 2});
  NodeId logits = fc(g.global_avg_pool(g.gelu(conv2(h))));
  NodeId loss = g.cross_entropy_loss_index(logits, labels);
  Graph dg = differentiate(g, loss);

  reference::Feeds feeds{{"x", HostTensor({2, 3, 6, 6}, t.at("x").get<std::vector<double>>())},
                         {"labels", HostTensor({2}, t.at("labels").get<std::vector<double>>())}};
  for (const auto& [name, v] : ctx.buffers())
    feeds[name] = HostTensor({int64_t(v.size())}, {v.begin(), v.end()});
  ASSERT_EQ(ctx.weights().size(), t.at("params").size());
  for (const auto& [name, p] : t.at("params").items()) {
    ASSERT_TRUE(ctx.weights().count(name)) << "the CNN has no parameter " << name;
    feeds[name] = tensor_of(p.at("shape"), p.at("data"));
  }
  std::vector<NodeId> want{loss};
  std::vector<std::string> names;
  for (const auto& [name, _] : t.at("grads").items()) {
    auto gr = dg.gradient(*g.find(name));
    ASSERT_TRUE(gr.has_value()) << "no gradient for " << name;
    want.push_back(*gr);
    names.push_back(name);
  }
  auto v = reference::evaluate(dg, feeds, want);
  EXPECT_TRUE(close(v[0].data, {t.at("loss").get<double>()}, kRelTol, "loss"));
  for (size_t i = 0; i < names.size(); ++i)
    EXPECT_TRUE(close(v[i + 1].data, t.at("grads").at(names[i]).get<std::vector<double>>(), kRelTol,
                      "grad " + names[i]));
}

namespace {

// float32 on the GPU against torch's float64: |gpu - want| <= atol + rtol * max(|want|, 1e-3 * max|want|).
::testing::AssertionResult close_gpu(const std::vector<float>& got, const std::vector<double>& want,
                                     double rtol, const std::string& what) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs " << want.size();
  double scale = 0.0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(double(got[i]) - want[i]);
    if (!(err <= 1e-5 + rtol * std::max(std::abs(want[i]), 1e-3 * scale)))
      return ::testing::AssertionFailure()
             << what << "[" << i << "]: gpu " << got[i] << ", torch " << want[i] << " (|err| " << err << ")";
  }
  return ::testing::AssertionSuccess();
}

// One case through a compiled GPU session: the op's value, and with an upstream the gradient of every
// differentiable input (a parameter of a training session without optimizer, loss = sum(out * upstream)).
void check_case_gpu(const json& c) {
  const std::string name = c.at("name");
  SCOPED_TRACE(name);
  Graph g;
  std::vector<NodeId> ins;
  std::vector<std::pair<std::string, NodeId>> diff;
  reference::Feeds feeds;
  for (const json& i : c.at("inputs")) {
    const std::string n = i.at("name");
    const Shape s = i.at("shape").get<Shape>();
    NodeId id = i.at("grad").get<bool>() ? g.parameter(n, s)
                                         : g.input(n, s, i.at("dtype") == "i32" ? DType::I32 : DType::F32);
    if (i.at("grad").get<bool>()) diff.emplace_back(n, id);
    ins.push_back(id);
    feeds[n] = tensor_of(i.at("shape"), i.at("data"));
  }
  NodeId out = build(g, c.at("op"), c.at("attrs"), ins);
  const bool has_grads = c.contains("upstream") && !diff.empty();
  if (has_grads) {
    NodeId up = g.input("upstream__", g.node(out).shape);
    feeds["upstream__"] = HostTensor(g.node(out).shape, c.at("upstream").get<std::vector<double>>());
    g.set_outputs({g.sum(g.mul(out, up)), out});
  } else {
    g.set_outputs({out});
  }
  // Tolerances: f32 rounding on ops that sum many products or run long float chains.
  const std::string op = c.at("op");
  const double rtol = op == "conv2d" || op == "sdpa" || op == "batch_norm" || op == "group_norm" ||
                              op == "layer_norm" || op == "rms_norm" || op == "variance" || op == "pow"
                          ? 2e-3
                          : 3e-4;
  Session s = test::build_gpu(g, has_grads);
  test::feed_all(s, g, feeds);
  s.run();
  EXPECT_TRUE(close_gpu(s.read_output(has_grads ? 1 : 0),
                        c.at("output").at("data").get<std::vector<double>>(), rtol, name + " output (gpu)"));
  if (!has_grads) return;
  for (const auto& [n, id] : diff)
    EXPECT_TRUE(close_gpu(s.read_gradient(n), c.at("grads").at(n).get<std::vector<double>>(), rtol,
                          name + " grad " + n + " (gpu)"));
}

class TorchParityGpu : public test::GpuTest {};

}  // namespace

// Every torch case, compiled and run on the GPU (lavapipe in CI).
TEST_F(TorchParityGpu, EveryOpOnTheGpuMatchesTorch) {
  size_t n = 0;
  for (const json& c : oracle().at("cases")) {
    try {
      check_case_gpu(c);
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.at("name").get<std::string>() << ": " << e.what();
    }
    ++n;
  }
  EXPECT_GE(n, 100u);
}

namespace {

std::vector<double> decode(const json& data) {
  std::vector<double> v;
  for (const json& e : data) {
    if (e.is_number())
      v.push_back(e.get<double>());
    else if (e == "nan")
      v.push_back(std::nan(""));
    else
      v.push_back(e == "inf" ? INFINITY : -INFINITY);
  }
  return v;
}

const char* value_class(double v) {
  return std::isnan(v) ? "NaN" : std::isinf(v) ? (v > 0 ? "+Inf" : "-Inf") : "finite";
}

// Same class (NaN / +Inf / -Inf / finite) everywhere, finite values within rtol.
::testing::AssertionResult same_classes(const std::vector<double>& got, const std::vector<double>& want,
                                        double rtol, const std::string& what) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    bool ok = std::string(value_class(got[i])) == value_class(want[i]);
    if (ok && std::isfinite(want[i])) ok = std::abs(got[i] - want[i]) <= 1e-6 + rtol * std::abs(want[i]);
    if (!ok)
      return ::testing::AssertionFailure()
             << what << "[" << i << "]: got " << got[i] << ", torch " << want[i];
  }
  return ::testing::AssertionSuccess();
}

// The case's graph (every input an f32 input), its feeds and the torch output.
struct NonFiniteCase {
  Graph g;
  reference::Feeds feeds;
  std::vector<double> want;
};

NonFiniteCase nonfinite_case(const json& c) {
  NonFiniteCase k;
  std::vector<NodeId> ins;
  for (const json& i : c.at("inputs")) {
    const Shape s = i.at("shape").get<Shape>();
    ins.push_back(k.g.input(i.at("name").get<std::string>(), s));
    k.feeds[i.at("name").get<std::string>()] = HostTensor(s, decode(i.at("data")));
  }
  NodeId out = build(k.g, c.at("op"), c.at("attrs"), ins);
  k.g.set_outputs({out});
  k.want = decode(c.at("output").at("data"));
  return k;
}

class TorchParityNonFiniteGpu : public test::GpuTest {};

}  // namespace

// The CPU reference propagates NaN and Inf exactly as torch does (it is the oracle of the GPU op tests).
TEST(TorchParity, NonFiniteValuesFollowTorchInTheReference) {
  size_t n = 0;
  for (const json& c : oracle().at("nonfinite")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    NonFiniteCase k = nonfinite_case(c);
    EXPECT_TRUE(same_classes(reference::evaluate_outputs(k.g, k.feeds)[0].data, k.want, 1e-9, c.at("name")));
    ++n;
  }
  EXPECT_GE(n, 40u);
}

// ... and so does every GPU kernel (f32, so finite values within 1e-3).
TEST_F(TorchParityNonFiniteGpu, NonFiniteValuesFollowTorchOnTheGpu) {
  for (const json& c : oracle().at("nonfinite")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    NonFiniteCase k = nonfinite_case(c);
    test::round_to_float(k.feeds);
    Session s = test::build_gpu(k.g, false);
    test::feed_all(s, k.g, k.feeds);
    s.run();
    const std::vector<float> got = s.read_output(0);
    EXPECT_TRUE(same_classes(std::vector<double>(got.begin(), got.end()), k.want, 1e-3, c.at("name")));
  }
}
