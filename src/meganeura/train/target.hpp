#pragma once
// What a Trainer drives: a compiled Session (session_target.hpp), or a small host model in tests.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "meganeura/data/dataset.hpp"
#include "meganeura/session/session.hpp"
#include "meganeura/train/tensor_store.hpp"

namespace meganeura {

class TrainTarget {
 public:
  virtual ~TrainTarget() = default;
  virtual std::vector<TensorInfo> inputs() const = 0;
  virtual std::vector<TensorInfo> parameters() const = 0;
  virtual void set_input(const std::string& name, const DataTensor& value) = 0;
  // Queues forward, backward and the fused update (with gradient accumulation k, only every k-th call
  // updates; the others add their gradients up) with the inputs and learning rate set so far; returns the
  // step's id. A synchronous target runs the step here.
  virtual uint64_t submit_step() = 0;
  // The loss of a submitted step, once it finished. The Trainer asks for every id once, in submission order,
  // and never lets more than steps_in_flight() steps wait for it.
  virtual double step_loss(uint64_t id) = 0;
  virtual int steps_in_flight() const { return 1; }
  virtual OptimizerConfig fused_optimizer() const = 0;  // the update rule inside run_step
  virtual void set_learning_rate(double lr) = 0;
  virtual std::vector<float> read_parameter(const std::string& name) = 0;
  virtual void set_parameter(const std::string& name, std::span<const float> values) = 0;
  // The fused optimizer's moment buffers (empty for plain SGD) and update count. set_optimizer_step also
  // drops a partly accumulated update.
  virtual std::vector<TensorInfo> optimizer_state() const = 0;
  virtual std::vector<float> read_optimizer_state(const std::string& name) = 0;
  virtual void set_optimizer_state(const std::string& name, std::span<const float> values) = 0;
  virtual uint64_t optimizer_step() const = 0;
  virtual void set_optimizer_step(uint64_t step) = 0;
  virtual std::string device_name() const { return "host"; }
  // Data-parallel training (docs/distributed.md): the job this target averages its gradients over (a job of
  // one by default), and rank 0's parameters copied to every rank (a collective).
  virtual dist::DistributedConfig distributed() const { return {}; }
  virtual void broadcast_parameters() {}
};

}  // namespace meganeura
