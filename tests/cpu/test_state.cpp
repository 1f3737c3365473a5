// States and in-place slice writes, device-free: shape rules, the reference's semantics (hand-computed),
// RoPE at a runtime start, and the scheduler's refusal of a state read beside its write.
#include <gtest/gtest.h>

#include "meganeura/reference/interpreter.hpp"
#include "meganeura/schedule/schedule.hpp"

using namespace meganeura;

TEST(State, StatesAreListedApartFromParameters) {
  Graph g;
  const NodeId w = g.parameter("w", {2});
  const NodeId s = g.state("cache", {2, 3});
  EXPECT_EQ(g.parameters(), std::vector<NodeId>{w});
  EXPECT_EQ(g.states(), std::vector<NodeId>{s});
  EXPECT_TRUE(g.is_state(s));
  EXPECT_FALSE(g.is_state(w));
  EXPECT_THROW(g.state("w", {1}), GraphError);  // names are unique among leaves
}

TEST(State, WriteSliceChecksItsOperands) {
  Graph g;
  const NodeId s = g.state("cache", {2, 4, 3});
  const NodeId start = g.input("start", {}, DType::I32);
  EXPECT_THROW(g.write_slice(g.parameter("p", {2, 4, 3}), g.input("v", {2, 1, 3}), start, 1), ShapeError);
  EXPECT_THROW(g.write_slice(s, g.input("long", {2, 5, 3}), start, 1), ShapeError);
  EXPECT_THROW(g.write_slice(s, g.input("wide", {2, 1, 4}), start, 1), ShapeError);
  EXPECT_THROW(g.write_slice(s, g.input("v2", {2, 1, 3}), g.input("fstart", {}), 1), ShapeError);
  EXPECT_THROW(g.write_slice(s, g.input("v3", {2, 1, 3}), g.input("bstart", {2}, DType::I32), 0), ShapeError);
  EXPECT_NO_THROW(g.write_slice(s, g.input("v4", {2, 2, 3}), g.input("per_seq", {2}, DType::I32), 1));
  // an i32 state (token ids fed back) takes i32 values, never floats, and a float state no i32 values
  const NodeId ids = g.state("ids", {2, 1}, DType::I32);
  EXPECT_NO_THROW(g.write_slice(ids, g.input("iv", {2, 1}, DType::I32), g.input("s0", {2}, DType::I32), 1));
  EXPECT_THROW(g.write_slice(ids, g.input("fv", {2, 1}), g.input("s1", {2}, DType::I32), 1), ShapeError);
  EXPECT_THROW(g.write_slice(s, g.input("iv3", {2, 1, 3}, DType::I32), start, 1), ShapeError);
}

// Rows land at start[b] + i of each sequence b; a row past the end is dropped.
TEST(State, WriteSliceReferenceWritesRowsAtEachStart) {
  Graph g;
  const NodeId s = g.state("cache", {2, 4, 1});
  const NodeId w = g.write_slice(s, g.input("v", {2, 2, 1}), g.input("start", {2}, DType::I32), 1);
  reference::Feeds f;
  f["cache"] = HostTensor({2, 4, 1}, std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8});
  f["v"] = HostTensor({2, 2, 1}, std::vector<double>{10, 11, 20, 21});
  f["start"] = HostTensor({2}, std::vector<double>{1, 3});
  const HostTensor y = reference::evaluate(g, f, w);
  EXPECT_EQ(y.data, (std::vector<double>{1, 10, 11, 4, 5, 6, 7, 20}));
}

TEST(State, RopeAtARuntimeStartEqualsRopeAtThatOffset) {
  Graph g;
  const NodeId x = g.input("x", {2, 3, 5, 8});
  const NodeId a = g.rope(x, g.input("start", {2}, DType::I32), 500.0);
  const NodeId b0 = g.rope(g.slice(x, 0, 0, 1), 500.0, 7);
  const NodeId b1 = g.rope(g.slice(x, 0, 1, 2), 500.0, 1000);
  reference::Feeds f;
  std::vector<double> xs(2 * 3 * 5 * 8);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = 0.01 * double(i % 17) - 0.05;
  f["x"] = HostTensor({2, 3, 5, 8}, xs);
  f["start"] = HostTensor({2}, std::vector<double>{7, 1000});
  const auto r = reference::evaluate(g, f, std::vector<NodeId>{a, b0, b1});
  const size_t half = r[0].data.size() / 2;
  for (size_t i = 0; i < half; ++i) {
    EXPECT_DOUBLE_EQ(r[0].data[i], r[1].data[i]) << i;
    EXPECT_DOUBLE_EQ(r[0].data[half + i], r[2].data[i]) << i;
  }
  EXPECT_THROW(g.rope(x, g.input("bad", {3}, DType::I32)), ShapeError);
}

// Reading the old state beside its in-place write would race with the write: the scheduler names the state.
TEST(State, StateReadBesideItsWriteIsAGraphError) {
  Graph g;
  const NodeId s = g.state("kv", {1, 4, 2});
  const NodeId w = g.write_slice(s, g.input("v", {1, 1, 2}), g.input("start", {}, DType::I32), 1);
  const NodeId both = g.add(w, g.exp(s));
  try {
    schedule(g, {both});
    FAIL() << "expected GraphError";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("'kv'"), std::string::npos) << e.what();
  }
  const KernelGraph ok = schedule(g, {g.exp(w)});
  EXPECT_EQ(ok.storage_of(w), s);  // the write's result is the state's storage
}

