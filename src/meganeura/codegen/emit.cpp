// Shared pieces of every generated shader.
#include "meganeura/codegen/emit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "meganeura/ir/storage.hpp"
#include "meganeura/ops/ops.hpp"
#include "meganeura/quant/glsl.hpp"

namespace meganeura::codegen {

std::string uint_lit(int64_t v) { return std::to_string(v) + "u"; }

std::string fill_lit(const Node& fill) { return float_lit(dtype_round(fill.attrs.reals.at(0), fill.dtype)); }

std::string round_to(DType t, const std::string& v) {
  if (t == DType::F16) return "mn_round_f16(" + v + ")";
  if (t == DType::BF16) return "mn_round_bf16(" + v + ")";
  // an i32 value computed in registers is whole, as the interpreter (dtype_round) and an i32 store make it:
  // cast(cast(x, i32), f32) truncates inside a fused kernel too
  if (t == DType::I32) return "trunc(" + v + ")";
  return v;
}

const char* storage_glsl() {
  // 16-bit floats are stored as uint16_t and converted by integer arithmetic (ties to even, subnormals kept),
  // so the result does not depend on a driver's conversion rounding or denormal mode.
  return R"(uint mn_f16_bits(float x) {
  const uint u = floatBitsToUint(x), s = (u >> 16u) & 0x8000u, a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return s | 0x7E00u;
  if (a >= 0x477FF000u) return s | 0x7C00u;
  if (a < 0x38800000u) return s | uint(roundEven(uintBitsToFloat(a) * 16777216.0));
  return s | ((a - 0x38000000u + 0x0FFFu + ((a >> 13u) & 1u)) >> 13u);
}
float mn_f16_value(uint h) {
  const uint s = (h & 0x8000u) << 16u, e = (h >> 10u) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0u) return uintBitsToFloat(s | floatBitsToUint(float(m) * 5.9604644775390625e-08));
  return uintBitsToFloat(s | (e == 31u ? 0x7F800000u : (e + 112u) << 23u) | (m << 13u));
}
uint mn_bf16_bits(float x) {
  const uint u = floatBitsToUint(x);
  if (isnan(x)) return (u >> 16u) | 0x40u;
  return (u + 0x7FFFu + ((u >> 16u) & 1u)) >> 16u;
}
float mn_round_f16(float x) { return mn_f16_value(mn_f16_bits(x)); }
float mn_round_bf16(float x) { return uintBitsToFloat(mn_bf16_bits(x) << 16u); }
)";
}

std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

std::string flat_invocation() {
  return "((gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x + "
         "gl_LocalInvocationID.x)";
}

std::array<uint32_t, 3> element_grid(int64_t elements, uint32_t wg, const runtime::DeviceCaps& caps) {
  int64_t groups = std::max<int64_t>(1, (elements + wg - 1) / wg);
  int64_t max_x = caps.max_workgroup_count[0] ? caps.max_workgroup_count[0] : 65535;
  int64_t gx = std::min(groups, max_x);
  int64_t gy = (groups + gx - 1) / gx;
  return {uint32_t(gx), uint32_t(gy), 1};
}

Emitter::Emitter(const Graph& graph, const KernelGraph& kgraph, const Kernel& kernel,
                 const runtime::DeviceCaps& c, const CodegenOptions& o)
    : g(graph), kg(kgraph), k(kernel), caps(c), opt(o) {
  out.label = k.label;
  out.arch = k.arch;
}

namespace {

// A value's bytes as bound: whole 32-bit words (block-quantized rows are read as words; the plan rounds the
// same).
uint64_t value_bytes(const Node& n) { return (storage_bytes(n.dtype, numel(n.shape)) + 3) / 4 * 4; }

// The index of binding `want` (same kind, storage and moment) from index `from` on, added if new; a write
// widens an earlier read.
uint32_t bind(std::vector<Binding>& bindings, const Binding& want, size_t from = 0) {
  for (size_t i = from; i < bindings.size(); ++i) {
    Binding& b = bindings[i];
    if (b.kind == want.kind && b.node == want.node && b.moment == want.moment) {
      b.write = b.write || want.write;
      return uint32_t(i);
    }
  }
  bindings.push_back(want);
  return uint32_t(bindings.size() - 1);
}

}  // namespace

uint32_t Emitter::bind_value(NodeId n, bool write) {
  NodeId s = kg.storage_of(n);
  const Node& nd = g.node(s);
  return bind(out.bindings, {Binding::Value, s, 0, write, value_bytes(nd)}, dedup_from);
}

