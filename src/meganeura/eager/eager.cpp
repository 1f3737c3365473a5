// Eager: every eval() is a normal build() of the subgraph that computes the node (inference, no autodiff),
// cached by the subgraph's structure, so eager values come from exactly the kernels a compiled session runs.
#include "meganeura/eager/eager.hpp"

#include <variant>

#include "meganeura/codegen/codegen.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/session/pipeline.hpp"

namespace meganeura::eager {

struct Eager::State {
  std::shared_ptr<runtime::Device> device;
  SessionConfig config;
  KernelCache kernels;  // kernels shared by every compiled subgraph
  std::map<uint64_t, std::unique_ptr<Session>> sessions;
  std::map<std::string, std::variant<std::vector<float>, std::vector<int32_t>>> values;
};

namespace {

SessionConfig inference(SessionConfig c) {
  c.training = false;
  c.optimizer.kind = OptimizerKind::None;
  c.dump_plan.clear();
  return c;
}

// A text key of everything the value of `node` depends on: the nodes it reaches, numbered locally, with op,
// dtype, shape, attributes, leaf names and constant data. Equal keys compile to the same session.
std::string subgraph_key(const Graph& g, NodeId node, std::vector<NodeId>& leaves) {
  std::vector<char> reach(node.v + 1, 0);
  reach[node.v] = 1;
  for (uint32_t v = node.v + 1; v-- > 0;)
    if (reach[v])
      for (NodeId i : g.node(NodeId{v}).inputs) reach[i.v] = 1;
  std::map<uint32_t, size_t> local;
  std::string key;
  auto num = [&](auto x) { key += std::to_string(x) + ","; };
  for (uint32_t v = 0; v <= node.v; ++v) {
    if (!reach[v]) continue;
    const Node& n = g.node(NodeId{v});
    local[v] = local.size();
    key += std::string(op_name(n.op)) + "|" + dtype_name(n.dtype) + "|";
    for (int64_t d : n.shape) num(d);
    key += "|";
    for (NodeId i : n.inputs) num(local.at(i.v));
    key += "|";
    const Attrs& a = n.attrs;
    for (int64_t x : a.axes) num(x);
    key += ";";
    for (int64_t x : a.ints) num(x);
    key += ";";
    for (double x : a.reals) key += std::to_string(x) + ",";
    key += ";";
    num(int(a.keepdim));
    num(int(a.flag_a));
    num(int(a.flag_b));
    num(int(a.reduction));
    num(int(a.dtype));
    num(a.seed);
    if (n.op == Op::Input || n.op == Op::Parameter) {
      key += "name=" + n.prov.name;
      leaves.push_back(NodeId{v});
    }
    if (n.op == Op::Constant)
      for (float x : g.constant_data(NodeId{v})) key += std::to_string(x) + ",";
    key += "\n";
  }
  return key;
}

}  // namespace

Eager::Eager() : Eager(nullptr, SessionConfig::from_env()) {}

Eager::Eager(std::shared_ptr<runtime::Device> device, SessionConfig config) : s_(std::make_unique<State>()) {
  s_->config = inference(std::move(config));
  if (!device) {
    runtime::DeviceOptions o;
    o.device_id = s_->config.device_id;
    o.validation = s_->config.validation;
    device = runtime::open_device(o);
  }
  s_->device = std::move(device);
}

Eager::~Eager() = default;

void Eager::set(const std::string& name, std::span<const float> values) {
  s_->values[name] = std::vector<float>(values.begin(), values.end());
}
void Eager::set(const std::string& name, std::span<const int32_t> values) {
  s_->values[name] = std::vector<int32_t>(values.begin(), values.end());
}

size_t Eager::compiled() const { return s_->sessions.size(); }

std::vector<float> Eager::eval(const Graph& g, NodeId node) {
  g.node(node);
  std::vector<NodeId> leaves;
  const std::string key = subgraph_key(g, node, leaves);
  std::string missing;
  for (NodeId l : leaves)
    if (!s_->values.count(g.node(l).prov.name))
      missing += (missing.empty() ? "" : ", ") + g.node(l).prov.name;
  if (!missing.empty())
    throw SessionError(
        "[eager::Eager::eval] expected a value (Eager::set) for every input and parameter node '" +
        node_label(g, node) + "' reads, got none for " + missing);
  std::unique_ptr<Session>& session = s_->sessions[content_hash(key, {})];
  if (!session) {
    Graph sub = g;  // the caller's graph is not touched: it keeps growing and compiles unchanged later
    sub.set_outputs({node});
    CompileOptions co;
    co.cache = &s_->kernels;
    SessionConfig config = s_->config;
    config.init = ParameterInit::Zeros;  // every parameter is set from the caller's values below
    try {
      session = std::make_unique<Session>(build_with(sub, config, s_->device, co));
    } catch (...) {
      s_->sessions.erase(content_hash(key, {}));
      throw;
    }
  }
  for (NodeId l : leaves) {
    const Node& n = g.node(l);
    const auto& v = s_->values.at(n.prov.name);
    bool param = n.op == Op::Parameter;
    if (const auto* f = std::get_if<std::vector<float>>(&v)) {
      if (param)
        session->set_parameter(n.prov.name, *f);
      else
        session->set_input(n.prov.name, *f);
    } else {
      if (param)
        throw SessionError("[eager::Eager::eval] expected float values for parameter '" + n.prov.name +
                           "', got int32");
      session->set_input(n.prov.name, std::get<std::vector<int32_t>>(v));
    }
  }
  session->run();
  return session->read_output(0);
}

}  // namespace meganeura::eager
