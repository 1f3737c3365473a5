#pragma once
// The IR: one hash-consed node type. A Graph is append-only; a NodeId stays valid in every graph derived
// from it (autodiff and rewrites extend or rebuild, and map old ids to new ones explicitly).
#include <cstdint>
#include <map>
#include <optional>
#include <source_location>
#include <string>
#include <unordered_map>
#include <vector>

#include "meganeura/core/error.hpp"
#include "meganeura/ir/init.hpp"
#include "meganeura/ir/number_format.hpp"
#include "meganeura/ir/op_list.hpp"

namespace meganeura {

// Block-quantized dtypes (Q4_0 .. Q6_K: the GGUF block layouts of quant/blocks.hpp) store a parameter's rows
// in blocks of 32 or 256 elements along the last dimension; they are read only by matmul and gather, which
// dequantize as they load (never expanded in memory). Their size is storage_bytes, not numel × dtype_size.
enum class DType : uint8_t { F32, F16, BF16, I32, U32, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K };
const char* dtype_name(DType t);  // "f32", .., "q4_0", "q4_k"
// Bytes of one element; 0 for block-quantized dtypes (use storage_bytes).
size_t dtype_size(DType t);
bool is_quantized(DType t);
uint32_t dtype_block_elems(DType t);  // 1 for plain dtypes, 32 or 256
uint32_t dtype_block_bytes(DType t);  // dtype_size for plain dtypes
// Bytes of `elements` values of dtype t; for block-quantized dtypes elements must be whole blocks
// (ShapeError).
uint64_t storage_bytes(DType t, int64_t elements);
// The dtype named by dtype_name's string (case-insensitive); ConfigError otherwise.
DType parse_dtype(const std::string& name);

using Shape = std::vector<int64_t>;
int64_t numel(const Shape& s);
std::string shape_str(const Shape& s);
// numpy broadcasting; nullopt when the shapes do not broadcast.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);

// A node's index in its graph, tagged with the graph that made it so that an id of one Graph is never read
// as a node of another. Graphs derived by copying (autodiff) keep their source's tag: its ids stay valid
// there. Ids made by hand (NodeId{i}) carry no tag and are taken at their word. Ids compare by index only.
struct NodeId {
  uint32_t v = UINT32_MAX;
  uint32_t graph = 0;  // Graph::tag() of the graph that made it; 0 = untagged
  bool valid() const { return v != UINT32_MAX; }
  friend bool operator==(NodeId a, NodeId b) { return a.v == b.v; }
  friend auto operator<=>(NodeId a, NodeId b) { return a.v <=> b.v; }
};

// Every op of the IR, generated from ir/op_list.hpp (one line per op: name, scheduling class, cost). What an
// op computes (shape rule, VJP, CPU reference, GLSL) is its one OpDef row in ops/.
enum class Op : uint16_t {
#define MEGANEURA_OP_ENUM(e, name, cls, flops) e,
  MEGANEURA_OPS(MEGANEURA_OP_ENUM)
#undef MEGANEURA_OP_ENUM
      Count_
};
const char* op_name(Op op);  // the op's name in messages, dumps and reports ("matmul", "layer_norm")

// How the scheduler treats an op: the kernel archetype it can root or join (schedule/schedule.hpp).
enum class OpClass : uint8_t {
  Leaf,
  Fill,
  Pointwise,
  Reduce,
  MatMul,
  Conv,
  Gather,
  Scatter,
  Copy,
  Alias,
  Attention,
  Unsupported
};
OpClass op_class(Op op);
// Arithmetic per output element for the rewrite's cost model (rewrite/cost.hpp).
double op_flops_per_element(Op op);

enum class Reduction : uint8_t { Mean, Sum, None };

// Attributes of a node. One plain struct for every op (compared and hashed field by field); each op's
// table row documents which fields it reads.
struct Attrs {
  std::vector<int64_t> axes;  // reductions, softmax axis, permute order, concat axis, squeeze/unsqueeze
  std::vector<int64_t> ints;  // op-specific integers: conv/pool stride, padding, dilation, groups; slice
                              // start/stop/step triples; pad widths; ignore_index; position offset
  std::vector<double> reals;  // op-specific reals: alpha, eps, clamp bounds, theta, scale, momentum, p
  bool keepdim = false;
  bool flag_a = false;  // MatMul: transpose A; Attention: causal; BatchNorm: training; Gelu: tanh form
  bool flag_b = false;  // MatMul: transpose B
  Reduction reduction = Reduction::Mean;
  DType dtype = DType::F32;  // Cast target
  uint64_t seed = 0;         // Dropout
  friend bool operator==(const Attrs&, const Attrs&) = default;
};

// Where a node came from: the user's builder line, a name, and for derived nodes what produced them.
struct Provenance {
  std::string name;                  // user or nn-layer name, "grad/w1" for gradients; may be empty
  std::source_location loc;          // the user's builder call
  std::string rule;                  // rewrite rule or "autodiff" that created the node; empty if user-made
  std::vector<NodeId> derived_from;  // nodes this one was derived from (in the graph it was built from)
  // For derived nodes: the user-visible name of the value they came from (the nearest named ancestor in the
  // derivation chain), and whether autodiff made them (directly or by rewriting a node it made). Dispatch
  // labels and profiles use these for values that carry no name of their own.
  std::string origin;
  bool backward = false;