uint32_t Emitter::bind_value_unshared(NodeId n, bool write) {
  Binding b;
  b.kind = Binding::Value;
  b.node = kg.storage_of(n);
  b.write = write;
  b.bytes = value_bytes(g.node(b.node));
  out.bindings.push_back(b);
  return uint32_t(out.bindings.size() - 1);
}

uint32_t Emitter::bind_moment(NodeId param, uint32_t m) {
  return bind(out.bindings, {Binding::Moment, param, m, true, uint64_t(numel(g.node(param).shape)) * 4});
}

uint32_t Emitter::bind_accumulator(NodeId param, bool write) {
  return bind(out.bindings,
              {Binding::Accumulator, param, 0, write, uint64_t(numel(g.node(param).shape)) * 4});
}

uint32_t Emitter::bind_hyper(bool write) {
  return bind(out.bindings, {Binding::Hyper, NodeId{}, 0, write, kHyperHead});
}

uint32_t Emitter::bind_scratch(uint64_t bytes, bool write) {
  return bind(out.bindings, {Binding::Scratch, kg.storage_of(k.root), 0, write, bytes});
}

uint32_t Emitter::bind_tickets(uint64_t bytes) {
  return bind(out.bindings, {Binding::Tickets, kg.storage_of(k.root), 0, true, bytes});
}

std::string Emitter::permuted_offset(NodeId n, const std::string& offset) {
  const NodeId p = kg.permuted_into.at(n);
  const std::string fn = "mn_permuted" + std::to_string(n.v);
  if (decls.find("uint " + fn + "(") == std::string::npos) {
    // Element `o` of n (flat, n's shape) is element sum_i c[axes[i]] * stride_p[i] of the permute.
    const Shape& ns = g.node(n).shape;
    const std::vector<int64_t> sn = contiguous_strides(ns), sp = contiguous_strides(g.node(p).shape);
    const std::vector<int64_t>& axes = g.node(p).attrs.axes;
    std::string f = "uint " + fn + "(uint o) {\n  return 0u";
    for (size_t i = 0; i < axes.size(); ++i) {
      const size_t d = size_t(axes[i] < 0 ? axes[i] + int64_t(ns.size()) : axes[i]);
      f += " + (o / " + uint_lit(sn[d]) + " % " + uint_lit(ns[d]) + ") * " + uint_lit(sp[i]);
    }
    decls += f + ";\n}\n";
  }
  return fn + "(" + offset + ")";
}

std::string Emitter::load(NodeId n, const std::string& offset) {
  // A Fill is usually not stored (the scheduler inlines it); its literal is its value either way.
  if (g.node(n).op == Op::Fill) return fill_lit(g.node(n));
  if (auto it = computed.find(n); it != computed.end()) return it->second;
  if (auto it = moved.find(n); it != moved.end()) return it->second + "(" + offset + ")";
  if (auto it = kg.permuted_into.find(n); it != kg.permuted_into.end())
    return load(it->second, permuted_offset(n, offset));
  uint32_t b = bind_value(n, false);
  const DType dt = g.node(kg.storage_of(n)).dtype;
  if (is_quantized(dt)) {  // GGUF blocks as words, dequantized element by element (quant/glsl.hpp)
    const std::string fn = "mnq_b" + std::to_string(b), arr = "b" + std::to_string(b) + ".d";
    if (decls.find("float " + fn + "(uint i)") == std::string::npos)
      decls += quant::glsl_dequantize(quant_type(dt), arr, fn);
    return fn + "(" + offset + ")";
  }
  std::string e = "b" + std::to_string(b) + ".d[" + offset + "]";
  switch (dt) {
    case DType::F32: return e;
    case DType::F16: return "mn_f16_value(uint(" + e + "))";
    case DType::BF16: return "uintBitsToFloat(uint(" + e + ") << 16u)";
    default: return "float(" + e + ")";
  }
}

