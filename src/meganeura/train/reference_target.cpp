#include "meganeura/train/reference_target.hpp"

#include "meganeura/autodiff/autodiff.hpp"
#include "meganeura/core/error.hpp"

namespace meganeura {

ReferenceTarget::ReferenceTarget(const Graph& g) {
  if (g.outputs().empty()) throw GraphError("[ReferenceTarget] expected a graph whose first output is the loss, got no outputs");
  loss_ = g.outputs()[0];
  graph_ = differentiate(g, loss_);
  for (NodeId id : graph_.inputs()) {
    const Node& n = graph_.node(id);
    inputs_.push_back(TensorInfo{n.prov.name, TensorRole::Parameter, n.dtype, n.shape});
    feeds_[n.prov.name] = HostTensor(n.shape);
  }
  for (NodeId id : graph_.parameters()) {
    const Node& n = graph_.node(id);
    parameters_.push_back(TensorInfo{n.prov.name, TensorRole::Parameter, n.dtype, n.shape});
    feeds_[n.prov.name] = HostTensor(n.shape);
    const auto grad = graph_.gradient(id);
    if (!grad) throw GraphError("[ReferenceTarget] expected autodiff to give a gradient for '" + n.prov.name + "', got none");
    gradients_.push_back(*grad);
  }
}

HostTensor& ReferenceTarget::feed(const std::string& name, const char* where) {
  auto it = feeds_.find(name);
  if (it == feeds_.end())
    throw SessionError(std::string("[ReferenceTarget::") + where + "] expected a known input or parameter, got '" + name + "'");
  return it->second;
}

void ReferenceTarget::set_input(const std::string& name, const DataTensor& value) {
  HostTensor& t = feed(name, "set_input");
  const size_t n = value.dtype == DType::I32 ? value.i32.size() : value.f32.size();
  if (n != t.data.size())
    throw SessionError("[ReferenceTarget::set_input] '" + name + "': expected " + std::to_string(t.data.size()) +
                       " values, got " + std::to_string(n));
  for (size_t i = 0; i < n; ++i) t.data[i] = value.dtype == DType::I32 ? value.i32[i] : value.f32[i];
}

double ReferenceTarget::run_step() {
  std::vector<NodeId> want = {loss_};
  want.insert(want.end(), gradients_.begin(), gradients_.end());
  const std::vector<HostTensor> out = reference::evaluate(graph_, feeds_, want);
  for (size_t i = 0; i < parameters_.size(); ++i)
    last_gradients_[parameters_[i].name] = std::vector<float>(out[i + 1].data.begin(), out[i + 1].data.end());
  return out[0].data.at(0);
}

OptimizerConfig ReferenceTarget::fused_optimizer() const {
  OptimizerConfig c;
  c.kind = OptimizerKind::None;
  return c;
}

std::vector<float> ReferenceTarget::read_parameter(const std::string& name) {
  const HostTensor& t = feed(name, "read_parameter");
  return std::vector<float>(t.data.begin(), t.data.end());
}

void ReferenceTarget::set_parameter(const std::string& name, std::span<const float> values) {
  HostTensor& t = feed(name, "set_parameter");
  if (values.size() != t.data.size())
    throw SessionError("[ReferenceTarget::set_parameter] '" + name + "': expected " + std::to_string(t.data.size()) +
                       " values, got " + std::to_string(values.size()));
  t.data.assign(values.begin(), values.end());
}

std::vector<float> ReferenceTarget::read_gradient(const std::string& name) {
  auto it = last_gradients_.find(name);
  if (it == last_gradients_.end())
    throw SessionError("[ReferenceTarget::read_gradient] expected a gradient of '" + name + "' from a finished step, got none");
  return it->second;
}

std::vector<float> ReferenceTarget::read_optimizer_state(const std::string& name) {
  throw SessionError("[ReferenceTarget] expected no optimizer state (updates run on the host), got a read of '" + name + "'");
}

void ReferenceTarget::set_optimizer_state(const std::string& name, std::span<const float>) {
  throw SessionError("[ReferenceTarget] expected no optimizer state (updates run on the host), got a write of '" + name + "'");
}

}  // namespace meganeura
