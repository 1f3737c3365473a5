// load_onnx: parse, bind inputs and initializers, lower node by node through the converter table, collect
// what cannot be lowered.
#include <algorithm>
#include <filesystem>
#include <set>

#include "meganeura/core/error.hpp"
#include "meganeura/formats/mmap.hpp"
#include "meganeura/onnx/lower.hpp"
#include "meganeura/onnx/onnx.hpp"
#include "meganeura/onnx/tensor.hpp"

namespace meganeura {
namespace onnx {

const ConverterTable& converters() {
  static const ConverterTable table = [] {
    ConverterTable t;
    add_elementwise_ops(t);
    add_tensor_ops(t);
    add_nn_ops(t);
    add_attention_ops(t);
    add_resize_ops(t);
    add_loss_ops(t);
    add_index_ops(t);
    add_rnn_ops(t);
    return t;
  }();
  return table;
}

HostTensor host_ints(const std::vector<int64_t>& v) {
  HostTensor t(Shape{int64_t(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data[i] = double(v[i]);
  return t;
}

const Value& Lowering::value(size_t i) {
  if (!has_input(i)) unsupported("", "expected input " + std::to_string(i) + ", got none");
  return values.at(node->input[i]);
}

NodeId Lowering::in(size_t i) {
  value(i);
  Value& v = values.at(node->input[i]);
  if (v.node.valid()) return v.node;
  const std::string& name = node->input[i];
  if (v.parameter) {
    v.node = g.parameter(name, v.shape);
    model_.parameters.emplace_back(name, std::vector<float>(v.known->data.begin(), v.known->data.end()));
    if (feeds) (*feeds)[name] = *v.known;
  } else {
    v.node = constant(*v.known);
  }
  return v.node;
}

const HostTensor& Lowering::known(size_t i) {
  value(i);
  Value& v = values.at(node->input[i]);
  if (v.known) return *v.known;
  try {
    v.known = reference::evaluate(g, *feeds, v.node);
  } catch (const Error& e) {
    unsupported("", "input " + std::to_string(i) + " ('" + node->input[i] +
                        "') known at load time, got a value that depends on a runtime input");
  }
  return *v.known;
}

std::vector<int64_t> Lowering::known_ints(size_t i) {
  const HostTensor& t = known(i);
  std::vector<int64_t> r;
  for (double d : t.data) r.push_back(d >= 9.2e18 ? INT64_MAX : d <= -9.2e18 ? INT64_MIN : int64_t(d));
  return r;
}

void Lowering::out(size_t i, NodeId n, int32_t t) {
  if (!has_output(i)) return;
  const std::string& name = node->output[i];
  Value v;
  v.node = n;
  v.type = t;
  v.shape = g.node(n).shape;
  if (!g.find(name)) g.alias(n, name);
  values[name] = std::move(v);
}

void Lowering::out_known(size_t i, HostTensor t, int32_t type) {
  if (!has_output(i)) return;
  Value v;
  v.shape = t.shape;
  v.known = std::move(t);
  v.type = type;
  values[node->output[i]] = std::move(v);
}

const AttributeProto* Lowering::attr(const std::string& name) {
  for (const auto& a : node->attribute)
    if (a.name == name) {
      read_attrs.insert(name);
      if (!a.ref_attr_name.empty())
        unsupported(name, "expected a value, got a reference to a function attribute");
      return &a;
    }
  return nullptr;
}
bool Lowering::has(const std::string& name) { return attr(name) != nullptr; }
int64_t Lowering::attr_i(const std::string& name, int64_t fallback) {
  const AttributeProto* a = attr(name);
  return a ? a->i : fallback;
}
double Lowering::attr_f(const std::string& name, double fallback) {
  const AttributeProto* a = attr(name);
  return a ? a->f : fallback;
}
std::string Lowering::attr_s(const std::string& name, const std::string& fallback) {
  const AttributeProto* a = attr(name);
  return a ? a->s : fallback;
}
std::vector<int64_t> Lowering::attr_ints(const std::string& name, std::vector<int64_t> fallback) {
  const AttributeProto* a = attr(name);
  return a ? a->ints : fallback;
}
std::vector<double> Lowering::attr_floats(const std::string& name) {
  const AttributeProto* a = attr(name);
  std::vector<double> r;
  if (a) r.assign(a->floats.begin(), a->floats.end());
  return r;
}

NodeId Lowering::constant(const HostTensor& t) {
  if (t.data.empty()) unsupported("", "expected a non-empty tensor, got shape " + shape_str(t.shape));
  if (std::all_of(t.data.begin(), t.data.end(), [&](double d) { return d == t.data[0]; }))
    return t.shape.empty() ? g.scalar(t.data[0]) : g.fill(t.data[0], t.shape);
  return g.constant(std::vector<float>(t.data.begin(), t.data.end()), t.shape);
}

NodeId Lowering::index_constant(const HostTensor& t) {
  return g.cast(g.constant(std::vector<float>(t.data.begin(), t.data.end()), t.shape), DType::I32);
}

int64_t Lowering::axis(int64_t a, size_t rank) const {
  const int64_t r = int64_t(rank);
  if (a < -r || a >= r)
    unsupported("axis", "expected an axis in [" + std::to_string(-r) + ", " + std::to_string(r) + "), got " +
                            std::to_string(a));
  return a < 0 ? a + r : a;
}

NodeId Lowering::take(NodeId x, int64_t ax, const HostTensor& indices) {
  const Shape xs = g.node(x).shape;
  HostTensor idx = indices;
  for (double& d : idx.data) {
    if (d < 0) d += double(xs[size_t(ax)]);
    if (d < 0 || d >= double(xs[size_t(ax)]))
      unsupported(
          "", "expected indices in [0, " + std::to_string(xs[size_t(ax)]) + "), got " + std::to_string(d));
  }
  if (idx.data.empty()) unsupported("", "expected at least one index, got none");
  return take_node(x, ax, constant(idx));
}

NodeId Lowering::take_node(NodeId x, int64_t ax, NodeId indices) {
  const Shape xs = g.node(x).shape;
  const Shape is = g.node(indices).shape;
  const int64_t dim = xs[size_t(ax)];
  // negative indices count from the end
  NodeId fixed = g.where(g.lt(indices, g.scalar(0)), g.add(indices, g.scalar(double(dim))), indices);
  NodeId idx = g.cast(fixed, DType::I32);
  // axis to the front, the rest flattened: gather rows of a [dim, rest] table
  std::vector<int64_t> perm{ax};
  for (int64_t a = 0; a < int64_t(xs.size()); ++a)
    if (a != ax) perm.push_back(a);
  NodeId front = ax == 0 ? x : g.permute(x, perm);
  int64_t rest = 1;
  Shape rest_shape;
  for (size_t k = 1; k < perm.size(); ++k) {
    rest *= xs[size_t(perm[k])];
    rest_shape.push_back(xs[size_t(perm[k])]);
  }
  NodeId table = g.reshape(front, {dim, rest});
  NodeId rows = g.gather(table, idx);  // is + [rest]
  Shape gathered = is;
  gathered.insert(gathered.end(), rest_shape.begin(), rest_shape.end());
  NodeId r = g.reshape(rows, gathered);
  // back into place: the index axes go where `ax` was
  const int64_t ni = int64_t(is.size());
  std::vector<int64_t> back;
  for (int64_t a = 0; a < ax; ++a) back.push_back(ni + a);
  for (int64_t a = 0; a < ni; ++a) back.push_back(a);
  for (int64_t a = ax; a < int64_t(rest_shape.size()); ++a) back.push_back(ni + a);
  bool identity = true;
  for (size_t k = 0; k < back.size(); ++k) identity = identity && back[k] == int64_t(k);
  return identity ? r : g.permute(r, back);
}

NodeId Lowering::to_type(NodeId x, int32_t from, int32_t to, bool saturate, FormatRounding e8m0_rounding) {
  if (from == to) return x;
  if (const auto n = narrow_type(to)) {
    if (n->is_float) {
      const bool e8m0 = n->format == NumberFormat::F8E8M0;
      return g.round_to_format(x, n->format, saturate, e8m0 ? e8m0_rounding : FormatRounding::NearestEven);
    }
    const double span = double(1 << n->width), lo = n->is_signed ? -span / 2 : 0.0, hi = lo + span - 1;
    if (is_float_type(from)) {
      // Truncation toward zero. ONNX leaves a float out of the integer's range undefined; it gives 0 here,
      // as ml_dtypes does (the cast of ONNX's reference implementation and of its test data). NaN gives 0.
      NodeId in = g.mul(g.gt(x, g.scalar(lo - 1)), g.lt(x, g.scalar(hi + 1)));
      return g.cast(g.cast(g.where(in, x, g.scalar(0)), DType::I32), DType::F32);
    }
    // integer to integer: the high bits are discarded (two's complement for the signed types), as ONNX says
    NodeId q = g.mul(x, g.scalar(1 / span));  // exact: a power of two
    NodeId t = g.cast(g.cast(q, DType::I32), DType::F32);
    NodeId wrapped = g.sub(x, g.mul(g.sub(t, g.gt(t, q)), g.scalar(span)));  // x - span * floor(x / span)
    return n->is_signed ? g.sub(wrapped, g.mul(g.ge(wrapped, g.scalar(hi + 1)), g.scalar(span))) : wrapped;
  }
  switch (ElemType(to)) {
    case ElemType::Float:
    case ElemType::Double:
      return is_float_type(from) ? x : x;  // integers and booleans are exact floats already
    case ElemType::Float16: return g.cast(g.cast(x, DType::F16), DType::F32);
    case ElemType::Bfloat16: return g.cast(g.cast(x, DType::BF16), DType::F32);
    case ElemType::Bool: return g.ne(x, g.scalar(0));
    case ElemType::Int8:
    case ElemType::Uint8:
    case ElemType::Int16:
    case ElemType::Uint16:
    case ElemType::Int32:
    case ElemType::Int64:
    case ElemType::Uint32:
    case ElemType::Uint64:
      if (!is_float_type(from)) return x;
      return g.cast(g.cast(x, DType::I32), DType::F32);  // truncation toward zero
    default: unsupported("to", std::string("expected a numeric type, got ") + elem_type_name(to));
  }
}

}  // namespace onnx

namespace {

using namespace onnx;

// Whether x depends on an input or a parameter.
bool reaches_leaf(const Graph& g, NodeId x) {
  std::vector<NodeId> stack{x};
  std::set<uint32_t> seen;
  while (!stack.empty()) {
    const NodeId n = stack.back();
    stack.pop_back();
    if (!seen.insert(n.v).second) continue;
    const Node& node = g.node(n);
    if (node.op == Op::Input || node.op == Op::Parameter) return true;
    for (NodeId i : node.inputs) stack.push_back(i);
  }
  return false;
}

std::string node_label(const NodeProto& n) {
  if (!n.name.empty()) return n.name;
  return n.output.empty() ? "(unnamed)" : n.output[0];
}

}  // namespace

OnnxModel load_onnx(const std::string& path, const OnnxOptions& options) {
  MappedFile file(path);
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return load_onnx_bytes(file.bytes(), path, options, dir.empty() ? "." : dir);
}

OnnxModel load_onnx_bytes(std::span<const std::byte> bytes, const std::string& origin,
                          const OnnxOptions& options, const std::string& dir) {
  const ModelProto m = parse_model(bytes, origin);
  OnnxModel model;
  for (const auto& o : m.opset_import)
    if (o.domain.empty() || o.domain == "ai.onnx") model.opset = o.version;
  if (model.opset == 0) model.opset = 1;
  const GraphProto& gp = m.graph;
  Graph& g = model.graph;
  Lowering L(g, model, model.opset);
  reference::Feeds feeds;
  L.feeds = &feeds;
  L.constants_as_parameters = options.constants_as_parameters && !options.initializers_as_constants;
  std::vector<ImportError::Item> items;
  auto fail = [&](const std::string& what) -> void {
    throw FormatError("[load_onnx] " + origin + ": " + what);
  };

  if (gp.sparse_initializers) items.push_back({"(graph)", "sparse_initializer", gp.name, "not supported"});
  for (size_t i = 0; i < gp.initializer.size(); ++i) {
    const TensorProto& t = gp.initializer[i];
    if (t.name.empty()) fail("graph.initializer[" + std::to_string(i) + "]: expected a name, got none");
    Value v;
    v.known = decode_tensor(t, origin + ": initializer '" + t.name + "'", dir);
    v.shape = v.known->shape;
    v.type = t.data_type;
    v.parameter = is_float_type(t.data_type) && !options.initializers_as_constants && !v.known->data.empty();
    L.values[t.name] = std::move(v);
  }
  for (const ValueInfoProto& in : gp.input) {
    if (L.values.count(in.name)) continue;  // an initializer listed as an input (IR < 4): a default value
    if (in.name.empty()) fail("graph.input: expected a name, got none");
    if (!in.is_tensor) {
      items.push_back(
          {"(graph)", "input", in.name, "expected a tensor input, got a sequence, map or optional"});
      continue;
    }
    Value v;
    v.type = in.elem_type;
    auto bound = options.values.find(in.name);
    if (bound != options.values.end()) {
      v.known = bound->second;
      v.shape = bound->second.shape;
      L.values[in.name] = std::move(v);
      continue;
    }
    if (!is_numeric_type(in.elem_type)) {
      items.push_back({"(graph)", "input", in.name,
                       std::string("expected a numeric input, got ") + elem_type_name(in.elem_type)});
      continue;
    }
    if (!in.has_shape) {
      items.push_back({"(graph)", "input", in.name, "expected a declared shape, got none"});
      continue;
    }
    Shape shape;
    const auto given = options.shapes.find(in.name);
    if (given != options.shapes.end()) {
      const Shape& want = given->second;
      bool agrees = want.size() == in.dims.size();
      for (size_t k = 0; agrees && k < want.size(); ++k)
        agrees =
            want[k] > 0 && !(in.dims[k].has_value && in.dims[k].value >= 0 && in.dims[k].value != want[k]);
      if (!agrees)
        throw ImportError("[load_onnx] " + origin + ": OnnxOptions::shapes gives input '" + in.name +
                              "' the shape " + shape_str(want) +
                              ", which does not fit its declared dimensions",
                          {{"(graph)", "shapes", in.name,
                            "expected a shape fitting the declared one, got " + shape_str(want)}});
    }
    for (size_t k = 0; k < in.dims.size(); ++k) {
      const Dim& d = in.dims[k];
      if (given != options.shapes.end()) {
        shape.push_back(given->second[k]);
        continue;
      }
      if (d.has_value && d.value >= 0) {
        shape.push_back(d.value);
        continue;
      }
      auto it = options.dims.find(d.param);
      if (d.param.empty() || it == options.dims.end())
        throw ImportError("[load_onnx] " + origin + ": input '" + in.name + "' has dimension '" + d.param +
                              "', which OnnxOptions::dims does not bind",
                          {{"(graph)", "dims", in.name, "unbound symbolic dimension '" + d.param + "'"}});
      shape.push_back(it->second);
    }
    if (numel(shape) ==
        0) {  // nothing to feed: a known empty value (CastLike's "like", an empty Concat part)
      v.known = HostTensor(shape);
      v.shape = shape;
      L.values[in.name] = std::move(v);
      continue;
    }
    const bool is_float = is_float_type(in.elem_type);
    const DType dt = is_float ? DType::F32 : DType::I32;
    NodeId node = g.input(in.name, shape, dt);
    model.inputs.push_back({in.name, shape, in.elem_type, dt});
    v.node = is_float ? node : g.cast(node, DType::F32);
    v.shape = shape;
    L.values[in.name] = std::move(v);
  }

  const ConverterTable& table = converters();
  for (size_t k = 0; k < gp.node.size(); ++k) {
    const NodeProto& n = gp.node[k];
    ++model.op_histogram[n.op_type];
    auto poison = [&] {
      for (const auto& o : n.output) {
        if (o.empty()) continue;
        Value v;
        v.poisoned = true;
        L.values[o] = std::move(v);
      }
    };
    bool missing = false, poisoned = false;
    for (const auto& i : n.input) {
      if (i.empty()) continue;
      auto it = L.values.find(i);
      if (it == L.values.end())
        missing = true;
      else
        poisoned = poisoned || it->second.poisoned;
    }
    if (missing || poisoned) {
      if (missing)
        for (const auto& i : n.input)
          if (!i.empty() && !L.values.count(i))
            fail("graph.node[" + std::to_string(k) + "] ('" + node_label(n) + "', " + n.op_type +
                 "): input '" + i + "' is not defined by an earlier node, an initializer or a graph input");
      poison();
      continue;
    }
    const bool default_domain = n.domain.empty() || n.domain == "ai.onnx";
    const std::string op = default_domain ? n.op_type : n.domain + "." + n.op_type;
    auto conv = default_domain ? table.find(n.op_type) : table.end();
    if (conv == table.end()) {
      items.push_back({op, "", node_label(n), "no lowering for this op"});
      poison();
      continue;
    }
    L.node = &n;
    L.read_attrs.clear();
    try {
      conv->second(L);
      bool bad = false;
      for (const auto& a : n.attribute)
        if (!L.read_attrs.count(a.name)) {
          items.push_back({op, a.name, node_label(n), "attribute not supported"});
          bad = true;
        }
      for (size_t o = 0; o < n.output.size(); ++o)
        if (!n.output[o].empty() && !L.values.count(n.output[o])) {
          items.push_back({op, "", node_label(n), "output " + std::to_string(o) + " not supported"});
          bad = true;
        }
      if (bad) poison();
    } catch (const Unsupported& u) {
      items.push_back({op, u.attribute, node_label(n), u.reason});
      poison();
    } catch (const ImportError&) {
      throw;
    } catch (const Error& e) {
      // a Graph builder refused what the converter made of this node: a model the lowering does not cover
      items.push_back({op, "", node_label(n), e.what()});
      poison();
    }
  }

  std::vector<NodeId> outs;
  for (const ValueInfoProto& o : gp.output) {
    auto it = L.values.find(o.name);
    if (it == L.values.end())
      fail("graph.output '" + o.name + "': expected a value the graph defines, got none");
    if (it->second.poisoned) continue;
    if (!o.is_tensor) {
      items.push_back(
          {"(graph)", "output", o.name, "expected a tensor output, got a sequence, map or optional"});
      continue;
    }
    L.node = nullptr;
    Value& v = it->second;
    if (!v.node.valid()) {
      // a load-time value (or an initializer): a constant output
      if (v.known->data.empty()) {
        items.push_back({"(graph)", "output", o.name, "expected a non-empty output, got an empty tensor"});
        continue;
      }
      v.node = v.parameter
                   ? g.parameter(o.name, v.shape)
                   : g.constant(std::vector<float>(v.known->data.begin(), v.known->data.end()), v.shape);
      if (v.parameter)
        model.parameters.emplace_back(o.name, std::vector<float>(v.known->data.begin(), v.known->data.end()));
    }
    if (!reaches_leaf(g, v.node)) {
      // computed from constants alone: a Graph output must depend on an input or parameter, so the value
      // (evaluated now) becomes a parameter of its own
      HostTensor value = reference::evaluate(g, feeds, v.node);
      const std::string pname = "onnx_constant/" + o.name;
      v.node = g.parameter(pname, v.shape);
      model.parameters.emplace_back(pname, std::vector<float>(value.data.begin(), value.data.end()));
    }
    outs.push_back(v.node);
    model.outputs.push_back({o.name, v.shape, v.type, DType::F32});
  }
  if (!items.empty()) {
    std::string msg = "[load_onnx] " + origin + ": expected ops and attributes the importer lowers, got " +
                      std::to_string(items.size()) + " it does not:";
    for (const auto& i : items)
      msg += "\n  " + i.op + (i.attribute.empty() ? "" : " attribute '" + i.attribute + "'") + " at node '" +
             i.node + "': " + i.reason;
    throw ImportError(msg, std::move(items));
  }
  g.set_outputs(outs);
  return model;
}

OnnxTensor read_onnx_tensor_bytes(std::span<const std::byte> bytes, const std::string& origin) {
  const TensorProto t = parse_tensor(bytes, origin);
  return {t.name, t.data_type, decode_tensor(t, origin + ": tensor '" + t.name + "'", "")};
}

OnnxTensor read_onnx_tensor(const std::string& path) {
  MappedFile file(path);
  return read_onnx_tensor_bytes(file.bytes(), path);
}

std::vector<std::string> onnx_supported_ops() {
  std::vector<std::string> r;
  for (const auto& [name, fn] : converters()) r.push_back(name);
  return r;
}

}  // namespace meganeura