std::string Emitter::store(NodeId n, const std::string& offset, const std::string& v) {
  if (auto it = kg.permuted_into.find(n); it != kg.permuted_into.end())
    return store(it->second, permuted_offset(n, offset), v);
  if (n == k.root && k.update.valid()) {  // the gradient goes into the update instead of memory
    if (!update_emitted)
      decls += fused_update_fn(*this, "b" + std::to_string(bind_value(k.update, true)) + ".d[i]");
    update_emitted = true;
    return "mn_update(" + offset + ", " + v + ");";
  }
  uint32_t b = bind_value(n, true);
  std::string lhs = "b" + std::to_string(b) + ".d[" + offset + "]";
  switch (g.node(kg.storage_of(n)).dtype) {
    case DType::I32: return lhs + " = int(" + v + ");";
    case DType::U32: return lhs + " = uint(" + v + ");";
    case DType::F16: return lhs + " = uint16_t(mn_f16_bits(" + v + "));";
    case DType::BF16: return lhs + " = uint16_t(mn_bf16_bits(" + v + "));";
    default: return lhs + " = " + v + ";";
  }
}

namespace {

// Offset of a value of shape `vs`, numpy-broadcast into `space`, from coordinates c0..c{r-1} of `space`.
std::string broadcast_offset(const Shape& vs, const Shape& space) {
  std::vector<int64_t> st = contiguous_strides(vs);
  size_t shift = space.size() - vs.size();
  std::string e;
  for (size_t d = 0; d < vs.size(); ++d) {
    if (vs[d] == 1) continue;
    std::string term = "c" + std::to_string(d + shift) + (st[d] == 1 ? "" : " * " + uint_lit(st[d]));
    e += (e.empty() ? "" : " + ") + term;
  }
  return e.empty() ? "0u" : e;
}

std::string decompose(const Shape& space) {
  std::string s = "  uint rest = ix;\n";
  for (size_t d = space.size(); d-- > 0;) {
    if (d == 0) {
      s += "  uint c0 = rest;\n";
    } else {
      s += "  uint c" + std::to_string(d) + " = rest % " + uint_lit(space[d]) +
           "; rest /= " + uint_lit(space[d]) + ";\n";
    }
  }
  return s;
}

}  // namespace

std::string Emitter::region_fn(NodeId top, const std::vector<NodeId>& region, const Shape& space,
                               NodeId core) {
  std::string name = "fn" + std::to_string(fn_counter++);
  bool has_core = core.valid();
  std::string sig = "float " + name + "(uint ix" + (has_core ? ", float core" : "") + ")";
  // A core computed in f32 whose value has a 16-bit dtype holds that dtype's numbers, as in the reference.
  const std::string core_v = has_core ? round_to(g.node(core).dtype, "core") : "";
  if (top == core) {
    decls += sig + " { return " + core_v + "; }\n";
    return name;
  }
  // The region nodes `top` depends on, found by walking inputs inside the region.
  std::set<NodeId> in_region(region.begin(), region.end()), used;
  std::vector<NodeId> stack{top};
  while (!stack.empty()) {
    NodeId n = stack.back();
    stack.pop_back();
    if (!in_region.count(n) || !used.insert(n).second) continue;
    for (NodeId i : g.node(n).inputs) stack.push_back(i);
  }
  std::string body;
  if (used.empty() && g.node(top).op == Op::Fill) {
    body = "  return " + fill_lit(g.node(top)) + ";\n";
  } else if (used.empty()) {
    // `top` is stored: a plain (broadcast) load.
    const Shape& ts = g.node(top).shape;
    if (numel(ts) == numel(space))
      body = "  return " + load(top, "ix") + ";\n";
    else
      body = decompose(space) + "  return " + load(top, broadcast_offset(ts, space)) + ";\n";
  } else {
    bool needs_coords = false;
    std::string stmts;
    // Locals are numbered by position, not node id, so equal kernels of different graphs are equal text.
    std::map<NodeId, std::string> local;
    for (NodeId n : used) local[n] = "v" + std::to_string(local.size());
    for (NodeId n : used) {  // ascending ids: topological
      const Node& nd = g.node(n);
      const std::string& v = local[n];
      if (nd.op == Op::Fill) {
        stmts += "  float " + v + " = " + fill_lit(nd) + ";\n";
        continue;
      }
      std::vector<std::string> operands;
      for (NodeId i : nd.inputs) {
        const Node& in = g.node(i);
        if (i == core)
          operands.push_back(core_v);
        else if (used.count(i))
          operands.push_back(local[i]);
        else if (in.op == Op::Fill)
          operands.push_back(fill_lit(in));
        else {
          std::string off = in.shape == space ? "ix" : broadcast_offset(in.shape, space);
          needs_coords = needs_coords || (off != "0u" && off != "ix");
          operands.push_back(load(i, off));
        }
      }
      const ops::OpDef& d = ops::def(nd.op);
      if (!d.glsl)
        throw GraphError("[codegen] expected a pointwise op with a GLSL expression, got " +
                         std::string(op_name(nd.op)) + " at node '" + node_label(g, n) + "' (built at " +
                         where(nd.prov.loc) + ")");
      stmts += "  float " + v + " = " + round_to(nd.dtype, ops::expand_glsl(d, nd, operands)) + ";\n";
    }
    body = (needs_coords ? decompose(space) : "") + stmts + "  return " + local[top] + ";\n";
  }
  decls += sig + " {\n" + body + "}\n";
  return name;
}

