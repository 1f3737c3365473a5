#pragma once
// A union-find e-graph over the IR. Every decision follows insertion order or value order (class ids,
// e-node indices, ordered maps keyed by content), never pointer hashes, so equal inputs give equal runs.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "meganeura/rewrite/pattern.hpp"

namespace meganeura::rewrite {

class EGraph final : public TermBuilder {
 public:
  struct ENode {
    Op op;
    uint32_t attrs;            // index into the attrs table
    std::vector<Handle> kids;  // e-classes (canonical after rebuild())
    uint32_t leaf;             // identity of Input/Parameter/Constant leaves, else kNoLeaf
    DType dtype;
    Shape shape;
    NodeId proto;   // a node of scratch() with this op, attrs, shape and dtype
    int rule = -1;  // the rule that made it; -1 for nodes of the input graph
    NodeId origin;  // the input-graph node it stands for or was derived from
  };
  static constexpr uint32_t kNoLeaf = UINT32_MAX;

  // Loads the live part of g. scratch() starts as a copy of g, so an input node's proto is its own id.
  explicit EGraph(const Graph& g, size_t max_enodes);

  Handle find(Handle c) const;
  Handle class_of_input(NodeId id) const { return find(input_class_[id.v]); }
  bool loaded(NodeId id) const { return input_class_[id.v] != UINT32_MAX; }
  // Merges two classes; the smaller id becomes the root. Returns whether they were distinct.
  bool merge(Handle a, Handle b);
  // Restores congruence (equal e-nodes in one class) and sorts class members.
  void rebuild();

  const std::vector<ENode>& enodes() const { return enodes_; }
  const std::vector<uint32_t>& members(Handle c) const { return classes_[find(c)].nodes; }
  Handle class_of_enode(uint32_t e) const { return find(enode_class_[e]); }
  std::vector<Handle> canonical_classes() const;  // ascending
  const Attrs& attrs(uint32_t i) const { return attrs_[i]; }
  const Graph& scratch() const { return scratch_; }
  bool full() const { return enodes_.size() >= max_enodes_; }

  // context for nodes made by rule builders
  int ctx_rule = -1;
  NodeId ctx_origin;
  Provenance ctx_prov;

  // TermView / TermBuilder
  bool for_each_node(Handle h, const std::function<bool(const TermNode&)>& fn) const override;
  Shape shape(Handle h) const override;
  DType dtype(Handle h) const override;
  std::optional<double> uniform_value(Handle h) const override;
  const std::vector<float>* constant_data(Handle h) const override;
  std::optional<Handle> make(Op op, std::vector<Handle> kids, Attrs attrs) override;
  Handle fill(double value, const Shape& shape, DType dtype) override;
  Handle constant(std::vector<float> data, const Shape& shape) override;

 private:
  struct Key {
    uint16_t op;
    uint32_t attrs, leaf;
    uint8_t dtype;
    Shape shape;
    std::vector<Handle> kids;
    auto operator<=>(const Key&) const = default;
  };
  struct EClass {
    std::vector<uint32_t> nodes;
  };
  Key key_of(const ENode& n) const;
  uint32_t intern_attrs(const Attrs& a);
  // adds (or finds) the e-node described by the scratch node proto with the given child classes
  Handle add(NodeId proto, std::vector<Handle> kids, uint32_t leaf);

  Graph scratch_;
  size_t max_enodes_;
  std::vector<ENode> enodes_;
  std::vector<Handle> enode_class_;
  std::vector<EClass> classes_;
  mutable std::vector<Handle> parent_;
  std::map<Key, uint32_t> memo_;  // key -> e-node
  std::vector<Attrs> attrs_;
  std::map<std::string, uint32_t> attrs_index_;               // exact serialisation -> attrs table index
  std::map<std::vector<uint32_t>, uint32_t> rule_constants_;  // constant bits -> leaf identity
  std::vector<Handle> input_class_;                           // input-graph node -> class
};

}  // namespace meganeura::rewrite