  // The provenance of a node derived from `from` (id `from_id` in its graph) by `rule`.
  static Provenance derived(const Provenance& from, NodeId from_id, const std::string& rule);
};

struct Node {
  Op op;
  DType dtype = DType::F32;
  Shape shape;
  std::vector<NodeId> inputs;
  Attrs attrs;
  Provenance prov;
};

// A graph under construction. Builder methods check shapes (throwing ShapeError naming the op, the shapes,
// the node name and the user's file:line), intern equal nodes (CSE by construction) and return the id.
class Graph {
 public:
  using Loc = std::source_location;

  // leaves
  NodeId input(const std::string& name, Shape shape, DType dtype = DType::F32, Loc loc = Loc::current());
  NodeId parameter(const std::string& name, Shape shape, DType dtype = DType::F32, Loc loc = Loc::current());
  // A persistent value that steps read and update in place (a KV cache): stored like a parameter (zeroed at
  // build, kept between steps, shared by name between sessions), never differentiated. A Parameter node with
  // attrs.flag_a set; listed by states(), not parameters().
  NodeId state(const std::string& name, Shape shape, DType dtype = DType::F32, Loc loc = Loc::current());
  // The rule that gives parameter `p` its first values when a session is built (ir/init.hpp); a parameter
  // without one gets Init::Default. nn layers set theirs. GraphError for a node that is not a parameter.
  void set_init(NodeId p, ParamInit init);
  ParamInit init_of(NodeId p) const;
  NodeId constant(std::vector<float> data, Shape shape, Loc loc = Loc::current());
  NodeId scalar(double value, Loc loc = Loc::current());  // shape {} and broadcast by every binary op
  NodeId fill(double value, Shape shape, Loc loc = Loc::current());
  NodeId fill(double value, Shape shape, DType dtype, Loc loc = Loc::current());

  // names and outputs
  NodeId named(NodeId x, const std::string& name);
  // Makes `name` find `x` without renaming it (autodiff's grad/<p> when the gradient is an existing node).
  void alias(NodeId x, const std::string& name);
  void set_outputs(std::vector<NodeId> outputs, Loc loc = Loc::current());  // at least one
  const std::vector<NodeId>& outputs() const { return outputs_; }

