#include "meganeura/train/session_target.hpp"

#include "meganeura/core/error.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/train/trainer.hpp"

namespace meganeura {
namespace {

std::vector<TensorInfo> leaf_infos(const Graph& g, const std::vector<NodeId>& ids) {
  std::vector<TensorInfo> out;
  for (NodeId id : ids) {
    const Node& n = g.node(id);
    out.push_back(TensorInfo{n.prov.name, TensorRole::Parameter, n.dtype, n.shape});
  }
  return out;
}

bool has_optimizer(const Session& s) {
  return s.config().training && s.config().optimizer.kind != OptimizerKind::None;
}

}  // namespace

std::vector<TensorInfo> parameter_infos(const Graph& g) { return leaf_infos(g, g.parameters()); }

SessionTarget::SessionTarget(Session session, size_t loss_output)
    : session_(std::move(session)), loss_output_(loss_output) {
  if (!session_.config().training)
    throw ConfigError(
        "[Trainer] expected a training session (SessionConfig::training), got an inference session");
  inputs_ = leaf_infos(session_.graph(), session_.graph().inputs());
  parameters_ = parameter_infos(session_.graph());
}

std::vector<TensorInfo> SessionTarget::inputs() const { return inputs_; }

std::vector<TensorInfo> SessionTarget::parameters() const { return parameters_; }

void SessionTarget::set_input(const std::string& name, const DataTensor& value) {
  if (value.dtype == DType::I32)
    session_.set_input(name, std::span<const int32_t>(value.i32));
  else
    session_.set_input(name, std::span<const float>(value.f32));
}

double SessionTarget::step_loss(uint64_t id) {
  const std::vector<float> loss = session_.read_output(loss_output_, id);
  if (loss.empty())
    throw SessionError("[Trainer] expected a loss value in output " + std::to_string(loss_output_) +
                       ", got an empty output");
  return loss[0];
}

OptimizerConfig SessionTarget::fused_optimizer() const {
  OptimizerConfig c = session_.config().optimizer;
  if (!session_.config().training) c.kind = OptimizerKind::None;
  return c;
}

std::vector<TensorInfo> SessionTarget::optimizer_state() const {
  std::vector<TensorInfo> out;
  if (!has_optimizer(session_)) return out;
  for (const OptimizerStateInfo& s : session_.optimizer_state())
    out.push_back(TensorInfo{s.name, TensorRole::OptimizerState, DType::F32, s.shape});
  return out;
}

std::string SessionTarget::device_name() const { return session_.caps().name; }

Trainer::Trainer(Session session, TrainConfig config)
    : Trainer(std::make_unique<SessionTarget>(std::move(session)), std::move(config)) {}

std::vector<TensorInfo> SessionStore::tensors() const {
  std::vector<TensorInfo> out = parameter_infos(session_.graph());
  if (has_optimizer(session_))
    for (const OptimizerStateInfo& s : session_.optimizer_state())
      out.push_back(TensorInfo{s.name, TensorRole::OptimizerState, DType::F32, s.shape});
  return out;
}

std::vector<std::byte> SessionStore::read(const TensorInfo& t) {
  return to_bytes(t.role == TensorRole::Parameter ? session_.read_parameter(t.name)
                                                  : session_.read_optimizer_state(t.name));
}

void SessionStore::write(const TensorInfo& t, std::span<const std::byte> bytes) {
  const std::vector<float> v = to_floats(bytes);
  if (t.role == TensorRole::Parameter)
    session_.set_parameter(t.name, v);
  else
    session_.set_optimizer_state(t.name, v);
}

std::map<std::string, std::string> SessionStore::metadata() const {
  if (!has_optimizer(session_)) return {};
  return {{"optimizer", optimizer_name(session_.config().optimizer.kind)},
          {"optimizer_step", std::to_string(session_.optimizer_step())}};
}

void SessionStore::set_metadata(const std::map<std::string, std::string>& m) {
  auto it = m.find("optimizer_step");
  if (it != m.end() && has_optimizer(session_)) session_.set_optimizer_step(std::stoull(it->second));
}

}  // namespace meganeura
