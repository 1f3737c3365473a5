// evaluate() over a Session lives apart from the metrics so that device-free code links without a Session.
#include "meganeura/core/error.hpp"
#include "meganeura/train/evaluate.hpp"

namespace meganeura {
namespace {

// A short batch padded with zero rows up to the session's fixed batch size.
DataTensor pad_rows(const DataTensor& t, int64_t rows) {
  DataTensor p = t;
  if (p.shape.empty() || p.shape[0] >= rows) return p;
  const int64_t per = p.shape[0] > 0 ? p.count() / p.shape[0] : 0;
  p.shape[0] = rows;
  if (p.dtype == DType::I32)
    p.i32.resize(static_cast<size_t>(rows * per), 0);
  else
    p.f32.resize(static_cast<size_t>(rows * per), 0.0f);
  return p;
}

}  // namespace

EvalResult evaluate(Session& inference, DataLoader& test, const EvalOptions& options) {
  const Graph& g = inference.graph();
  if (g.outputs().empty())
    throw SessionError("[evaluate] expected a session with a logits output, got no outputs");
  NodeId logits_id = g.outputs()[0];
  if (!options.logits_output.empty()) {
    auto found = g.find(options.logits_output);
    if (!found)
      throw SessionError("[evaluate] expected an output named '" + options.logits_output + "', got none");
    logits_id = *found;
  }
  const Shape logits_shape = g.node(logits_id).shape;
  if (logits_shape.size() != 2)
    throw SessionError("[evaluate] expected logits of shape [batch, classes], got rank " +
                       std::to_string(logits_shape.size()));
  const int64_t batch = logits_shape[0], classes = logits_shape[1];
  if (test.batch_size() != batch)
    throw SessionError("[evaluate] expected a loader with batch size " + std::to_string(batch) +
                       " (the session's), got " + std::to_string(test.batch_size()));
  ClassificationMetrics metrics;
  test.start_epoch(0);
  while (auto b = test.next()) {
    for (NodeId in : g.inputs()) {
      const std::string& name = g.node(in).prov.name;
      const DataTensor t = pad_rows(b->at(name), batch);
      if (t.dtype == DType::I32)
        inference.set_input(name, std::span<const int32_t>(t.i32));
      else
        inference.set_input(name, std::span<const float>(t.f32));
    }
    inference.run();
    const std::vector<float> logits = options.logits_output.empty()
                                          ? inference.read_output(0)
                                          : inference.read_output(options.logits_output);
    metrics.add(logits, classes, b->at(options.labels), b->rows);
  }
  return metrics.result();
}

}  // namespace meganeura