  // unary
  NodeId neg(NodeId x, Loc loc = Loc::current());
  NodeId abs(NodeId x, Loc loc = Loc::current());
  NodeId sign(NodeId x, Loc loc = Loc::current());
  NodeId exp(NodeId x, Loc loc = Loc::current());
  NodeId log(NodeId x, Loc loc = Loc::current());
  NodeId sqrt(NodeId x, Loc loc = Loc::current());
  NodeId rsqrt(NodeId x, Loc loc = Loc::current());
  NodeId reciprocal(NodeId x, Loc loc = Loc::current());
  NodeId square(NodeId x, Loc loc = Loc::current());
  NodeId relu(NodeId x, Loc loc = Loc::current());
  NodeId leaky_relu(NodeId x, double alpha = 0.01, Loc loc = Loc::current());
  NodeId elu(NodeId x, double alpha = 1.0, Loc loc = Loc::current());
  NodeId sigmoid(NodeId x, Loc loc = Loc::current());
  NodeId tanh(NodeId x, Loc loc = Loc::current());
  NodeId silu(NodeId x, Loc loc = Loc::current());
  NodeId gelu(NodeId x, bool tanh_approx = false, Loc loc = Loc::current());
  NodeId softplus(NodeId x, Loc loc = Loc::current());
  NodeId sin(NodeId x, Loc loc = Loc::current());
  NodeId cos(NodeId x, Loc loc = Loc::current());
  NodeId erf(NodeId x, Loc loc = Loc::current());
  NodeId clamp(NodeId x, double lo, double hi, Loc loc = Loc::current());
  NodeId cast(NodeId x, DType to, Loc loc = Loc::current());
  NodeId stop_gradient(NodeId x, Loc loc = Loc::current());
  // x (f32) rounded to the nearest value of a narrow format and returned as that value (an f32): float8,
  // float6, float4, E8M0 (ir/number_format.hpp, which gives the rules for NaN, Inf and overflow). Its
  // gradient is straight-through inside ±max_finite and zero outside.
  NodeId round_to_format(NodeId x, NumberFormat format, bool saturate = true,
                         FormatRounding rounding = FormatRounding::NearestEven, Loc loc = Loc::current());

  // binary, numpy broadcasting
  NodeId add(NodeId a, NodeId b, Loc loc = Loc::current());
  NodeId sub(NodeId a, NodeId b, Loc loc = Loc::current());
  NodeId mul(NodeId a, NodeId b, Loc loc = Loc::current());
  NodeId div(NodeId a, NodeId b, Loc loc = Loc::current());
  NodeId pow(NodeId a, NodeId b, Loc loc = Loc::current());
  NodeId maximum(NodeId a, NodeId b, Loc loc = Loc::current());
  NodeId minimum(NodeId a, NodeId b, Loc loc = Loc::current());
  NodeId eq(NodeId a, NodeId b, Loc loc = Loc::current());
  NodeId ne(NodeId a, NodeId b, Loc loc = Loc::current());
  NodeId lt(NodeId a, NodeId b, Loc loc = Loc::current());
  NodeId le(NodeId a, NodeId b, Loc loc = Loc::current());
  NodeId gt(NodeId a, NodeId b, Loc loc = Loc::current());
  NodeId ge(NodeId a, NodeId b, Loc loc = Loc::current());
  NodeId where(NodeId cond, NodeId a, NodeId b, Loc loc = Loc::current());

  // matmul: [.., M, K] x [.., K, N], batch dims broadcast; transposes are attributes, never materialised
  NodeId matmul(NodeId a, NodeId b, bool transpose_a = false, bool transpose_b = false,
                Loc loc = Loc::current());

  // reductions; empty axes = all axes; negative axes count from the end. Nodes store the axes canonical
  // (non-negative, sorted, "all" spelled out), so sum(x, {-1}) and sum(x, {1}) are one node.
  NodeId sum(NodeId x, std::vector<int64_t> axes = {}, bool keepdim = false, Loc loc = Loc::current());
  NodeId mean(NodeId x, std::vector<int64_t> axes = {}, bool keepdim = false, Loc loc = Loc::current());
  NodeId max(NodeId x, std::vector<int64_t> axes = {}, bool keepdim = false, Loc loc = Loc::current());
  NodeId min(NodeId x, std::vector<int64_t> axes = {}, bool keepdim = false, Loc loc = Loc::current());
  NodeId variance(NodeId x, std::vector<int64_t> axes = {}, bool keepdim = false, Loc loc = Loc::current());
  NodeId argmax(NodeId x, int64_t axis, bool keepdim = false, Loc loc = Loc::current());
  NodeId softmax(NodeId x, int64_t axis = -1, Loc loc = Loc::current());
  NodeId log_softmax(NodeId x, int64_t axis = -1, Loc loc = Loc::current());

  // losses (class axis is the last; targets are probabilities / one-hot, or I32 class indices)
  NodeId cross_entropy_loss(NodeId logits, NodeId targets, Reduction r = Reduction::Mean,
                            Loc loc = Loc::current());
  NodeId cross_entropy_loss_index(NodeId logits, NodeId labels, int64_t ignore_index = -100,
                                  Reduction r = Reduction::Mean, Loc loc = Loc::current());
  NodeId mse_loss(NodeId pred, NodeId target, Reduction r = Reduction::Mean, Loc loc = Loc::current());
  NodeId l1_loss(NodeId pred, NodeId target, Reduction r = Reduction::Mean, Loc loc = Loc::current());
  NodeId bce_with_logits(NodeId logits, NodeId target, Reduction r = Reduction::Mean,
                         Loc loc = Loc::current());

