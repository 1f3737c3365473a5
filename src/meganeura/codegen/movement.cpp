// Copy / transpose / gather / scatter: one thread per output element; the core value is a load from a
// computed source index, then the epilogue.
#include <algorithm>
#include <cmath>

#include "meganeura/codegen/emit.hpp"
#include "meganeura/ops/dropout_hash.hpp"

namespace meganeura::codegen {

namespace {

int64_t norm_axis(int64_t a, size_t rank) { return a < 0 ? a + int64_t(rank) : a; }

std::string coords(const Shape& s) {
  std::string r = "  uint rest = ix;\n";
  for (size_t d = s.size(); d-- > 0;)
    r += "  uint c" + std::to_string(d) + " = rest % " + uint_lit(s[d]) + "; rest /= " + uint_lit(s[d]) +
         ";\n";
  return r;
}

// Python slice semantics for the first index.
int64_t slice_start(int64_t start, int64_t step, int64_t dim) {
  if (start < 0) start += dim;
  if (step > 0) return std::clamp<int64_t>(start, 0, dim);
  return std::clamp<int64_t>(start, -1, dim - 1);
}

}  // namespace

bool scatter_atomic(const Emitter& e) {
  return e.k.arch == Archetype::Scatter && e.caps.shader_float_atomic_add && !e.opt.deterministic_scatter;
}

// Eight elements a thread, at a stride of the grid's threads (each store a contiguous run across the
// workgroup): one a thread, the H100 cleared SmolLM2's 49152 x 576 embedding gradient in 0.27 ms, 442 368
// workgroups at 420 GB/s.
void emit_clear(Emitter& e) {
  constexpr int64_t kPerThread = 8;
  const int64_t n = numel(e.g.node(e.k.root).shape);
  e.out.label = "clear " + e.k.label;
  e.out.spec_constants = {e.wg()};
  e.out.grid = element_grid((n + kPerThread - 1) / kPerThread, e.wg(), e.caps);
  const int64_t threads = int64_t(e.out.grid[0]) * e.out.grid[1] * e.wg();
  std::string body = "  uint i = " + flat_invocation() + ";\n  [[unroll]] for (uint r = 0u; r < " +
                     uint_lit(kPerThread) + "; ++r) {\n    uint j = i + r * " + uint_lit(threads) +
                     ";\n    if (j < " + uint_lit(n) + ") " + e.store(e.k.root, "j", "0.0") + "\n  }\n";
  e.extensions += "#extension GL_EXT_control_flow_attributes : require\n";
  e.finish("layout(local_size_x_id = 0) in;\n", body);
}

namespace {

// Scatter-add with float atomics: one thread per value element adds it into its row of the (cleared) root.
// The order of the additions is the device's, so the result may differ in the last bits between runs.
void emit_scatter_atomic(Emitter& e) {
  const Node& c = e.g.node(e.k.core);
  int64_t n = numel(e.g.node(c.inputs[1]).shape), D = c.shape.at(1), rows = c.shape.at(0);
  e.extensions += "#extension GL_EXT_shader_atomic_float : require\n";
  uint32_t out = e.bind_value(e.k.root, true);
  std::string body = "  uint i = " + flat_invocation() + ";\n  if (i >= " + uint_lit(n) + ") return;\n";
  body += "  int row = int(" + e.load(c.inputs[0], "i / " + uint_lit(D)) + ");\n";
  // an index outside the table adds nothing (the reference rejects it as a DataError)
  body += "  if (row < 0 || row >= " + std::to_string(rows) + ") return;\n";
  body += "  atomicAdd(b" + std::to_string(out) + ".d[uint(row) * " + uint_lit(D) + " + i % " + uint_lit(D) +
          "], " + e.load(c.inputs[1], "i") + ");\n";
  e.out.spec_constants = {e.wg()};
  e.out.grid = element_grid(n, e.wg(), e.caps);
  e.finish("layout(local_size_x_id = 0) in;\n", body);
}

// Deterministic scatter-add: a workgroup per output row scans the indices a workgroup-wide chunk at a time;
// a chunk holding the row's index (rare) is walked in order and its value rows are added, each thread
// owning some columns. Additions happen in ascending index order, as in the CPU reference; the cost is
// rows * n comparisons plus the matched rows, not rows * D * n.
void emit_scatter_rows(Emitter& e) {
  const Node& c = e.g.node(e.k.core);
  int64_t n = numel(e.g.node(c.inputs[0]).shape), D = c.shape.at(1), rows = c.shape.at(0);
  uint32_t out = e.bind_value(e.k.root, true);
  std::string o = "b" + std::to_string(out) + ".d[r * " + uint_lit(D) + " + d]";
  e.decls += "shared uint hit[gl_WorkGroupSize.x];\nshared uint hits;\n";
  std::string b =
      "  uint r = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x, t = gl_LocalInvocationID.x;\n";
  b += "  if (r >= " + uint_lit(rows) + ") return;\n";  // uniform in the workgroup
  b += "  for (uint d = t; d < " + uint_lit(D) + "; d += gl_WorkGroupSize.x) " + o + " = 0.0;\n";
  b += "  for (uint base = 0u; base < " + uint_lit(n) + "; base += gl_WorkGroupSize.x) {\n";
  b += "    if (t == 0u) hits = 0u;\n    barrier();\n";
  b += "    uint i = base + t;\n";
  b += "    hit[t] = i < " + uint_lit(n) + " && int(" +
       e.load(c.inputs[0], "min(i, " + uint_lit(n - 1) + ")") + ") == int(r) ? 1u : 0u;\n";
  b += "    if (hit[t] != 0u) atomicAdd(hits, 1u);\n    barrier();\n";
  b += "    if (hits != 0u)\n      for (uint j = 0u; j < gl_WorkGroupSize.x; ++j)\n        if (hit[j] != "
       "0u)\n";
  b += "          for (uint d = t; d < " + uint_lit(D) + "; d += gl_WorkGroupSize.x) " + o +
       " += " + e.load(c.inputs[1], "(base + j) * " + uint_lit(D) + " + d") + ";\n";
  b += "    barrier();\n  }\n";
  e.out.spec_constants = {e.wg()};
  e.out.grid = element_grid(rows, 1, e.caps);
  e.finish("layout(local_size_x_id = 0) in;\n", b);
}

// WriteSlice: one thread per element of the value, stored into the state's storage (the root's) at its row
// shifted by start; rows that would land outside the state are dropped. Sibling writes (schedule.cpp: same
// start, same value shape, another state) store their element at the same offset of their own state.
void emit_write_slice(Emitter& e) {
  const Node& c = e.g.node(e.k.core);
  const Shape& ss = c.shape;
  const Shape& vs = e.g.node(c.inputs[1]).shape;
  const size_t ax = size_t(norm_axis(c.attrs.axes.at(0), ss.size()));
  const std::vector<int64_t> st = contiguous_strides(ss);
  const int64_t n = numel(vs);
  const std::string start = e.load(c.inputs[2], e.g.node(c.inputs[2]).shape.empty() ? "0u" : "c0");
  std::string body =
      "  uint ix = " + flat_invocation() + ";\n  if (ix >= " + uint_lit(n) + ") return;\n" + coords(vs);
  body += "  int at = int(c" + std::to_string(ax) + ") + int(" + start + ");\n";
  body += "  if (at < 0 || at >= " + std::to_string(ss[ax]) + ") return;\n";
  std::string off;
  for (size_t d = 0; d < ss.size(); ++d)
    off += (d ? " + " : "") + (d == ax ? std::string("uint(at)") : "c" + std::to_string(d)) + " * " +
           uint_lit(st[d]);
  body += "  uint o = " + off + ";\n";
  std::vector<NodeId> writes{e.k.core};
  writes.insert(writes.end(), e.k.siblings.begin(), e.k.siblings.end());
  // A Rope producing a value may be fused into this kernel (schedule.cpp: the decode step's rotated keys go
  // straight into the cache): e.load computes its element here.
  define_moved(e);
  for (size_t w = 0; w < writes.size(); ++w) {
    const std::string value = e.load(e.g.node(writes[w]).inputs[1], "ix");
    body += "  " + e.store(writes[w], "o", value) + "\n";
  }
  e.out.spec_constants = {e.wg()};
  e.out.grid = element_grid(n, e.wg(), e.caps);
  e.finish("layout(local_size_x_id = 0) in;\n", body);
}

}  // namespace

// The body of a `float f(uint ix)` returning element ix of a Rope node (the function's coordinates c0.. of
// the node's shape already declared). Rotate-half pairs (x[i], x[i + D/2]) by angle (offset + s) *
// theta^(-2i/D); the inverse rotation (the VJP) negates the sine. The angle is reduced exactly: each
// frequency in turns, f / 2pi, is a 64-bit binary fraction computed in double on the host, and position *
// fraction mod 1 is integer arithmetic. A float angle loses ~pos * 6e-8 rad before any sine is taken, and
// GPUs' fast sin/cos are only accurate near [-pi, pi]; the reduced angle is in [-pi, pi). `turns` names the
// frequency table it declares.
std::string rope_body(Emitter& e, NodeId rope, const std::string& turns_name) {
  const Node& c = e.g.node(rope);
  const Shape& os = c.shape;
  const size_t rank = os.size();
  int64_t D = os.at(rank - 1), half = D / 2;
  const double theta = c.attrs.reals.at(0);
  std::string turns, f;
  for (int64_t i = 0; i < half; ++i) {
    const double t = std::pow(theta, -2.0 * double(i) / double(D)) / (2.0 * 3.14159265358979323846);
    const double hi = std::floor(std::ldexp(t, 32));  // t <= 1 / 2pi: no whole turns
    const double lo = std::floor(std::ldexp(std::ldexp(t, 32) - hi, 32));
    turns +=
        std::string(i ? ", " : "") + "uvec2(" + uint_lit(int64_t(hi)) + ", " + uint_lit(int64_t(lo)) + ")";
  }
  e.decls += "const uvec2 " + turns_name + "[" + std::to_string(half) + "] = uvec2[](" + turns + ");\n";
  std::string H = uint_lit(half);
  f += "  uint i = c" + std::to_string(rank - 1) + ", base = ix - i, j = i % " + H + ";\n";
  f += "  int pos = int(c" + std::to_string(rank - 2) + ") + (" + std::to_string(c.attrs.ints.at(0)) + ")";
  if (c.inputs.size() == 2)  // the step's start: one value, or one per index of the first axis
    f += " + int(" + e.load(c.inputs[1], e.g.node(c.inputs[1]).shape.empty() ? "0u" : "c0") + ")";
  f += ";\n";
  f += "  uint p = uint(abs(pos)), lo_hi, lo_lo;\n";
  f += "  umulExtended(p, " + turns_name + "[j].y, lo_hi, lo_lo);\n";
  f += "  uint frac = p * " + turns_name + "[j].x + lo_hi;  // |pos| * f / 2pi mod 1, in units of 2^-32\n";
  f += "  float ang = (float(int(frac)) + float(lo_lo) * 2.3283064365386963e-10) * 1.4629180792671596e-09;\n";
  f += "  if (pos < 0) ang = -ang;\n";
  f += "  float co = cos(ang), si = " + std::string(c.attrs.flag_a ? "-" : "") + "sin(ang);\n";
  f += "  float a = " + e.load(c.inputs[0], "base + j") + ", b = " + e.load(c.inputs[0], "base + j + " + H) +
       ";\n";
  f += "  return i < " + H + " ? a * co - b * si : b * co + a * si;\n";
  return f;
}

namespace {

// `float name(uint ix)`: element ix of movement node `node`, read from its inputs through Emitter::load
// (which calls the functions of inputs computed in this kernel too).
std::string movement_function(Emitter& e, NodeId node, const std::string& name) {
  const Node& c = e.g.node(node);
  const Shape& os = c.shape;
  size_t rank = os.size();
  std::string f = "float " + name + "(uint ix) {\n";
  if (!(c.op == Op::Gather || c.op == Op::Dropout || c.op == Op::Reshape)) f += coords(os);
  switch (c.op) {
    case Op::Reshape: f += "  return " + e.load(c.inputs[0], "ix") + ";\n"; break;  // the same flat order
    case Op::Permute: {
      const Shape& is = e.g.node(c.inputs[0]).shape;
      std::vector<int64_t> st = contiguous_strides(is);
      std::string off = "0u";
      for (size_t i = 0; i < rank; ++i)
        off += " + c" + std::to_string(i) + " * " + uint_lit(st[size_t(norm_axis(c.attrs.axes.at(i), rank))]);
      f += "  return " + e.load(c.inputs[0], off) + ";\n";
      break;
    }
    case Op::BroadcastTo: {
      const Shape& is = e.g.node(c.inputs[0]).shape;
      std::vector<int64_t> st = contiguous_strides(is);
      std::string off = "0u";
      size_t shift = rank - is.size();
      for (size_t d = 0; d < is.size(); ++d)
        if (is[d] != 1) off += " + c" + std::to_string(d + shift) + " * " + uint_lit(st[d]);
      f += "  return " + e.load(c.inputs[0], off) + ";\n";
      break;
    }
    case Op::Slice: {
      const Shape& is = e.g.node(c.inputs[0]).shape;
      std::vector<int64_t> st = contiguous_strides(is);
      size_t ax = size_t(norm_axis(c.attrs.axes.at(0), rank));
      int64_t step = c.attrs.ints.at(2);
      int64_t start = slice_start(c.attrs.ints.at(0), step, is[ax]);
      std::string off = "0";
      for (size_t d = 0; d < rank; ++d) {
        std::string cd = "int(c" + std::to_string(d) + ")";
        if (d == ax) cd = "(" + std::to_string(start) + " + " + cd + " * " + std::to_string(step) + ")";
        off += " + " + cd + " * " + std::to_string(st[d]);
      }
      f += "  return " + e.load(c.inputs[0], "uint(" + off + ")") + ";\n";
      break;
    }
    case Op::Pad: {
      const Shape& is = e.g.node(c.inputs[0]).shape;
      std::vector<int64_t> st = contiguous_strides(is);
      std::string off = "0", inside = "true";
      for (size_t d = 0; d < rank; ++d) {
        std::string cd = "(int(c" + std::to_string(d) + ") - " + std::to_string(c.attrs.ints.at(d)) + ")";
        inside += " && " + cd + " >= 0 && " + cd + " < " + std::to_string(is[d]);
        off += " + " + cd + " * " + std::to_string(st[d]);
      }
      f += "  if (!(" + inside + ")) return " + float_lit(c.attrs.reals.at(0)) + ";\n";
      f += "  return " + e.load(c.inputs[0], "uint(" + off + ")") + ";\n";
      break;
    }
    case Op::Concat: {
      size_t ax = size_t(norm_axis(c.attrs.axes.at(0), rank));
      int64_t begin = 0;
      for (NodeId in : c.inputs) {
        const Shape& is = e.g.node(in).shape;
        std::vector<int64_t> st = contiguous_strides(is);
        std::string off = "0u";
        for (size_t d = 0; d < rank; ++d) {
          std::string cd =
              d == ax ? "(c" + std::to_string(d) + " - " + uint_lit(begin) + ")" : "c" + std::to_string(d);
          off += " + " + cd + " * " + uint_lit(st[d]);
        }
        begin += is[ax];
        f += "  if (c" + std::to_string(ax) + " < " + uint_lit(begin) + ") return " + e.load(in, off) + ";\n";
      }
      f += "  return 0.0;\n";
      break;
    }
    case Op::Rope: f += rope_body(e, node, name + "_turns"); break;
    case Op::Dropout: {
      // the mask of ops/dropout_hash.hpp, bit for bit; keys and threshold are literals of this kernel
      const double p = c.attrs.reals.at(0);
      ops::DropoutKeys k = ops::dropout_keys(c.attrs.seed);
      e.decls += ops::dropout_glsl();
      f += "  if (!mn_dropout_keep(" + uint_lit(k.k1) + ", " + uint_lit(k.k2) + ", ix, " +
           uint_lit(ops::dropout_threshold(p)) + ")) return 0.0;\n";
      f += "  return " + e.load(c.inputs[0], "ix") + " * " + float_lit(1.0 / (1.0 - p)) + ";\n";
      break;
    }
    case Op::Gather: {
      const Shape& ts = e.g.node(c.inputs[0]).shape;
      int64_t V = ts.at(0), D = numel(ts) / std::max<int64_t>(1, V);
      f += "  uint i = ix / " + uint_lit(D) + ", d = ix % " + uint_lit(D) + ";\n";
      f += "  int row = int(" + e.load(c.inputs[1], "i") + ");\n";
      // An index outside the table reads zero rather than out of bounds.
      f += "  if (row < 0 || row >= " + std::to_string(V) + ") return 0.0;\n";
      f += "  return " + e.load(c.inputs[0], "uint(row) * " + uint_lit(D) + " + d") + ";\n";
      break;
    }
    case Op::MaxPool2d:
    case Op::MaxPool2dGrad:
    case Op::AvgPool2d:
    case Op::AvgPool2dGrad:
    case Op::UpsampleNearest: f += window_core(e, c); break;
    default:
      throw GraphError("[codegen] expected a movement op, got " + std::string(op_name(c.op)) + " at node '" +
                       node_label(e.g, node) + "'");
  }
  return f + "}\n";
}

}  // namespace

void define_moved(Emitter& e) {
  // Ascending ids: each function follows those of its inputs.
  for (NodeId m : e.k.prologue) {
    if (e.moved.count(m)) continue;
    const std::string fn = "mn_move" + std::to_string(m.v);
    const std::string f = movement_function(e, m, fn);  // may declare helpers (RoPE tables) first
    e.decls += f;
    e.moved[m] = fn;
  }
}

void emit_movement(Emitter& e) {
  if (e.k.arch == Archetype::Scatter)
    return scatter_atomic(e) ? emit_scatter_atomic(e) : emit_scatter_rows(e);
  if (e.g.node(e.k.core).op == Op::WriteSlice) return emit_write_slice(e);
  define_moved(e);  // movement producers fused into this copy
  const std::string core = movement_function(e, e.k.core, "core_at");
  e.decls += core;
  int64_t n = numel(e.g.node(e.k.core).shape);
  std::string epi = e.region_fn(e.k.root, e.k.epilogue, e.g.node(e.k.root).shape, e.k.core);
  std::string body = "  uint i = " + flat_invocation() + ";\n  if (i >= " + uint_lit(n) + ") return;\n  " +
                     e.store(e.k.root, "i", epi + "(i, core_at(i))") + "\n";
  e.out.spec_constants = {e.wg()};
  e.out.grid = element_grid(n, e.wg(), e.caps);
  e.finish("layout(local_size_x_id = 0) in;\n", body);
}

}  // namespace meganeura::codegen
