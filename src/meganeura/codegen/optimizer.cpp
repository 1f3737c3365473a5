// The parameter update and what feeds it, one thread per element, reading the learning rate, step count
// and clipping factor from the hyper-parameter block so that changing them needs no re-recording:
//   Accumulate  acc += grad                        (the accumulate-only list, gradient accumulation)
//   GradNorm    partial[w] = Σ g² over a chunk     (clipping; g is the mean accumulated gradient)
//   ClipScale   clip_scale = min(1, c / (√Σ partial + 1e-6))
//   Optimizer   p ← update(p, g · clip_scale); acc ← 0
#include <algorithm>

#include "meganeura/codegen/emit.hpp"

namespace meganeura::codegen {

namespace {

bool accumulates(const OptimizerConfig& o) { return o.grad_accumulation > 1; }

// The gradient an update uses at element `j` of parameter `p`: the mean over the accumulated micro-batches
// (the accumulator plus this step's gradient), or this step's gradient.
std::string effective_gradient(Emitter& e, NodeId p, NodeId grad, const std::string& j) {
  const OptimizerConfig& o = e.opt.optimizer;
  std::string g = "b" + std::to_string(e.bind_value(grad, false)) + ".d[" + j + "]";
  if (!accumulates(o)) return g;
  std::string a = "b" + std::to_string(e.bind_accumulator(p, false)) + ".d[" + j + "]";
  return "((" + a + " + " + g + ") * " + float_lit(1.0 / o.grad_accumulation) + ")";
}

int64_t total_elements(const Graph& g, const std::vector<std::pair<NodeId, NodeId>>& param_grads) {
  int64_t n = 0;
  for (auto [p, gr] : param_grads) n += numel(g.node(p).shape);
  return n;
}

// The bias correction 1 - beta^t of this step from the previous one: 1 - b^t = (1 - b) + b (1 - b^(t-1)),
// with 1 - b rounded once on the host. Every term is positive, so unlike 1 - pow(b, t) in float (for b =
// 0.999, a relative error near 1e-4 at t = 1) it stays accurate to a few ulp. The step's Counter kernel,
// first in the step, stores it in hyper.c1 / c2; the updates read it there.
std::string next_correction(double beta, int which) {
  return "(" + float_lit(1.0 - beta) + " + " + float_lit(beta) + " * hyper.c" + std::to_string(which) + ")";
}
std::string correction(int which) { return "hyper.c" + std::to_string(which); }

}  // namespace

uint32_t grad_norm_groups(int64_t elements, uint32_t workgroup) {
  // Enough groups to fill a large GPU, few enough that one workgroup sums the partials quickly.
  const int64_t per_group = int64_t(workgroup) * 16;
  return uint32_t(std::clamp<int64_t>((elements + per_group - 1) / per_group, 1, 1024));
}

namespace {

// Statements updating one element of parameter `p`: `lr`, `p` (its value) and `g` (its gradient) are defined;
// `P` is the element's lvalue, `i` its index. The moments are read from their buffers, or from `state.m` and
// `state.v` when `state` names an mn_state loaded beforehand (fused_update_fn). Every value is `precise`
// (SPIR-V NoContraction): an update fused into a gradient's kernel must give the bits the update kernel
// gives, and a driver may contract a·b + c into one fma in one kernel and not in the other (NVIDIA's did for
// g + wd·p: TrainingGpu.FusedUpdatesMatchTheUnfusedStepBitForBit on the H100, twelfth session).
std::string update_statements(Emitter& e, NodeId param, const std::string& P, const std::string& state = "") {
  const OptimizerConfig& o = e.opt.optimizer;
  std::string b;
  const auto moment = [&](uint32_t m, std::string& read) {
    const std::string lvalue = "b" + std::to_string(e.bind_moment(param, m)) + ".d[i]";
    read = state.empty() ? lvalue : state + (m == 0 ? ".m" : ".v");
    return lvalue;
  };
  std::string wd = float_lit(o.weight_decay);
  switch (o.kind) {
    case OptimizerKind::Sgd: {
      if (o.weight_decay != 0.0) b += "  g += " + wd + " * p;\n";
      if (o.momentum != 0.0) {
        std::string Vr;
        const std::string V = moment(0, Vr);
        std::string mu = float_lit(o.momentum);
        b += "  precise float v = " + mu + " * " + Vr + " + g;\n  " + V + " = v;\n";
        b += o.nesterov ? "  g = g + " + mu + " * v;\n" : "  g = v;\n";
      }
      b += "  precise float np = p - lr * g;\n  " + P + " = np;\n";
      break;
    }
    case OptimizerKind::Adam:
    case OptimizerKind::AdamW: {
      std::string Mr, Vr;
      const std::string M = moment(0, Mr), V = moment(1, Vr);
      std::string b1 = float_lit(o.beta1), b2 = float_lit(o.beta2);
      if (o.kind == OptimizerKind::Adam && o.weight_decay != 0.0) b += "  g += " + wd + " * p;\n";
      if (o.kind == OptimizerKind::AdamW && o.weight_decay != 0.0) b += "  p *= 1.0 - lr * " + wd + ";\n";
      b += "  precise float m = " + b1 + " * " + Mr + " + (1.0 - " + b1 + ") * g;\n";
      b += "  precise float v = " + b2 + " * " + Vr + " + (1.0 - " + b2 + ") * g * g;\n";
      b += "  " + M + " = m;\n  " + V + " = v;\n";
      b += "  precise float mh = m / " + correction(1) + ";\n  precise float vh = v / " + correction(2) +
           ";\n";
      b += "  precise float np = p - lr * mh / (sqrt(vh) + " + float_lit(o.eps) + ");\n  " + P + " = np;\n";
      break;
    }
    case OptimizerKind::LaProp: {
      // Momentum of the gradient normalised by the bias-corrected second moment (Ziyin et al., 2020).
      std::string Mr, Vr;
      const std::string M = moment(0, Mr), V = moment(1, Vr);
      std::string b1 = float_lit(o.beta1), b2 = float_lit(o.beta2);
      if (o.weight_decay != 0.0) b += "  p *= 1.0 - lr * " + wd + ";\n";
      b += "  precise float v = " + b2 + " * " + Vr + " + (1.0 - " + b2 + ") * g * g;\n";
      b += "  precise float vh = v / " + correction(2) + ";\n";
      b += "  precise float m = " + b1 + " * " + Mr + " + (1.0 - " + b1 + ") * g / (sqrt(vh) + " +
           float_lit(o.eps) + ");\n";
      b += "  " + M + " = m;\n  " + V + " = v;\n";
      b += "  precise float np = p - lr * m / " + correction(1) + ";\n  " + P + " = np;\n";
      break;
    }
    case OptimizerKind::None:
      throw SessionError("[codegen] expected an optimizer for an update kernel, got OptimizerKind::None");
  }
  return b;
}

}  // namespace

void emit_optimizer(Emitter& e) {
  const OptimizerConfig& o = e.opt.optimizer;
  NodeId p = e.k.root;
  int64_t n = numel(e.g.node(p).shape);
  uint32_t bp = e.bind_value(p, true);
  e.bind_hyper();
  std::string P = "b" + std::to_string(bp) + ".d[i]";
  std::string b = "  uint i = " + flat_invocation() + ";\n  if (i >= " + uint_lit(n) + ") return;\n";
  b += "  float lr = hyper.lr;\n  precise float p = " + P + ";\n";
  b += "  precise float g = " + effective_gradient(e, p, e.k.grad, "i") + ";\n";
  if (accumulates(o)) b += "  b" + std::to_string(e.bind_accumulator(p, true)) + ".d[i] = 0.0;\n";
  if (o.clip_grad_norm > 0) b += "  g *= hyper.clip_scale;\n";
  b += update_statements(e, p, P);
  e.out.spec_constants = {e.wg()};
  e.out.grid = element_grid(n, e.wg(), e.caps);
  e.finish("layout(local_size_x_id = 0) in;\n", b);
}

std::string fused_update_fn(Emitter& e, const std::string& param_at_i) {
  const uint32_t moments = moments_for(e.opt.optimizer);
  const auto moment = [&](uint32_t m) {
    return m < moments ? "b" + std::to_string(e.bind_moment(e.k.update, m)) + ".d[i]" : std::string("0.0");
  };
  e.bind_hyper();
  // The element's state is loaded apart from the update, so that a tile's epilogue can issue the loads of
  // several elements before any store (MN_UPDATE_PRELOAD, kernels/matmul): the compiler may not move a load
  // of the next element above this one's stores, which it must assume alias, and one memory round trip an
  // element made the fused weight-gradient products latency-bound (docs/performance.md, tenth session).
  std::string b = "#define MN_UPDATE_PRELOAD 1\nstruct mn_state { float p; float m; float v; };\n";
  b += "mn_state mn_update_load(uint i) {\n  mn_state s;\n  s.p = " + param_at_i + ";\n";
  b += "  s.m = " + moment(0) + ";\n  s.v = " + moment(1) + ";\n  return s;\n}\n";
  b += "void mn_update_with(uint i, float gradient, mn_state s) {\n  float lr = hyper.lr;\n  precise float g "
       "= "
       "gradient;\n  precise float p = s.p;\n";
  b += update_statements(e, e.k.update, param_at_i, "s") + "}\n";
  return b + "void mn_update(uint i, float g) { mn_update_with(i, g, mn_update_load(i)); }\n";
}

void emit_accumulate(Emitter& e) {
  NodeId p = e.k.root;
  int64_t n = numel(e.g.node(p).shape);
  std::string A = "b" + std::to_string(e.bind_accumulator(p, true)) + ".d[i]";
  std::string G = "b" + std::to_string(e.bind_value(e.k.grad, false)) + ".d[i]";
  std::string b = "  uint i = " + flat_invocation() + ";\n  if (i >= " + uint_lit(n) + ") return;\n";
  b += "  " + A + " += " + G + ";\n";
  e.out.spec_constants = {e.wg()};
  e.out.grid = element_grid(n, e.wg(), e.caps);
  e.finish("layout(local_size_x_id = 0) in;\n", b);
}

// Every gradient laid end to end; workgroup w sums the squares of chunk w (a fixed partition and a fixed
// tree, so the norm is reproducible). Each parameter's loop runs only where it meets the chunk.
void emit_grad_norm(Emitter& e) {
  const int64_t total = total_elements(e.g, e.k.param_grads);
  const uint32_t groups = grad_norm_groups(total, e.opt.workgroup);
  const int64_t wg = e.opt.workgroup;
  const int64_t chunk = ((total + groups - 1) / groups + wg - 1) / wg * wg;
  std::string b =
      "  uint lo = gl_WorkGroupID.x * " + uint_lit(chunk) + ", hi = lo + " + uint_lit(chunk) + ";\n";
  b += "  float s = 0.0;\n";
  int64_t off = 0;
  for (auto [p, gr] : e.k.param_grads) {
    const int64_t n = numel(e.g.node(p).shape);
    const std::string OFF = uint_lit(off), END = uint_lit(off + n);
    b += "  for (uint i = max(lo, " + OFF + ") + gl_LocalInvocationID.x; i < min(hi, " + END +
         "); i += gl_WorkGroupSize.x) {\n";
    b += "    float g = " + effective_gradient(e, p, gr, "i - " + OFF) + ";\n    s += g * g;\n  }\n";
    off += n;
  }
  b += "  s = wg_sum(s);\n  if (gl_LocalInvocationID.x == 0u) hyper.partial[gl_WorkGroupID.x] = s;\n";
  e.out.bindings[e.bind_hyper(true)].bytes = hyper_bytes(groups);
  e.decls += workgroup_reductions_glsl();
  e.out.spec_constants = {e.opt.workgroup};
  e.out.grid = {groups, 1, 1};
  e.finish("layout(local_size_x_id = 0) in;\n", b);
}

void emit_clip_scale(Emitter& e) {
  int64_t total = 0;
  for (const Kernel& k : e.kg.kernels)
    if (k.arch == Archetype::GradNorm) total = total_elements(e.g, k.param_grads);
  const uint32_t groups = grad_norm_groups(total, e.opt.workgroup);
  std::string b = "  float s = 0.0;\n";
  b += "  for (uint i = gl_LocalInvocationID.x; i < " + uint_lit(groups) +
       "; i += gl_WorkGroupSize.x) s += hyper.partial[i];\n";
  b += "  s = wg_sum(s);\n";
  // As torch.nn.utils.clip_grad_norm_: the factor is clamped to 1, so small gradients pass unchanged.
  b += "  if (gl_LocalInvocationID.x == 0u) hyper.clip_scale = min(1.0, " +
       float_lit(e.opt.optimizer.clip_grad_norm) + " / (sqrt(s) + 1e-6));\n";
  e.out.bindings[e.bind_hyper(true)].bytes = hyper_bytes(groups);
  e.decls += workgroup_reductions_glsl();
  e.out.spec_constants = {e.opt.workgroup};
  e.out.grid = {1, 1, 1};
  e.finish("layout(local_size_x_id = 0) in;\n", b);
}

void emit_counter(Emitter& e) {
  const OptimizerConfig& o = e.opt.optimizer;
  e.bind_hyper(true);
  e.out.grid = {1, 1, 1};
  e.finish("layout(local_size_x = 1) in;\n", "  hyper.c1 = " + next_correction(o.beta1, 1) +
                                                 ";\n  hyper.c2 = " + next_correction(o.beta2, 2) +
                                                 ";\n  hyper.step += 1u;\n");
}

uint32_t moments_for(const OptimizerConfig& o) {
  switch (o.kind) {
    case OptimizerKind::Sgd: return o.momentum != 0.0 ? 1 : 0;
    case OptimizerKind::Adam:
    case OptimizerKind::AdamW:
    case OptimizerKind::LaProp: return 2;
    case OptimizerKind::None: return 0;
  }
  return 0;
}

}  // namespace meganeura::codegen