  // normalisation (over the last axis for layer/rms norm; NCHW channels for batch/group norm)
  NodeId layer_norm(NodeId x, NodeId weight, NodeId bias, double eps = 1e-5, Loc loc = Loc::current());
  NodeId rms_norm(NodeId x, NodeId weight, double eps = 1e-6, Loc loc = Loc::current());
  // training: batch statistics; evaluation: running_mean/running_var inputs
  NodeId batch_norm(NodeId x, NodeId weight, NodeId bias, NodeId running_mean, NodeId running_var,
                    bool training, double eps = 1e-5, Loc loc = Loc::current());
  NodeId group_norm(NodeId x, NodeId weight, NodeId bias, int64_t groups, double eps = 1e-5,
                    Loc loc = Loc::current());

  // movement
  NodeId reshape(NodeId x, Shape shape, Loc loc = Loc::current());  // one -1 allowed
  NodeId permute(NodeId x, std::vector<int64_t> perm, Loc loc = Loc::current());
  NodeId transpose(NodeId x, int64_t a = -2, int64_t b = -1, Loc loc = Loc::current());
  NodeId slice(NodeId x, int64_t axis, int64_t start, int64_t stop, int64_t step = 1,
               Loc loc = Loc::current());
  NodeId concat(std::vector<NodeId> xs, int64_t axis, Loc loc = Loc::current());
  std::vector<NodeId> split(NodeId x, std::vector<int64_t> sizes, int64_t axis, Loc loc = Loc::current());
  NodeId broadcast_to(NodeId x, Shape shape, Loc loc = Loc::current());
  NodeId squeeze(NodeId x, int64_t axis, Loc loc = Loc::current());
  NodeId unsqueeze(NodeId x, int64_t axis, Loc loc = Loc::current());
  NodeId pad(NodeId x, std::vector<int64_t> before, std::vector<int64_t> after, double value = 0.0,
             Loc loc = Loc::current());
  NodeId gather(NodeId table, NodeId indices,
                Loc loc = Loc::current());  // rows of table[V, D] by I32 indices
  NodeId embedding(NodeId table, NodeId indices, Loc loc = Loc::current()) {
    return gather(table, indices, loc);
  }
  NodeId scatter_add(NodeId indices, NodeId values, int64_t rows, Loc loc = Loc::current());  // -> [rows, D]

  // vision, NCHW; weight [Cout, Cin/groups, KH, KW]
  NodeId conv2d(NodeId x, NodeId weight, std::vector<int64_t> stride = {1, 1},
                std::vector<int64_t> padding = {0, 0}, std::vector<int64_t> dilation = {1, 1},
                int64_t groups = 1, Loc loc = Loc::current());
  NodeId max_pool2d(NodeId x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                    std::vector<int64_t> padding = {0, 0}, Loc loc = Loc::current());
  NodeId avg_pool2d(NodeId x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                    std::vector<int64_t> padding = {0, 0}, Loc loc = Loc::current());
  NodeId global_avg_pool(NodeId x, Loc loc = Loc::current());  // [N,C,H,W] -> [N,C]
  NodeId upsample_nearest(NodeId x, int64_t factor, Loc loc = Loc::current());

