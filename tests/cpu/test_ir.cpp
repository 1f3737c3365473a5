// IR: construction, interning, provenance, names, shape rules and their error messages, printing.
#include <gtest/gtest.h>

#include <set>

#include "meganeura/autodiff/autodiff.hpp"
#include "meganeura/ir/graph.hpp"
#include "meganeura/ops/ops.hpp"

namespace meganeura {
namespace {

// Runs `f`, expects a ShapeError, and returns its message.
template <class F>
std::string shape_error(F f) {
  try {
    f();
  } catch (const ShapeError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ShapeError";
  return {};
}

TEST(Ir, HeadlineExampleBuildsWithExpectedShapes) {
  Graph g;
  auto x = g.input("x", {32, 784});
  auto labels = g.input("labels", {32, 10});
  auto w1 = g.parameter("w1", {784, 128});
  auto h = g.relu(g.matmul(x, w1));
  auto w2 = g.parameter("w2", {128, 10});
  auto logits = g.matmul(h, w2);
  auto loss = g.cross_entropy_loss(logits, labels);
  g.set_outputs({loss});
  EXPECT_EQ(g.node(h).shape, (Shape{32, 128}));
  EXPECT_EQ(g.node(logits).shape, (Shape{32, 10}));
  EXPECT_EQ(g.node(loss).shape, Shape{});  // a true scalar, not [1]
  EXPECT_EQ(g.parameters(), (std::vector<NodeId>{w1, w2}));
  EXPECT_EQ(g.inputs(), (std::vector<NodeId>{x, labels}));
  EXPECT_EQ(g.outputs(), std::vector<NodeId>{loss});
}

TEST(Ir, EqualStructureIsOneNode) {
  Graph g;
  auto x = g.input("x", {4, 3});
  auto w = g.parameter("w", {3, 2});
  auto a = g.matmul(x, w);
  auto b = g.matmul(x, w);
  EXPECT_EQ(a, b);
  size_t n = g.size();
  EXPECT_EQ(g.relu(a), g.relu(b));
  EXPECT_EQ(g.size(), n + 1);
  // Attributes are part of the identity.
  EXPECT_NE(g.matmul(x, w), g.matmul(g.input("x2", {3, 4}), w, true, false));
  EXPECT_NE(g.leaky_relu(a, 0.1), g.leaky_relu(a, 0.2));
  EXPECT_EQ(g.leaky_relu(a, 0.1), g.leaky_relu(a, 0.1));
  EXPECT_EQ(g.scalar(2.0), g.scalar(2.0));
  EXPECT_NE(g.scalar(2.0), g.scalar(3.0));
  EXPECT_EQ(g.constant({1, 2, 3}, {3}), g.constant({1, 2, 3}, {3}));
  EXPECT_NE(g.constant({1, 2, 3}, {3}), g.constant({1, 2, 4}, {3}));
  // Inputs and parameters are identities: equal shapes do not merge them.
  EXPECT_NE(g.parameter("p", {2}), g.parameter("q", {2}));
}

TEST(Ir, ReductionAxesAreStoredCanonical) {
  Graph g;
  auto x = g.input("x", {2, 3, 4});
  EXPECT_EQ(g.sum(x, {-1}), g.sum(x, {2}));
  EXPECT_EQ(g.sum(x), g.sum(x, {0, 1, 2}));
  EXPECT_EQ(g.mean(x, {2, 0}, true), g.mean(x, {0, -1}, true));
  EXPECT_EQ(g.node(g.max(x, {-2, 0})).attrs.axes, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(g.softmax(x, -1), g.softmax(x, 2));
  EXPECT_EQ(g.node(g.log_softmax(x)).attrs.axes, std::vector<int64_t>{2});
  EXPECT_EQ(g.node(g.argmax(x, -3)).attrs.axes, std::vector<int64_t>{0});
}

TEST(Ir, DuplicateLeafNameIsAGraphError) {
  Graph g;
  g.parameter("w", {2});
  EXPECT_THROW(g.parameter("w", {3}), GraphError);
  EXPECT_THROW(g.input("w", {3}), GraphError);
  // Leaves keep their names, and no other node takes one.
  auto x = g.input("x", {2});
  EXPECT_THROW(g.named(NodeId{0}, "v"), GraphError);
  EXPECT_THROW(g.named(g.relu(x), "x"), GraphError);
  EXPECT_EQ(g.named(x, "x"), x);
}

TEST(Ir, ProvenanceRecordsTheUsersLineAndName) {
  Graph g;
  auto x = g.input("x", {2, 3});
  int line = __LINE__ + 1;
  auto h = g.tanh(x);
  g.named(h, "blk3.act");
  const Node& n = g.node(h);
  EXPECT_EQ(n.prov.loc.line(), uint32_t(line));
  EXPECT_NE(std::string(n.prov.loc.file_name()).find("test_ir.cpp"), std::string::npos);
  EXPECT_EQ(n.prov.name, "blk3.act");
  EXPECT_EQ(g.find("blk3.act"), h);
  EXPECT_EQ(g.find("x"), x);
  EXPECT_FALSE(g.find("nope").has_value());
}

TEST(Ir, ScalarsBroadcastWithoutMaterialisation) {
  Graph g;
  auto x = g.input("x", {8, 16});
  auto y = g.mul(x, g.scalar(3.0));
  EXPECT_EQ(g.node(y).shape, (Shape{8, 16}));
  const Node& s = g.node(g.node(y).inputs[1]);
  EXPECT_EQ(s.op, Op::Fill);
  EXPECT_EQ(s.shape, Shape{});
  // A broadcast fill stays a fill.
  auto b = g.broadcast_to(g.scalar(1.5), {8, 16});
  EXPECT_EQ(g.node(b).op, Op::Fill);
  EXPECT_EQ(g.node(b).shape, (Shape{8, 16}));
  // A scalar adopts the other operand's dtype.
  auto h = g.input("h", {4}, DType::F16);
  EXPECT_EQ(g.node(g.add(h, g.scalar(1.0))).dtype, DType::F16);
}

TEST(Ir, BroadcastShapes) {
  EXPECT_EQ(broadcast_shapes({3, 1, 5}, {4, 5}), (Shape{3, 4, 5}));
  EXPECT_EQ(broadcast_shapes({}, {2, 2}), (Shape{2, 2}));
  EXPECT_FALSE(broadcast_shapes({3}, {4}).has_value());
  Graph g;
  auto a = g.input("a", {2, 1, 3});
  auto b = g.input("b", {4, 1});
  EXPECT_EQ(g.node(g.add(a, b)).shape, (Shape{2, 4, 3}));
  auto c = g.input("c", {5});
  EXPECT_EQ(g.node(g.where(g.gt(b, g.scalar(0.0)), c, g.scalar(0.0))).shape, (Shape{4, 5}));
}

TEST(Ir, MatmulShapeRules) {
  Graph g;
  auto a = g.input("a", {5, 2, 3, 4});
  auto b = g.input("b", {2, 4, 6});
  EXPECT_EQ(g.node(g.matmul(a, b)).shape, (Shape{5, 2, 3, 6}));
  auto bt = g.input("bt", {6, 4});
  EXPECT_EQ(g.node(g.matmul(a, bt, false, true)).shape, (Shape{5, 2, 3, 6}));
  auto at = g.input("at", {4, 3});
  EXPECT_EQ(g.node(g.matmul(at, bt, true, true)).shape, (Shape{3, 6}));
}

TEST(Ir, ReductionShapeRules) {
  Graph g;
  auto x = g.input("x", {2, 3, 4});
  EXPECT_EQ(g.node(g.sum(x)).shape, Shape{});
  EXPECT_EQ(g.node(g.sum(x, {1})).shape, (Shape{2, 4}));
  EXPECT_EQ(g.node(g.mean(x, {0, -1}, true)).shape, (Shape{1, 3, 1}));
  EXPECT_EQ(g.node(g.variance(x, {2})).shape, (Shape{2, 3}));
  auto am = g.argmax(x, -1);
  EXPECT_EQ(g.node(am).shape, (Shape{2, 3}));
  EXPECT_EQ(g.node(am).dtype, DType::I32);
  EXPECT_EQ(g.node(g.softmax(x, 1)).shape, (Shape{2, 3, 4}));
}

TEST(Ir, LossShapes) {
  Graph g;
  auto z = g.input("z", {6, 5});
  auto t = g.input("t", {6, 5});
  auto l = g.input("l", {6}, DType::I32);
  EXPECT_EQ(g.node(g.cross_entropy_loss(z, t)).shape, Shape{});
  EXPECT_EQ(g.node(g.cross_entropy_loss(z, t, Reduction::Sum)).shape, Shape{});
  EXPECT_EQ(g.node(g.cross_entropy_loss(z, t, Reduction::None)).shape, Shape{6});
  EXPECT_EQ(g.node(g.cross_entropy_loss_index(z, l)).shape, Shape{});
  EXPECT_EQ(g.node(g.mse_loss(z, t, Reduction::None)).shape, (Shape{6, 5}));
  EXPECT_EQ(g.node(g.bce_with_logits(z, t)).shape, Shape{});
}

TEST(Ir, ShapeErrorNamesOpShapesNodeAndUsersLine) {
  Graph g;
  auto x = g.input("x", {32, 784});
  auto w = g.parameter("w1", {100, 128});
  int line = __LINE__ + 1;
  std::string m = shape_error([&] { g.matmul(x, w); });
  EXPECT_NE(m.find("[matmul]"), std::string::npos) << m;
  EXPECT_NE(m.find("[32,784]"), std::string::npos) << m;
  EXPECT_NE(m.find("[100,128]"), std::string::npos) << m;
  EXPECT_NE(m.find("'x'"), std::string::npos) << m;
  EXPECT_NE(m.find("'w1'"), std::string::npos) << m;
  EXPECT_NE(m.find("test_ir.cpp:" + std::to_string(line)), std::string::npos) << m;
}

TEST(Ir, BroadcastErrorNamesBothShapes) {
  Graph g;
  auto a = g.input("a", {3, 4});
  auto b = g.input("b", {5});
  int line = __LINE__ + 1;
  std::string m = shape_error([&] { g.add(a, b); });
  EXPECT_NE(m.find("[add]"), std::string::npos) << m;
  EXPECT_NE(m.find("[3,4]"), std::string::npos) << m;
  EXPECT_NE(m.find("[5]"), std::string::npos) << m;
  EXPECT_NE(m.find("test_ir.cpp:" + std::to_string(line)), std::string::npos) << m;
}

TEST(Ir, MoreShapeErrors) {
  Graph g;
  auto x = g.input("x", {2, 3});
  auto l = g.input("l", {3}, DType::I32);
  auto f = g.input("f", {2}, DType::F32);
  EXPECT_NE(shape_error([&] { g.sum(x, {2}); }).find("[sum]"), std::string::npos);
  EXPECT_NE(shape_error([&] { g.sum(x, {1, -1}); }).find("distinct"), std::string::npos);
  EXPECT_NE(shape_error([&] { g.reshape(x, {4, 2}); }).find("[reshape]"), std::string::npos);
  EXPECT_NE(shape_error([&] { g.reshape(x, {-1, 4}); }).find("[reshape]"), std::string::npos);
  EXPECT_EQ(g.node(g.reshape(x, {-1})).shape, Shape{6});
  EXPECT_NE(shape_error([&] { g.permute(x, {0, 0}); }).find("[permute]"), std::string::npos);
  EXPECT_NE(shape_error([&] { g.cross_entropy_loss_index(x, l); }).find("[3]"), std::string::npos);
  EXPECT_NE(shape_error([&] { g.cross_entropy_loss_index(x, f); }).find("i32"), std::string::npos);
  EXPECT_NE(shape_error([&] { g.broadcast_to(x, {3, 3}); }).find("[broadcast_to]"), std::string::npos);
  EXPECT_NE(shape_error([&] { g.exp(l); }).find("[exp]"), std::string::npos);
  EXPECT_NE(shape_error([&] { g.matmul(f, f); }).find("rank >= 2"), std::string::npos);
  EXPECT_NE(shape_error([&] { g.squeeze(x, 0); }).find("[squeeze]"), std::string::npos);
  EXPECT_NE(shape_error([&] { g.clamp(x, 2.0, 1.0); }).find("[clamp]"), std::string::npos);
  EXPECT_NE(shape_error([&] { g.mse_loss(x, f); }).find("[mse_loss]"), std::string::npos);
}

TEST(Ir, DtypeMismatchIsAShapeError) {
  Graph g;
  auto a = g.input("a", {2}, DType::I32);
  auto b = g.input("b", {2}, DType::F32);
  std::string m = shape_error([&] { g.add(a, b); });
  EXPECT_NE(m.find("i32"), std::string::npos) << m;
  EXPECT_NE(m.find("f32"), std::string::npos) << m;
}

TEST(Ir, FloatsOfDifferentWidthsMeetInF32) {
  Graph g;
  auto h = g.input("h", {2, 3}, DType::F16);
  auto b = g.input("b", {2, 3}, DType::BF16);
  auto f = g.input("f", {3, 4});
  EXPECT_EQ(g.node(g.add(h, b)).dtype, DType::F32);
  EXPECT_EQ(g.node(g.matmul(h, f)).dtype, DType::F32);
  EXPECT_EQ(g.node(g.mul(h, h)).dtype, DType::F16);
  EXPECT_EQ(g.node(g.mul(h, g.scalar(2.0))).dtype, DType::F16);
}

TEST(Ir, InvalidNodeIdIsAGraphError) {
  Graph g;
  auto x = g.input("x", {2});
  EXPECT_THROW(g.relu(NodeId{}), GraphError);
  EXPECT_THROW(g.add(x, NodeId{57}), GraphError);
  EXPECT_THROW(g.node(NodeId{99}), GraphError);
  EXPECT_THROW(g.set_outputs({NodeId{7}}), GraphError);
}

template <class E, class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return {};
}

// An id made by one Graph is refused by another, even where its index exists there; a copy of a graph
// (what autodiff derives from) shares its ids.
TEST(Ir, NodeIdOfAnotherGraphIsAGraphErrorNamingTheLine) {
  Graph a, b;
  auto x = a.input("x", {2});
  b.input("y", {2});
  const int line = __LINE__ + 1;
  std::string e = error_of<GraphError>([&] { b.relu(x); });
  EXPECT_NE(e.find("another Graph"), std::string::npos) << e;
  EXPECT_NE(e.find("test_ir.cpp:" + std::to_string(line)), std::string::npos) << e;
  EXPECT_THROW(b.node(x), GraphError);
  EXPECT_THROW(b.set_outputs({x}), GraphError);
  EXPECT_THROW(b.named(x, "v"), GraphError);
  Graph c = a;
  EXPECT_NO_THROW(c.relu(x));
  EXPECT_EQ(c.node(x).prov.name, "x");
}

TEST(Ir, ZeroSizeDimensionsAreShapeErrorsAtTheBuilderLine) {
  Graph g;
  int line = __LINE__ + 1;
  std::string e = error_of<ShapeError>([&] { g.parameter("w", {3, 0}); });
  EXPECT_NE(e.find("dimension >= 1"), std::string::npos) << e;
  EXPECT_NE(e.find("[3,0]"), std::string::npos) << e;
  EXPECT_NE(e.find("'w'"), std::string::npos) << e;
  EXPECT_NE(e.find("test_ir.cpp:" + std::to_string(line)), std::string::npos) << e;
  EXPECT_THROW(g.input("x", {0}), ShapeError);
  EXPECT_THROW(g.fill(1.0, {2, 0}), ShapeError);
  EXPECT_THROW(g.constant({}, {0}), ShapeError);
  auto x = g.input("x", {4, 3});
  line = __LINE__ + 1;
  e = error_of<ShapeError>([&] { g.slice(x, 0, 2, 2); });  // an empty slice
  EXPECT_NE(e.find("test_ir.cpp:" + std::to_string(line)), std::string::npos) << e;
  EXPECT_NO_THROW(g.slice(x, 0, 2, 3));
}

// Regression (fuzz/fuzz_graph.cpp, crash-fea66f9b): elu and leaky_relu made through Graph::make without their
// real attribute were accepted, and the reference read attrs.reals[0] of an empty vector.
TEST(Ir, OpsReadingARealAttributeRequireIt) {
  Graph g;
  auto x = g.input("x", {3});
  for (Op op : {Op::Elu, Op::LeakyRelu}) {
    EXPECT_THROW(g.make(op, {x}, Attrs{}, Provenance{}), ShapeError) << op_name(op);
    Attrs two;
    two.reals = {0.1, 0.2};
    EXPECT_THROW(g.make(op, {x}, two, Provenance{}), ShapeError) << op_name(op);
  }
  EXPECT_NO_THROW(g.elu(x, 0.5));
  EXPECT_NO_THROW(g.leaky_relu(x, 0.1));
}

TEST(Ir, EmptyOutputsNameTheLine) {
  Graph g;
  g.input("x", {2});
  const int line = __LINE__ + 1;
  const std::string e = error_of<GraphError>([&] { g.set_outputs({}); });
  EXPECT_NE(e.find("at least one output"), std::string::npos) << e;
  EXPECT_NE(e.find("test_ir.cpp:" + std::to_string(line)), std::string::npos) << e;
}

// The message puts each line with its node: the new call's line first, the earlier node's line after it.
TEST(Ir, DuplicateNameErrorNamesBothLines) {
  Graph g;
  const int first = __LINE__ + 1;
  g.parameter("w", {2});
  const int second = __LINE__ + 1;
  const std::string e = error_of<GraphError>([&] { g.input("w", {3}); });
  const size_t s = e.find("test_ir.cpp:" + std::to_string(second)),
               f = e.find("test_ir.cpp:" + std::to_string(first));
  ASSERT_NE(s, std::string::npos) << e;
  ASSERT_NE(f, std::string::npos) << e;
  EXPECT_LT(s, f) << e;
  EXPECT_NE(e.find("made at"), std::string::npos) << e;
  EXPECT_LT(e.find("made at"), f) << e;
}

// One line of ir/op_list.hpp and one OpDef row per op, both complete: a name (unique), a scheduling class the
// scheduler can run, a shape rule, a CPU reference (but for the leaves the interpreter feeds), and a GLSL
// expression exactly for the pointwise ops (and Fill, inlined as a literal).
TEST(Ops, EveryOpHasACompleteRow) {
  std::set<std::string> names;
  for (size_t i = 0; i < size_t(Op::Count_); ++i) {
    const Op op = Op(i);
    const std::string name = op_name(op);
    EXPECT_FALSE(name.empty() || name == "?") << "op #" << i;
    EXPECT_TRUE(names.insert(name).second) << "two ops named " << name;
    EXPECT_NE(op_class(op), OpClass::Unsupported) << name;
    EXPECT_GE(op_flops_per_element(op), 0.0) << name;
    ASSERT_TRUE(ops::registered(op)) << name << " has no OpDef row in ops/";
    const ops::OpDef& d = ops::def(op);
    EXPECT_EQ(d.op, op) << name;
    EXPECT_EQ(std::string(d.name), name);
    EXPECT_GE(d.arity, -1) << name;
    EXPECT_NE(d.shape, nullptr) << name;
    const bool leaf = op_class(op) == OpClass::Leaf;
    EXPECT_EQ(d.reference == nullptr, leaf) << name;
    const bool inlined = op_class(op) == OpClass::Pointwise || op_class(op) == OpClass::Fill;
    EXPECT_EQ(d.glsl != nullptr, inlined) << name;
  }
  EXPECT_EQ(names.size(), size_t(Op::Count_));
}

// The columns of ir/op_list.hpp for a few ops, spelled out (the names are the user-visible ones).
TEST(Ops, ListColumnsOfKnownOps) {
  EXPECT_STREQ(op_name(Op::MatMul), "matmul");
  EXPECT_STREQ(op_name(Op::Attention), "attention");
  EXPECT_STREQ(op_name(Op::CrossEntropy), "cross_entropy_loss");
  EXPECT_EQ(op_class(Op::Reshape), OpClass::Alias);
  EXPECT_EQ(op_class(Op::Dropout), OpClass::Copy);
  EXPECT_EQ(op_class(Op::SwiGlu), OpClass::Pointwise);
  EXPECT_EQ(op_class(Op::ScatterAdd), OpClass::Scatter);
  EXPECT_EQ(op_flops_per_element(Op::Add), 1.0);
  EXPECT_EQ(op_flops_per_element(Op::Silu), 8.0);
  EXPECT_EQ(op_flops_per_element(Op::Softmax), 12.0);
}

TEST(Ir, GlslTemplatesExpandOperandsAndAttributes) {
  Graph g;
  auto x = g.input("x", {3});
  auto y = g.leaky_relu(x, 0.25);
  EXPECT_EQ(ops::expand_glsl(ops::def(Op::Relu), g.node(g.relu(x)), {"v"}),
            "mn_relu((v))");  // NaN-propagating
  EXPECT_EQ(ops::expand_glsl(ops::def(Op::LeakyRelu), g.node(y), {"v"}), "((v) > 0.0 ? (v) : 0.25 * (v))");
  EXPECT_EQ(ops::expand_glsl(ops::def(Op::Gelu), g.node(g.gelu(x, true)), {"v"}), "mn_gelu((v), 1.0)");
  EXPECT_EQ(ops::expand_glsl(ops::def(Op::Clamp), g.node(g.clamp(x, -1.0, 2.0)), {"v"}),
            "mn_clamp((v), (-1.0), 2.0)");
  EXPECT_NE(std::string(ops::pointwise_glsl_prelude()).find("float mn_erf("), std::string::npos);
}

TEST(Ir, UnregisteredOpThrowsAGraphErrorNamingIt) {
  // Every op either has a row or make() says which op is missing; it never crashes.
  for (size_t i = 0; i < size_t(Op::Count_); ++i) {
    Op op = Op(i);
    if (ops::registered(op)) continue;
    Graph g;
    auto x = g.input("x", {1, 1, 2, 2});
    try {
      g.make(op, {x}, {}, {});
      ADD_FAILURE() << op_name(op) << " built without a row";
    } catch (const GraphError& e) {
      EXPECT_NE(std::string(e.what()).find(op_name(op)), std::string::npos) << e.what();
    }
  }
}

TEST(Ir, TextAndDotListNamesOpsAndLines) {
  Graph g;
  auto x = g.input("x", {4, 3});
  auto w = g.parameter("w", {3, 2});
  int line = __LINE__ + 1;
  auto h = g.named(g.matmul(x, w, false, false), "blk0.fc");
  auto loss = g.sum(g.relu(h));
  g.set_outputs({loss});
  std::string t = g.to_text();
  EXPECT_NE(t.find("%2 = matmul(%0, %1) f32[4,2] \"blk0.fc\"  # test_ir.cpp:" + std::to_string(line)),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("%0 = input f32[4,3] \"x\""), std::string::npos) << t;
  EXPECT_NE(t.find("outputs: %4"), std::string::npos) << t;
  Graph dg = differentiate(g, loss);
  std::string dt = dg.to_text();
  EXPECT_NE(dt.find("\"grad/w\""), std::string::npos) << dt;
  EXPECT_NE(dt.find("[autodiff <- %"), std::string::npos) << dt;
  std::string d = g.to_dot();
  EXPECT_EQ(d.rfind("digraph", 0), 0u);
  EXPECT_NE(d.find("blk0.fc"), std::string::npos) << d;
  EXPECT_NE(d.find("n0 -> n2"), std::string::npos) << d;
  EXPECT_NE(d.find("n1 -> n2"), std::string::npos) << d;
}

}  // namespace
}  // namespace meganeura