// Two state writes at the same start with values of one shape (a decode step's K and V cache writes) are one
// kernel; a write whose value is computed from another write's result stays apart, after it; and a kernel
// reading a write's result sits at a later level than the write (the result lives in the state's storage).
TEST(State, WritesAtOneStartShareAKernel) {
  Graph g;
  const NodeId start = g.input("start", {}, DType::I32);
  const NodeId k = g.write_slice(g.state("k", {1, 4, 2}), g.input("kv", {1, 1, 2}), start, 1);
  const NodeId v = g.write_slice(g.state("v", {1, 4, 2}), g.input("vv", {1, 1, 2}), start, 1);
  const NodeId out = g.add(g.exp(k), g.exp(v));
  const KernelGraph kg = schedule(g, {out});
  ASSERT_EQ(kg.producer.count(k), 1u);
  ASSERT_EQ(kg.producer.count(v), 1u);
  EXPECT_EQ(kg.producer.at(k), kg.producer.at(v));
  const Kernel& w = kg.kernels[kg.producer.at(k)];
  EXPECT_EQ(w.siblings.size(), 1u);
  EXPECT_GT(kg.kernels[kg.producer.at(out)].level, w.level);

  Graph h;
  const NodeId s0 = h.input("start", {}, DType::I32);
  const NodeId a = h.write_slice(h.state("a", {1, 4, 2}), h.input("av", {1, 1, 2}), s0, 1);
  const NodeId row = h.slice(a, 1, 0, 1);  // the first row of a's result feeds b's write
  const NodeId b = h.write_slice(h.state("b", {1, 4, 2}), h.exp(row), s0, 1);
  const KernelGraph hk = schedule(h, {b});
  ASSERT_EQ(hk.producer.count(a), 1u);
  ASSERT_EQ(hk.producer.count(b), 1u);
  EXPECT_NE(hk.producer.at(a), hk.producer.at(b));
  EXPECT_LT(hk.kernels[hk.producer.at(a)].level, hk.kernels[hk.producer.at(b)].level);
}

// A read-modify-write across kernels (a sampler's token fed back): the state is read by a kernel whose result
// the written value is computed from, so that kernel runs at an earlier level and the reference agrees.
TEST(State, StateReadFeedingItsWriteRunsBeforeIt) {
  Graph g;
  const NodeId s = g.state("acc", {1, 4});
  const NodeId x = g.input("x", {3, 4});
  const NodeId y = g.matmul(x, g.reshape(s, {4, 1}));                  // [3, 1], reads the old state
  const NodeId v = g.reshape(g.sum(y), {1, 1});                        // sum of x·s
  const NodeId w = g.write_slice(s, v, g.fill(2, {}, DType::I32), 1);  // into column 2
  const KernelGraph kg = schedule(g, {w});
  ASSERT_EQ(kg.producer.count(w), 1u);
  ASSERT_EQ(kg.producer.count(y), 1u);
  EXPECT_LT(kg.kernels[kg.producer.at(y)].level, kg.kernels[kg.producer.at(w)].level);
  reference::Feeds f;
  f["acc"] = HostTensor({1, 4}, std::vector<double>{1, 2, 3, 4});
  f["x"] = HostTensor({3, 4}, std::vector<double>{1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 1});
  // x·s = [1, 2, 10], summed 13, written at column 2.
  EXPECT_EQ(reference::evaluate(g, f, w).data, (std::vector<double>{1, 2, 13, 4}));
}

// The RoPE of a write's value is computed in the write's kernel (fuse_rope_operand); when its operand is a
// row of the same state, the row is copied out by an earlier kernel, never read beside the write.
TEST(State, StateRowRotatedIntoItsOwnWriteIsCopiedFirst) {
  Graph g;
  const NodeId s = g.state("kv", {1, 1, 4, 2});
  const NodeId start = g.input("start", {1}, DType::I32);
  const NodeId row = g.slice(s, 2, 3, 4);
  const NodeId w = g.write_slice(s, g.rope(row, start), start, 2);
  const KernelGraph kg = schedule(g, {w});
  ASSERT_EQ(kg.producer.count(row), 1u) << kg.to_text(g);
  ASSERT_EQ(kg.producer.count(w), 1u);
  EXPECT_LT(kg.kernels[kg.producer.at(row)].level, kg.kernels[kg.producer.at(w)].level);
}

// A view of a write's result (Reshape) is read after the write: the reading kernel sits at a later level.
TEST(State, ViewOfAWritesResultIsReadAfterTheWrite) {
  Graph g;
  const NodeId s = g.state("tok", {2, 1});
  const NodeId w = g.write_slice(s, g.input("v", {2, 1}), g.fill(0, {2}, DType::I32), 1);
  const NodeId out = g.exp(g.reshape(w, {2}));
  const KernelGraph kg = schedule(g, {out});
  ASSERT_EQ(kg.producer.count(w), 1u);
  ASSERT_EQ(kg.producer.count(out), 1u);
  EXPECT_GT(kg.kernels[kg.producer.at(out)].level, kg.kernels[kg.producer.at(w)].level);
}