  // attention: q [B, Hq, S, D], k/v [B, Hkv, T, D] with Hq % Hkv == 0; mask (optional) additive, broadcast
  // to [B, Hq, S, T]; scale 0 means 1/sqrt(D)
  NodeId scaled_dot_product_attention(NodeId q, NodeId k, NodeId v, bool causal = false,
                                      std::optional<NodeId> mask = std::nullopt, double scale = 0.0,
                                      Loc loc = Loc::current());
  NodeId rope(NodeId x, double theta = 10000.0, int64_t position_offset = 0,
              Loc loc = Loc::current());  // x [.., S, D]
  // The same with positions known only when the step runs: row s of x (of batch b) is at position
  // start + s, start an i32 value of shape [] or [B] (B = x's first axis), e.g. an input written per step.
  NodeId rope(NodeId x, NodeId start, double theta = 10000.0, Loc loc = Loc::current());
  // In-place slice write: `state` (a g.state) with value's elements at [start, start + n) along `axis`, where
  // start is an i32 of shape [] or [B] (one start per index of the state's first axis; axis must then be >
  // 0). Elements that would land outside the state are dropped. The result is the updated state (same
  // storage); read the state through it, never beside it.
  NodeId write_slice(NodeId state, NodeId value, NodeId start, int64_t axis, Loc loc = Loc::current());
  NodeId dropout(NodeId x, double p, uint64_t seed, Loc loc = Loc::current());
  // One token id (i32 [B]) per row of logits [B, V]: greedy, temperature, top-k, top-p, min-p and repetition
  // penalty by row, from params f32 [B, 5] and a seeded draw from rng i32 [B, 3] (layouts and exact rules in
  // ops/sample.hpp and ops/sample.cpp); seen [B, V] marks the tokens the penalty applies to (> 0).
  NodeId sample(NodeId logits, NodeId seen, NodeId params, NodeId rng, Loc loc = Loc::current());

  // generic construction, used by the builder methods, autodiff and rewrites: runs the op's shape rule,
  // interns the node and returns its id
  NodeId make(Op op, std::vector<NodeId> inputs, Attrs attrs, Provenance prov);

  // While a derivation is open, new nodes take the provenance of `from` (its builder line), the given rule
  // and derived_from = {from}: autodiff and rewrites attribute generated nodes to the user's line.
  void push_derivation(const std::string& rule, NodeId from);
  void pop_derivation();

  const Node& node(NodeId id) const;     // throws GraphError for an id not in this graph
  uint32_t tag() const { return tag_; }  // shared by graphs copied from one another (NodeId::graph)
  size_t size() const { return nodes_.size(); }
  const std::vector<NodeId>& parameters() const { return parameters_; }
  const std::vector<NodeId>& states() const { return states_; }
  bool is_state(NodeId n) const { return node(n).op == Op::Parameter && node(n).attrs.flag_a; }
  const std::vector<NodeId>& inputs() const { return inputs_; }
  std::optional<NodeId> find(const std::string& name) const;  // by node name
  // Every name find() knows (node names and aliases), sorted by name: rewrites carry them to a new graph.
  std::vector<std::pair<std::string, NodeId>> names() const;
  const std::vector<float>& constant_data(NodeId id) const;

  // gradients added by autodiff: grad of a parameter (or an input that asked for one) by handle
  std::optional<NodeId> gradient(NodeId wrt) const;
  void set_gradient(NodeId wrt, NodeId grad);
  const std::map<NodeId, NodeId>& gradients() const { return gradients_; }

  std::string to_text() const;  // readable listing with names and builder lines
  std::string to_dot() const;   // Graphviz

 private:
  std::vector<Node> nodes_;
  std::vector<NodeId> outputs_, parameters_, inputs_, states_;
  std::map<NodeId, NodeId> gradients_;
  std::unordered_map<uint32_t, ParamInit> inits_;  // by node index
  std::unordered_map<uint32_t, std::vector<float>> constants_;
  std::unordered_map<uint64_t, std::vector<NodeId>> intern_;  // structural hash -> candidates
  std::unordered_map<std::string, NodeId> names_;
  std::vector<Provenance> derivations_;
  uint32_t tag_ = new_tag();
  static uint32_t new_tag();
  void check_tag(NodeId id, const char* where, const Loc* loc = nullptr) const;

  NodeId intern_or_add(Node n, uint64_t h, const std::vector<float>* data);
};

// RAII form of push_derivation/pop_derivation.
class DerivationScope {
 public:
  DerivationScope(Graph& g, const std::string& rule, NodeId from) : g_(g) { g_.push_derivation(rule, from); }
  ~DerivationScope() { g_.pop_derivation(); }
  DerivationScope(const DerivationScope&) = delete;
  DerivationScope& operator=(const DerivationScope&) = delete;

 private:
  Graph& g_;
};

}  // namespace meganeura

template <>
struct std::hash<meganeura::NodeId> {
  size_t operator()(meganeura::NodeId id) const noexcept { return id.v; }
};
