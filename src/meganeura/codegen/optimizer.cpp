// The parameter update, one thread per element, reading the learning rate and step count from the
// hyper-parameter block so that changing them needs no re-recording.
#include "meganeura/codegen/emit.hpp"

namespace meganeura::codegen {

void emit_optimizer(Emitter& e) {
  const OptimizerConfig& o = e.opt.optimizer;
  NodeId p = e.k.root;
  int64_t n = numel(e.g.node(p).shape);
  uint32_t bp = e.bind_value(p, true);
  uint32_t bg = e.bind_value(e.k.grad, false);
  uint32_t bh = e.bind_hyper();
  std::string P = "b" + std::to_string(bp) + ".d[i]";
  std::string G = "b" + std::to_string(bg) + ".d[i]";
  std::string b = "  uint i = " + flat_invocation() + ";\n  if (i >= " + uint_lit(n) + ") return;\n";
  b += "  float lr = hyper.lr;\n  float t = float(hyper.step + 1u);\n  float p = " + P + ";\n  float g = " + G + ";\n";
  (void)bh;
  std::string wd = float_lit(o.weight_decay);
  switch (o.kind) {
    case OptimizerKind::Sgd: {
      if (o.weight_decay != 0.0) b += "  g += " + wd + " * p;\n";
      if (o.momentum != 0.0) {
        std::string V = "b" + std::to_string(e.bind_moment(p, 0)) + ".d[i]";
        std::string mu = float_lit(o.momentum);
        b += "  float v = " + mu + " * " + V + " + g;\n  " + V + " = v;\n";
        b += o.nesterov ? "  g = g + " + mu + " * v;\n" : "  g = v;\n";
      }
      b += "  " + P + " = p - lr * g;\n";
      break;
    }
    case OptimizerKind::Adam:
    case OptimizerKind::AdamW: {
      std::string M = "b" + std::to_string(e.bind_moment(p, 0)) + ".d[i]";
      std::string V = "b" + std::to_string(e.bind_moment(p, 1)) + ".d[i]";
      std::string b1 = float_lit(o.beta1), b2 = float_lit(o.beta2);
      if (o.kind == OptimizerKind::Adam && o.weight_decay != 0.0) b += "  g += " + wd + " * p;\n";
      if (o.kind == OptimizerKind::AdamW && o.weight_decay != 0.0) b += "  p *= 1.0 - lr * " + wd + ";\n";
      b += "  float m = " + b1 + " * " + M + " + (1.0 - " + b1 + ") * g;\n";
      b += "  float v = " + b2 + " * " + V + " + (1.0 - " + b2 + ") * g * g;\n";
      b += "  " + M + " = m;\n  " + V + " = v;\n";
      b += "  float mh = m / (1.0 - pow(" + b1 + ", t));\n  float vh = v / (1.0 - pow(" + b2 + ", t));\n";
      b += "  " + P + " = p - lr * mh / (sqrt(vh) + " + float_lit(o.eps) + ");\n";
      break;
    }
    case OptimizerKind::LaProp: {
      // Momentum of the gradient normalised by the bias-corrected second moment (Ziyin et al., 2020).
      std::string M = "b" + std::to_string(e.bind_moment(p, 0)) + ".d[i]";
      std::string V = "b" + std::to_string(e.bind_moment(p, 1)) + ".d[i]";
      std::string b1 = float_lit(o.beta1), b2 = float_lit(o.beta2);
      if (o.weight_decay != 0.0) b += "  p *= 1.0 - lr * " + wd + ";\n";
      b += "  float v = " + b2 + " * " + V + " + (1.0 - " + b2 + ") * g * g;\n";
      b += "  float vh = v / (1.0 - pow(" + b2 + ", t));\n";
      b += "  float m = " + b1 + " * " + M + " + (1.0 - " + b1 + ") * g / (sqrt(vh) + " + float_lit(o.eps) + ");\n";
      b += "  " + M + " = m;\n  " + V + " = v;\n";
      b += "  " + P + " = p - lr * m / (1.0 - pow(" + b1 + ", t));\n";
      break;
    }
    case OptimizerKind::None:
      throw SessionError("[codegen] expected an optimizer for an update kernel, got OptimizerKind::None");
  }
  e.out.spec_constants = {e.opt.workgroup};
  e.out.grid = element_grid(n, e.opt.workgroup, e.caps);
  e.finish("layout(local_size_x_id = 0) in;\n", b);
}

void emit_counter(Emitter& e) {
  e.bind_hyper();
  e.out.grid = {1, 1, 1};
  e.finish("layout(local_size_x = 1) in;\n", "  hyper.step += 1u;\n");
}

uint32_t moments_for(const OptimizerConfig& o) {
  switch (o.kind) {
    case OptimizerKind::Sgd: return o.momentum != 0.0 ? 1 : 0;
    case OptimizerKind::Adam: case OptimizerKind::AdamW: case OptimizerKind::LaProp: return 2;
    case OptimizerKind::None: return 0;
  }
  return 0;
}

}  // namespace meganeura::codegen
