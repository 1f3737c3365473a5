#include "meganeura/ir/graph.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>

#include "meganeura/ir/shape_rule.hpp"

namespace meganeura {

namespace {

uint64_t mix(uint64_t h, uint64_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

uint64_t structural_hash(const Node& n) {
  uint64_t h = mix(uint64_t(n.op), uint64_t(n.dtype));
  for (int64_t d : n.shape) h = mix(h, uint64_t(d));
  h = mix(h, 0xabcdefULL);
  for (NodeId i : n.inputs) h = mix(h, i.v);
  const Attrs& a = n.attrs;
  for (int64_t x : a.axes) h = mix(h, uint64_t(x));
  h = mix(h, 1);
  for (int64_t x : a.ints) h = mix(h, uint64_t(x));
  h = mix(h, 2);
  for (double x : a.reals) h = mix(h, std::bit_cast<uint64_t>(x));
  h = mix(h, uint64_t(a.keepdim) | uint64_t(a.flag_a) << 1 | uint64_t(a.flag_b) << 2);
  h = mix(h, uint64_t(a.reduction) | uint64_t(a.dtype) << 8);
  return mix(h, a.seed);
}

Provenance at(std::source_location loc, std::string name = {}) {
  Provenance p;
  p.loc = loc;
  p.name = std::move(name);
  return p;
}

Attrs with_axes(std::vector<int64_t> axes, bool keepdim = false) {
  Attrs a;
  a.axes = std::move(axes);
  a.keepdim = keepdim;
  return a;
}

Attrs with_reals(std::vector<double> reals) {
  Attrs a;
  a.reals = std::move(reals);
  return a;
}

Attrs with_ints(std::vector<int64_t> ints) {
  Attrs a;
  a.ints = std::move(ints);
  return a;
}

Attrs with_reduction(Reduction r) {
  Attrs a;
  a.reduction = r;
  return a;
}

// Axes as stored: non-negative and sorted, "all" spelled out, so equal reductions intern to one node and
// consumers never re-normalise. Out-of-range axes are kept as given for the shape rule to report.
std::vector<int64_t> canonical_axes(const Shape& s, std::vector<int64_t> axes) {
  int64_t r = int64_t(s.size());
  if (axes.empty()) {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
    return axes;
  }
  for (int64_t a : axes)
    if (a < -r || a >= r) return axes;
  for (int64_t& a : axes)
    if (a < 0) a += r;
  std::sort(axes.begin(), axes.end());
  return axes;
}

[[noreturn]] void builder_fail(const char* op, const std::string& expected, const std::string& got,
                               const std::source_location& loc) {
  throw ShapeError("[" + std::string(op) + "] expected " + expected + ", got " + got + " at " +
                   meganeura::where(loc));
}

}  // namespace

// ---- construction ---------------------------------------------------------------------------------------

uint32_t Graph::new_tag() {
  static std::atomic<uint32_t> next{1};
  uint32_t t = next.fetch_add(1, std::memory_order_relaxed);
  return t ? t : next.fetch_add(1, std::memory_order_relaxed);  // 0 means untagged, even after wrapping
}

void Graph::check_tag(NodeId id, const char* fn, const Loc* loc) const {
  if (id.graph != 0 && id.graph != tag_)
    throw GraphError(std::string("[") + fn + "] expected a node id of this graph (graph #" +
                     std::to_string(tag_) + "), got node %" + std::to_string(id.v) +
                     " of another Graph (graph #" + std::to_string(id.graph) + ")" +
                     (loc ? " at " + meganeura::where(*loc) : std::string()));
}

const Node& Graph::node(NodeId id) const {
  check_tag(id, "Graph::node");
  if (!id.valid() || id.v >= nodes_.size())
    throw GraphError("[Graph::node] expected a node id below " + std::to_string(nodes_.size()) + ", got " +
                     (id.valid() ? std::to_string(id.v) : std::string("an invalid id")));
  return nodes_[id.v];
}

NodeId Graph::intern_or_add(Node n, uint64_t h, const std::vector<float>* data) {
  // Inputs and parameters are identities, not values: two with equal shape are still different nodes.
  bool internable = n.op != Op::Input && n.op != Op::Parameter;
  if (internable) {
    auto it = intern_.find(h);
    if (it != intern_.end())
      for (NodeId c : it->second) {
        const Node& o = nodes_[c.v];
        if (o.op == n.op && o.dtype == n.dtype && o.shape == n.shape && o.inputs == n.inputs &&
            o.attrs == n.attrs && (!data || constants_.at(c.v) == *data))
          return c;
      }
  }
  NodeId id{uint32_t(nodes_.size()), tag_};
  if (!n.prov.name.empty()) names_[n.prov.name] = id;
  if (n.op == Op::Input) inputs_.push_back(id);
  if (n.op == Op::Parameter) (n.attrs.flag_a ? states_ : parameters_).push_back(id);
  if (data) constants_[id.v] = *data;
  nodes_.push_back(std::move(n));
  if (internable) intern_[h].push_back(id);
  return id;
}

NodeId Graph::make(Op op, std::vector<NodeId> inputs, Attrs attrs, Provenance prov) {
  const int arity = op_arity(op);
  const char* name = op_name(op);
  if (op == Op::Constant)
    throw GraphError("[Graph::make] expected constant() for a constant node, got make(constant)");
  if (arity >= 0 && inputs.size() != size_t(arity))
    throw GraphError("[" + std::string(name) + "] expected " + std::to_string(arity) + " inputs, got " +
                     std::to_string(inputs.size()) + " at " + meganeura::where(prov.loc));
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_tag(inputs[i], name, &prov.loc);
    if (!inputs[i].valid() || inputs[i].v >= nodes_.size())
      throw GraphError("[" + std::string(name) + "] expected input " + std::to_string(i) +
                       " to be a node of this graph, got id " +
                       (inputs[i].valid() ? std::to_string(inputs[i].v) : std::string("invalid")) + " at " +
                       meganeura::where(prov.loc));
  }
  if (!derivations_.empty()) {
    const Provenance& dp = derivations_.back();
    prov.loc = dp.loc;
    if (prov.rule.empty()) prov.rule = dp.rule;
    if (prov.derived_from.empty()) prov.derived_from = dp.derived_from;
    if (prov.origin.empty()) prov.origin = dp.origin;
    prov.backward = prov.backward || dp.backward;
  }
  if (op == Op::Input || op == Op::Parameter) {
    if (prov.name.empty())
      throw GraphError("[" + std::string(name) + "] expected a name, got an empty one at " +
                       meganeura::where(prov.loc));
    auto it = names_.find(prov.name);
    if (it != names_.end()) {
      Op other = nodes_[it->second.v].op;
      if (other == Op::Input || other == Op::Parameter)
        throw GraphError("[" + std::string(name) + "] expected a unique name, got '" + prov.name + "' at " +
                         meganeura::where(prov.loc) + ", which already names " + op_name(other) + " %" +
                         std::to_string(it->second.v) + " made at " +
                         meganeura::where(nodes_[it->second.v].prov.loc));
    }
  }
  // Block-quantized storage: a parameter (not a state) whose last dimension is whole blocks, read only by
  // matmul (either operand) and by gather (the table), which dequantize as they load and produce f32.
  auto quant_fail = [&](const std::string& expected, const std::string& got) {
    throw GraphError("[" + std::string(name) + "] expected " + expected + ", got " + got +
                     (prov.name.empty() ? std::string() : " for '" + prov.name + "'") + " at " +
                     meganeura::where(prov.loc));
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Node& in = nodes_[inputs[i].v];
    if (!is_quantized(in.dtype) || op == Op::MatMul || (op == Op::Gather && i == 0)) continue;
    quant_fail(
        "inputs of float or integer dtype (block-quantized parameters are read only by matmul and by "
        "gather's table)",
        "input " + std::to_string(i) + " '" + in.prov.name + "' of dtype " + dtype_name(in.dtype));
  }
  ShapeCtx ctx{op, *this, inputs, attrs, prov};
  TypeInfo t = infer_type(ctx);
  if (is_quantized(t.dtype)) {
    if (op == Op::MatMul || op == Op::Gather) {
      t.dtype = DType::F32;
    } else if (op != Op::Parameter || attrs.flag_a) {
      quant_fail(
          "a float or integer dtype (block-quantized dtypes are for parameters only)",
          std::string(op == Op::Parameter ? "a state" : op_name(op)) + " of dtype " + dtype_name(t.dtype));
    } else {
      const uint32_t be = dtype_block_elems(t.dtype);
      if (t.shape.empty() || t.shape.back() % be != 0)
        quant_fail("a last dimension that is a multiple of " + std::to_string(be) + " (the block of " +
                       dtype_name(t.dtype) + ")",
                   "shape " + shape_str(t.shape));
    }
  }
  // Zero-size tensors have no kernel (and no use): refused where they are made, naming the line.
  for (int64_t dim : t.shape)
    if (dim < 1)
      throw ShapeError("[" + std::string(name) + "] expected every dimension >= 1, got shape " +
                       shape_str(t.shape) + (ctx.prov.name.empty() ? "" : " for '" + ctx.prov.name + "'") +
                       " at " + meganeura::where(ctx.prov.loc));
  Node n{op, t.dtype, std::move(t.shape), std::move(inputs), std::move(attrs), std::move(prov)};
  uint64_t h = structural_hash(n);
  return intern_or_add(std::move(n), h, nullptr);
}

Provenance Provenance::derived(const Provenance& from, NodeId from_id, const std::string& rule) {
  Provenance p;
  p.loc = from.loc;
  p.rule = rule;
  p.derived_from = {from_id};
  p.origin = from.name.empty() ? from.origin : from.name;
  p.backward = from.backward || rule == "autodiff";
  return p;
}

void Graph::push_derivation(const std::string& rule, NodeId from) {
  derivations_.push_back(Provenance::derived(node(from).prov, from, rule));
}

void Graph::pop_derivation() {
  if (derivations_.empty()) throw GraphError("[Graph::pop_derivation] expected an open derivation, got none");
  derivations_.pop_back();
}

// ---- leaves ---------------------------------------------------------------------------------------------

NodeId Graph::input(const std::string& name, Shape shape, DType dtype, Loc loc) {
  Attrs a = with_ints(shape);
  a.dtype = dtype;
  return make(Op::Input, {}, std::move(a), at(loc, name));
}

NodeId Graph::parameter(const std::string& name, Shape shape, DType dtype, Loc loc) {
  Attrs a = with_ints(shape);
  a.dtype = dtype;
  return make(Op::Parameter, {}, std::move(a), at(loc, name));
}

NodeId Graph::state(const std::string& name, Shape shape, DType dtype, Loc loc) {
  Attrs a = with_ints(shape);
  a.dtype = dtype;
  a.flag_a = true;
  return make(Op::Parameter, {}, std::move(a), at(loc, name));
}

void Graph::set_init(NodeId p, ParamInit init) {
  const Node& n = node(p);
  if (n.op != Op::Parameter || n.attrs.flag_a)
    throw GraphError("[Graph::set_init] expected a parameter, got " + std::string(op_name(n.op)) + " '" +
                     n.prov.name + "'" + (n.attrs.flag_a ? " (a state)" : ""));
  inits_[p.v] = init;
}

ParamInit Graph::init_of(NodeId p) const {
  node(p);
  auto it = inits_.find(p.v);
  return it == inits_.end() ? ParamInit{} : it->second;
}

NodeId Graph::constant(std::vector<float> data, Shape shape, Loc loc) {
  for (int64_t d : shape)
    if (d < 1) builder_fail("constant", "every dimension >= 1", shape_str(shape), loc);
  if (int64_t(data.size()) != numel(shape))
    builder_fail("constant", std::to_string(numel(shape)) + " values for shape " + shape_str(shape),
                 std::to_string(data.size()) + " values", loc);
  Provenance prov = at(loc);
  if (!derivations_.empty()) {
    prov.loc = derivations_.back().loc;
    prov.rule = derivations_.back().rule;
    prov.derived_from = derivations_.back().derived_from;
    prov.origin = derivations_.back().origin;
    prov.backward = derivations_.back().backward;
  }
  Node n{Op::Constant, DType::F32, shape, {}, with_ints(shape), std::move(prov)};
  uint64_t h = structural_hash(n);
  for (float v : data) h = mix(h, std::bit_cast<uint32_t>(v));
  return intern_or_add(std::move(n), h, &data);
}

NodeId Graph::scalar(double value, Loc loc) { return fill(value, {}, DType::F32, loc); }
NodeId Graph::fill(double value, Shape shape, Loc loc) {
  return fill(value, std::move(shape), DType::F32, loc);
}
NodeId Graph::fill(double value, Shape shape, DType dtype, Loc loc) {
  Attrs a = with_ints(std::move(shape));
  a.reals = {value};
  a.dtype = dtype;
  return make(Op::Fill, {}, std::move(a), at(loc));
}

// ---- names, outputs, gradients ----------------------------------------------------------------------------

NodeId Graph::named(NodeId x, const std::string& name) {
  const Node& n = node(x);
  if (name.empty()) throw GraphError("[Graph::named] expected a non-empty name, got \"\"");
  // Inputs and parameters are fed and found by the name they were made with; it never changes hands.
  if ((n.op == Op::Input || n.op == Op::Parameter) && n.prov.name != name)
    throw GraphError("[Graph::named] expected a node that is not an input or parameter, got " +
                     std::string(op_name(n.op)) + " '" + n.prov.name + "' (renamed to '" + name + "')");
  auto it = names_.find(name);
  if (it != names_.end() && it->second != x) {
    Op other = nodes_[it->second.v].op;
    if (other == Op::Input || other == Op::Parameter)
      throw GraphError("[Graph::named] expected a name not taken by an input or parameter, got '" + name +
                       "' for node %" + std::to_string(x.v) + " (made at " + meganeura::where(n.prov.loc) +
                       "), which already names " + op_name(other) + " %" + std::to_string(it->second.v) +
                       " made at " + meganeura::where(nodes_[it->second.v].prov.loc));
  }
  nodes_[x.v].prov.name = name;
  names_[name] = x;
  return x;
}

void Graph::alias(NodeId x, const std::string& name) {
  node(x);
  if (nodes_[x.v].prov.name.empty()) nodes_[x.v].prov.name = name;
  names_[name] = x;
}

std::optional<NodeId> Graph::find(const std::string& name) const {
  auto it = names_.find(name);
  if (it == names_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::pair<std::string, NodeId>> Graph::names() const {
  std::vector<std::pair<std::string, NodeId>> r(names_.begin(), names_.end());
  std::sort(r.begin(), r.end());
  return r;
}

void Graph::set_outputs(std::vector<NodeId> outputs, Loc loc) {
  if (outputs.empty())
    throw GraphError("[Graph::set_outputs] expected at least one output, got none at " +
                     meganeura::where(loc));
  for (NodeId o : outputs) {
    check_tag(o, "Graph::set_outputs", &loc);
    node(o);
  }
  outputs_ = std::move(outputs);
}

const std::vector<float>& Graph::constant_data(NodeId id) const {
  const Node& n = node(id);
  if (n.op != Op::Constant)
    throw GraphError("[Graph::constant_data] expected a constant node, got " + std::string(op_name(n.op)) +
                     " %" + std::to_string(id.v));
  return constants_.at(id.v);
}

std::optional<NodeId> Graph::gradient(NodeId wrt) const {
  auto it = gradients_.find(wrt);
  if (it == gradients_.end()) return std::nullopt;
  return it->second;
}

void Graph::set_gradient(NodeId wrt, NodeId grad) {
  const Node& w = node(wrt);
  const Node& gr = node(grad);
  if (w.shape != gr.shape)
    throw ShapeError("[Graph::set_gradient] expected a gradient of shape " + shape_str(w.shape) + " for '" +
                     w.prov.name + "', got " + shape_str(gr.shape));
  gradients_[wrt] = grad;
}

// ---- unary ------------------------------------------------------------------------------------------------

#define MN_UNARY(fn, OP) \
  NodeId Graph::fn(NodeId x, Loc loc) { return make(Op::OP, {x}, {}, at(loc)); }
MN_UNARY(neg, Neg)
MN_UNARY(abs, Abs)
MN_UNARY(sign, Sign)
MN_UNARY(exp, Exp)
MN_UNARY(log, Log)
MN_UNARY(sqrt, Sqrt)
MN_UNARY(rsqrt, Rsqrt)
MN_UNARY(reciprocal, Reciprocal)
MN_UNARY(square, Square)
MN_UNARY(relu, Relu)
MN_UNARY(sigmoid, Sigmoid)
MN_UNARY(tanh, Tanh)
MN_UNARY(silu, Silu)
MN_UNARY(softplus, Softplus)
MN_UNARY(sin, Sin)
MN_UNARY(cos, Cos)
MN_UNARY(erf, Erf)
MN_UNARY(stop_gradient, StopGradient)
#undef MN_UNARY

NodeId Graph::leaky_relu(NodeId x, double alpha, Loc loc) {
  return make(Op::LeakyRelu, {x}, with_reals({alpha}), at(loc));
}
NodeId Graph::elu(NodeId x, double alpha, Loc loc) {
  return make(Op::Elu, {x}, with_reals({alpha}), at(loc));
}
NodeId Graph::gelu(NodeId x, bool tanh_approx, Loc loc) {
  Attrs a;
  a.flag_a = tanh_approx;
  return make(Op::Gelu, {x}, std::move(a), at(loc));
}
NodeId Graph::clamp(NodeId x, double lo, double hi, Loc loc) {
  return make(Op::Clamp, {x}, with_reals({lo, hi}), at(loc));
}
NodeId Graph::cast(NodeId x, DType to, Loc loc) {
  Attrs a;
  a.dtype = to;
  return make(Op::Cast, {x}, std::move(a), at(loc));
}
NodeId Graph::round_to_format(NodeId x, NumberFormat format, bool saturate, FormatRounding rounding,
                              Loc loc) {
  Attrs a;
  a.ints = {int64_t(format), saturate ? 1 : 0, int64_t(rounding)};
  return make(Op::RoundToFormat, {x}, std::move(a), at(loc));
}

// ---- binary -----------------------------------------------------------------------------------------------

#define MN_BINARY(fn, OP) \
  NodeId Graph::fn(NodeId a, NodeId b, Loc loc) { return make(Op::OP, {a, b}, {}, at(loc)); }
MN_BINARY(add, Add)
MN_BINARY(sub, Sub)
MN_BINARY(mul, Mul)
MN_BINARY(div, Div)
MN_BINARY(pow, Pow)
MN_BINARY(maximum, Maximum)
MN_BINARY(minimum, Minimum)
MN_BINARY(eq, Eq)
MN_BINARY(ne, Ne)
MN_BINARY(lt, Lt)
MN_BINARY(le, Le)
MN_BINARY(gt, Gt)
MN_BINARY(ge, Ge)
#undef MN_BINARY

NodeId Graph::where(NodeId cond, NodeId a, NodeId b, Loc loc) {
  return make(Op::Where, {cond, a, b}, {}, at(loc));
}

NodeId Graph::matmul(NodeId a, NodeId b, bool transpose_a, bool transpose_b, Loc loc) {
  Attrs at_;
  at_.flag_a = transpose_a;
  at_.flag_b = transpose_b;
  return make(Op::MatMul, {a, b}, std::move(at_), at(loc));
}

// ---- reductions -------------------------------------------------------------------------------------------

NodeId Graph::sum(NodeId x, std::vector<int64_t> axes, bool keepdim, Loc loc) {
  return make(Op::Sum, {x}, with_axes(canonical_axes(node(x).shape, std::move(axes)), keepdim), at(loc));
}
NodeId Graph::mean(NodeId x, std::vector<int64_t> axes, bool keepdim, Loc loc) {
  return make(Op::Mean, {x}, with_axes(canonical_axes(node(x).shape, std::move(axes)), keepdim), at(loc));
}
NodeId Graph::max(NodeId x, std::vector<int64_t> axes, bool keepdim, Loc loc) {
  return make(Op::Max, {x}, with_axes(canonical_axes(node(x).shape, std::move(axes)), keepdim), at(loc));
}
NodeId Graph::min(NodeId x, std::vector<int64_t> axes, bool keepdim, Loc loc) {
  return make(Op::Min, {x}, with_axes(canonical_axes(node(x).shape, std::move(axes)), keepdim), at(loc));
}
NodeId Graph::variance(NodeId x, std::vector<int64_t> axes, bool keepdim, Loc loc) {
  return make(Op::Variance, {x}, with_axes(canonical_axes(node(x).shape, std::move(axes)), keepdim), at(loc));
}
NodeId Graph::argmax(NodeId x, int64_t axis, bool keepdim, Loc loc) {
  return make(Op::ArgMax, {x}, with_axes(canonical_axes(node(x).shape, {axis}), keepdim), at(loc));
}
NodeId Graph::softmax(NodeId x, int64_t axis, Loc loc) {
  return make(Op::Softmax, {x}, with_axes(canonical_axes(node(x).shape, {axis})), at(loc));
}
NodeId Graph::log_softmax(NodeId x, int64_t axis, Loc loc) {
  return make(Op::LogSoftmax, {x}, with_axes(canonical_axes(node(x).shape, {axis})), at(loc));
}

// ---- losses -----------------------------------------------------------------------------------------------

NodeId Graph::cross_entropy_loss(NodeId logits, NodeId targets, Reduction r, Loc loc) {
  return make(Op::CrossEntropy, {logits, targets}, with_reduction(r), at(loc));
}
NodeId Graph::cross_entropy_loss_index(NodeId logits, NodeId labels, int64_t ignore_index, Reduction r,
                                       Loc loc) {
  Attrs a = with_reduction(r);
  a.ints = {ignore_index};
  return make(Op::CrossEntropyIndex, {logits, labels}, std::move(a), at(loc));
}
NodeId Graph::mse_loss(NodeId pred, NodeId target, Reduction r, Loc loc) {
  return make(Op::MseLoss, {pred, target}, with_reduction(r), at(loc));
}
NodeId Graph::l1_loss(NodeId pred, NodeId target, Reduction r, Loc loc) {
  return make(Op::L1Loss, {pred, target}, with_reduction(r), at(loc));
}
NodeId Graph::bce_with_logits(NodeId logits, NodeId target, Reduction r, Loc loc) {
  return make(Op::BceWithLogits, {logits, target}, with_reduction(r), at(loc));
}

// ---- normalisation (rows in ops/norm.cpp) -----------------------------------------------------------------
// Attrs: reals = {eps}; batch_norm flag_a = training; group_norm ints = {groups}.

NodeId Graph::layer_norm(NodeId x, NodeId weight, NodeId bias, double eps, Loc loc) {
  return make(Op::LayerNorm, {x, weight, bias}, with_reals({eps}), at(loc));
}
NodeId Graph::rms_norm(NodeId x, NodeId weight, double eps, Loc loc) {
  return make(Op::RmsNorm, {x, weight}, with_reals({eps}), at(loc));
}
NodeId Graph::batch_norm(NodeId x, NodeId weight, NodeId bias, NodeId running_mean, NodeId running_var,
                         bool training, double eps, Loc loc) {
  Attrs a = with_reals({eps});
  a.flag_a = training;
  return make(Op::BatchNorm, {x, weight, bias, running_mean, running_var}, std::move(a), at(loc));
}
NodeId Graph::group_norm(NodeId x, NodeId weight, NodeId bias, int64_t groups, double eps, Loc loc) {
  Attrs a = with_reals({eps});
  a.ints = {groups};
  return make(Op::GroupNorm, {x, weight, bias}, std::move(a), at(loc));
}

// ---- movement ---------------------------------------------------------------------------------------------
// Reshape: ints = target shape (resolved); BroadcastTo: ints = target shape; Permute: axes = order.
// Slice: axes = {axis}, ints = {start, stop, step} as given (the rule normalises); Concat: axes = {axis};
// Pad: ints = before ++ after, reals = {value}; ScatterAdd: ints = {rows}.

NodeId Graph::reshape(NodeId x, Shape shape, Loc loc) {
  const Shape& from = node(x).shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && infer < 0) {
      infer = int64_t(i);
    } else if (shape[i] < 0) {
      builder_fail("reshape", "non-negative dimensions and at most one -1",
                   shape_str(shape) + " for input " + shape_str(from), loc);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel(from) % known != 0)
      builder_fail("reshape", "a shape whose -1 divides " + std::to_string(numel(from)) + " elements",
                   shape_str(shape) + " for input " + shape_str(from), loc);
    shape[size_t(infer)] = numel(from) / known;
  }
  const Node& xn = node(x);
  if (xn.op == Op::Fill && numel(shape) == numel(xn.shape))
    return fill(xn.attrs.reals[0], shape, xn.dtype, loc);
  return make(Op::Reshape, {x}, with_ints(shape), at(loc));
}

NodeId Graph::permute(NodeId x, std::vector<int64_t> perm, Loc loc) {
  return make(Op::Permute, {x}, with_axes(std::move(perm)), at(loc));
}

NodeId Graph::transpose(NodeId x, int64_t a, int64_t b, Loc loc) {
  int64_t r = int64_t(node(x).shape.size());
  int64_t na = a < 0 ? a + r : a, nb = b < 0 ? b + r : b;
  if (na < 0 || na >= r || nb < 0 || nb >= r)
    builder_fail("transpose", "axes in [-" + std::to_string(r) + ", " + std::to_string(r) + ")",
                 std::to_string(a) + ", " + std::to_string(b) + " for input " + shape_str(node(x).shape),
                 loc);
  std::vector<int64_t> perm(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) perm[size_t(i)] = i;
  std::swap(perm[size_t(na)], perm[size_t(nb)]);
  return permute(x, std::move(perm), loc);
}

NodeId Graph::slice(NodeId x, int64_t axis, int64_t start, int64_t stop, int64_t step, Loc loc) {
  Attrs a = with_axes({axis});
  a.ints = {start, stop, step};
  return make(Op::Slice, {x}, std::move(a), at(loc));
}

NodeId Graph::concat(std::vector<NodeId> xs, int64_t axis, Loc loc) {
  return make(Op::Concat, std::move(xs), with_axes({axis}), at(loc));
}

std::vector<NodeId> Graph::split(NodeId x, std::vector<int64_t> sizes, int64_t axis, Loc loc) {
  const Shape& s = node(x).shape;
  int64_t r = int64_t(s.size());
  int64_t ax = axis < 0 ? axis + r : axis;
  if (ax < 0 || ax >= r)
    builder_fail("split", "an axis in [-" + std::to_string(r) + ", " + std::to_string(r) + ")",
                 std::to_string(axis) + " for input " + shape_str(s), loc);
  int64_t total = 0;
  for (int64_t z : sizes) total += z;
  if (total != s[size_t(ax)])
    builder_fail("split",
                 "sizes summing to " + std::to_string(s[size_t(ax)]) + " (axis " + std::to_string(ax) +
                     " of " + shape_str(s) + ")",
                 "sizes " + shape_str(sizes), loc);
  std::vector<NodeId> parts;
  int64_t start = 0;
  for (int64_t z : sizes) {
    parts.push_back(slice(x, ax, start, start + z, 1, loc));
    start += z;
  }
  return parts;
}

NodeId Graph::broadcast_to(NodeId x, Shape shape, Loc loc) {
  // A broadcast scalar stays a scalar: no full-size tensor is ever made for it.
  const Node& xn = node(x);
  if (xn.op == Op::Fill && broadcast_shapes(xn.shape, shape) == shape)
    return fill(xn.attrs.reals[0], shape, xn.dtype, loc);
  return make(Op::BroadcastTo, {x}, with_ints(std::move(shape)), at(loc));
}

NodeId Graph::squeeze(NodeId x, int64_t axis, Loc loc) {
  Shape s = node(x).shape;
  int64_t r = int64_t(s.size());
  int64_t ax = axis < 0 ? axis + r : axis;
  if (ax < 0 || ax >= r || s[size_t(ax)] != 1)
    builder_fail("squeeze", "an axis of size 1", "axis " + std::to_string(axis) + " of " + shape_str(s), loc);
  s.erase(s.begin() + ax);
  return make(Op::Reshape, {x}, with_ints(s), at(loc));
}

NodeId Graph::unsqueeze(NodeId x, int64_t axis, Loc loc) {
  Shape s = node(x).shape;
  int64_t r = int64_t(s.size()) + 1;
  int64_t ax = axis < 0 ? axis + r : axis;
  if (ax < 0 || ax >= r)
    builder_fail("unsqueeze", "an axis in [-" + std::to_string(r) + ", " + std::to_string(r) + ")",
                 std::to_string(axis) + " for input " + shape_str(s), loc);
  s.insert(s.begin() + ax, 1);
  return make(Op::Reshape, {x}, with_ints(s), at(loc));
}

NodeId Graph::pad(NodeId x, std::vector<int64_t> before, std::vector<int64_t> after, double value, Loc loc) {
  std::vector<int64_t> ints = before;
  ints.insert(ints.end(), after.begin(), after.end());
  Attrs a = with_ints(std::move(ints));
  a.reals = {value};
  return make(Op::Pad, {x}, std::move(a), at(loc));
}

NodeId Graph::gather(NodeId table, NodeId indices, Loc loc) {
  return make(Op::Gather, {table, indices}, {}, at(loc));
}

NodeId Graph::scatter_add(NodeId indices, NodeId values, int64_t rows, Loc loc) {
  return make(Op::ScatterAdd, {indices, values}, with_ints({rows}), at(loc));
}

// ---- vision (rows in ops/vision.cpp) ----------------------------------------------------------------------
// Conv2d: ints = {stride h, w, padding h, w, dilation h, w, groups}.
// Pools: ints = {kernel h, w, stride h, w, padding h, w}; an empty stride means stride = kernel.
// UpsampleNearest: ints = {factor}.

namespace {
std::vector<int64_t> pair_or_fail(const char* op, const char* what, const std::vector<int64_t>& v,
                                  const std::source_location& loc) {
  if (v.size() != 2) builder_fail(op, std::string(what) + " of 2 values", shape_str(v), loc);
  return v;
}
}  // namespace

NodeId Graph::conv2d(NodeId x, NodeId weight, std::vector<int64_t> stride, std::vector<int64_t> padding,
                     std::vector<int64_t> dilation, int64_t groups, Loc loc) {
  std::vector<int64_t> ints = pair_or_fail("conv2d", "stride", stride, loc);
  for (int64_t v : pair_or_fail("conv2d", "padding", padding, loc)) ints.push_back(v);
  for (int64_t v : pair_or_fail("conv2d", "dilation", dilation, loc)) ints.push_back(v);
  ints.push_back(groups);
  return make(Op::Conv2d, {x, weight}, with_ints(std::move(ints)), at(loc));
}

namespace {
std::vector<int64_t> pool_ints(const char* op, const std::vector<int64_t>& kernel,
                               const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                               const std::source_location& loc) {
  std::vector<int64_t> ints = pair_or_fail(op, "kernel", kernel, loc);
  for (int64_t v : pair_or_fail(op, "stride", stride.empty() ? kernel : stride, loc)) ints.push_back(v);
  for (int64_t v : pair_or_fail(op, "padding", padding, loc)) ints.push_back(v);
  return ints;
}
}  // namespace

NodeId Graph::max_pool2d(NodeId x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                         std::vector<int64_t> padding, Loc loc) {
  return make(Op::MaxPool2d, {x}, with_ints(pool_ints("max_pool2d", kernel, stride, padding, loc)), at(loc));
}

NodeId Graph::avg_pool2d(NodeId x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                         std::vector<int64_t> padding, Loc loc) {
  return make(Op::AvgPool2d, {x}, with_ints(pool_ints("avg_pool2d", kernel, stride, padding, loc)), at(loc));
}

NodeId Graph::global_avg_pool(NodeId x, Loc loc) {
  if (node(x).shape.size() != 4)
    builder_fail("global_avg_pool", "an input of rank 4 [N,C,H,W]", shape_str(node(x).shape), loc);
  return mean(x, {2, 3}, false, loc);
}

NodeId Graph::upsample_nearest(NodeId x, int64_t factor, Loc loc) {
  return make(Op::UpsampleNearest, {x}, with_ints({factor}), at(loc));
}

// ---- attention (rows in ops/attention.cpp) ----------------------------------------------------------------
// Attention: inputs {q, k, v[, mask]}, flag_a = causal, reals = {scale} (resolved here when 0).
// Rope: reals = {theta}, ints = {position offset}. Dropout: reals = {p}, seed.

NodeId Graph::scaled_dot_product_attention(NodeId q, NodeId k, NodeId v, bool causal,
                                           std::optional<NodeId> mask, double scale, Loc loc) {
  const Shape& qs = node(q).shape;
  if (scale == 0.0) {
    if (qs.empty() || qs.back() <= 0)
      builder_fail("scaled_dot_product_attention", "q of shape [B,H,S,D] with D > 0", shape_str(qs), loc);
    scale = 1.0 / std::sqrt(double(qs.back()));
  }
  std::vector<NodeId> ins{q, k, v};
  if (mask) ins.push_back(*mask);
  Attrs a = with_reals({scale});
  a.flag_a = causal;
  return make(Op::Attention, std::move(ins), std::move(a), at(loc));
}

NodeId Graph::rope(NodeId x, double theta, int64_t position_offset, Loc loc) {
  Attrs a = with_reals({theta});
  a.ints = {position_offset};
  return make(Op::Rope, {x}, std::move(a), at(loc));
}

NodeId Graph::rope(NodeId x, NodeId start, double theta, Loc loc) {
  Attrs a = with_reals({theta});
  a.ints = {0};
  return make(Op::Rope, {x, start}, std::move(a), at(loc));
}

NodeId Graph::write_slice(NodeId state, NodeId value, NodeId start, int64_t axis, Loc loc) {
  Attrs a;
  a.axes = {axis};
  return make(Op::WriteSlice, {state, value, start}, std::move(a), at(loc));
}

NodeId Graph::sample(NodeId logits, NodeId seen, NodeId params, NodeId rng, Loc loc) {
  return make(Op::Sample, {logits, seen, params, rng}, Attrs{}, at(loc));
}

NodeId Graph::dropout(NodeId x, double p, uint64_t seed, Loc loc) {
  Attrs a = with_reals({p});
  a.seed = seed;
  return make(Op::Dropout, {x}, std::move(a), at(loc));
}

}  // namespace meganeura