std::string Emitter::operand_fn(size_t operand) {
  NodeId x = g.node(k.core).inputs.at(operand);
  return region_fn(x, k.prologue, g.node(x).shape, NodeId{});
}

std::string Emitter::finish(const std::string& local_size_decl, const std::string& main_body) {
  std::string s = "#version 450\n" + extensions;
  if (uses_16bit()) {
    if (!caps.storage_16bit)
      throw GraphError(
          "[codegen] expected a device with 16-bit storage (storageBuffer16BitAccess) for the f16/bf16 "
          "values of kernel '" +
          k.label + "', got " + caps.name + " without it");
    s += "#extension GL_EXT_shader_16bit_storage : require\n"
         "#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require\n";
  }
  // No label in the source: kernels that differ only in node names must hash (and compile) as one.
  s += "// " + std::string(archetype_name(k.arch)) + "\n";
  s += "#define MN_SUBGROUP_SIZE " + std::to_string(caps.subgroup_size) + "\n";
  s += "#define MN_MAX_SHARED_BYTES " + std::to_string(caps.max_shared_memory) + "\n";
  s += local_size_decl;
  s += buffer_decls(0);
  s += ops::pointwise_glsl_prelude();
  s += storage_glsl();
  s += decls;
  s += "void main() {\n" + main_body + "}\n";
  out.glsl = s;
  out.hash = content_hash(s, out.spec_constants);
  // Local size for profiles: "local_size_x_id = N" reads specialization constant N, "local_size_x = N" is
  // literal.
  for (int axis = 0; axis < 3; ++axis) {
    std::string key = std::string("local_size_") + "xyz"[axis];
    size_t at = local_size_decl.find(key + "_id = ");
    if (at != std::string::npos) {
      size_t id = std::stoul(local_size_decl.substr(at + key.size() + 6));
      out.workgroup[size_t(axis)] = id < out.spec_constants.size() ? out.spec_constants[id] : 1;
    } else if ((at = local_size_decl.find(key + " = ")) != std::string::npos) {
      out.workgroup[size_t(axis)] = uint32_t(std::stoul(local_size_decl.substr(at + key.size() + 3)));
    }
  }
  if (out.variant.empty()) out.variant = archetype_name(k.arch);
  return s;
}

const char* glsl_storage_type(DType t) {
  switch (t) {
    case DType::I32: return "int";
    case DType::U32: return "uint";
    case DType::F16:
    case DType::BF16: return "uint16_t";
    case DType::F32: return "float";
    default: return is_quantized(t) ? "uint" : "float";
  }
}

bool Emitter::uses_16bit() const {
  for (const Binding& b : out.bindings)
    if (b.kind == Binding::Value && dtype_size(g.node(b.node).dtype) == 2) return true;
  return false;
}

std::string Emitter::buffer_decls(size_t from) const {
  std::string s;
  for (size_t i = from; i < out.bindings.size(); ++i) {
    const Binding& b = out.bindings[i];
    std::string idx = std::to_string(i);
    std::string qual = b.write ? "" : "readonly ";
    if (b.kind == Binding::Hyper) {
      // readonly where no store is made, so that the compiler may keep lr and the corrections in registers
      // across an epilogue's stores to other buffers.
      s += "layout(std430, set = 0, binding = " + idx + ") " + qual + "buffer Buf" + idx +
           " { float lr; uint step; float clip_scale; float c1; float c2; float unused[3]; float partial[]; "
           "} hyper;\n";
      continue;
    }
    std::string ty = b.kind == Binding::Tickets ? "uint" : "float";
    if (b.kind == Binding::Value) ty = glsl_storage_type(g.node(b.node).dtype);
    if (b.coherent || b.kind == Binding::Tickets) qual = "coherent " + qual;
    s += "layout(std430, set = 0, binding = " + idx + ") " + qual + "buffer Buf" + idx + " { " + ty +
         " d[]; } b" + idx + ";\n";
  }
  return s;
}

}  // namespace meganeura::codegen
