// Shared pieces of every generated shader.
#include "meganeura/codegen/emit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "meganeura/ops/ops.hpp"

namespace meganeura::codegen {

std::string uint_lit(int64_t v) { return std::to_string(v) + "u"; }

std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

std::string flat_invocation() {
  return "((gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x + gl_LocalInvocationID.x)";
}

std::array<uint32_t, 3> element_grid(int64_t elements, uint32_t wg, const runtime::DeviceCaps& caps) {
  int64_t groups = std::max<int64_t>(1, (elements + wg - 1) / wg);
  int64_t max_x = caps.max_workgroup_count[0] ? caps.max_workgroup_count[0] : 65535;
  int64_t gx = std::min(groups, max_x);
  int64_t gy = (groups + gx - 1) / gx;
  return {uint32_t(gx), uint32_t(gy), 1};
}

Emitter::Emitter(const Graph& graph, const KernelGraph& kgraph, const Kernel& kernel, const runtime::DeviceCaps& c,
                 const CodegenOptions& o)
    : g(graph), kg(kgraph), k(kernel), caps(c), opt(o) {
  out.label = k.label;
  out.arch = k.arch;
}

namespace {

// The index of binding `want` (same kind, storage and moment) from index `from` on, added if new; a write widens
// an earlier read.
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
  return bind(out.bindings, {Binding::Value, s, 0, write, uint64_t(numel(nd.shape)) * dtype_size(nd.dtype)},
              dedup_from);
}

uint32_t Emitter::bind_value_unshared(NodeId n, bool write) {
  Binding b;
  b.kind = Binding::Value;
  b.node = kg.storage_of(n);
  b.write = write;
  b.bytes = uint64_t(numel(g.node(b.node).shape)) * dtype_size(g.node(b.node).dtype);
  out.bindings.push_back(b);
  return uint32_t(out.bindings.size() - 1);
}

uint32_t Emitter::bind_moment(NodeId param, uint32_t m) {
  return bind(out.bindings, {Binding::Moment, param, m, true, uint64_t(numel(g.node(param).shape)) * 4});
}

uint32_t Emitter::bind_accumulator(NodeId param, bool write) {
  return bind(out.bindings, {Binding::Accumulator, param, 0, write, uint64_t(numel(g.node(param).shape)) * 4});
}

uint32_t Emitter::bind_hyper(bool write) { return bind(out.bindings, {Binding::Hyper, NodeId{}, 0, write, kHyperHead}); }

uint32_t Emitter::bind_scratch(uint64_t bytes, bool write) {
  return bind(out.bindings, {Binding::Scratch, kg.storage_of(k.root), 0, write, bytes});
}

std::string Emitter::load(NodeId n, const std::string& offset) {
  // A Fill is usually not stored (the scheduler inlines it); its literal is its value either way.
  if (g.node(n).op == Op::Fill) return float_lit(g.node(n).attrs.reals.at(0));
  uint32_t b = bind_value(n, false);
  std::string e = "b" + std::to_string(b) + ".d[" + offset + "]";
  return g.node(kg.storage_of(n)).dtype == DType::F32 ? e : "float(" + e + ")";
}

std::string Emitter::store(NodeId n, const std::string& offset, const std::string& v) {
  if (n == k.root && k.update.valid()) {  // the gradient goes into the update instead of memory
    if (!update_emitted) decls += fused_update_fn(*this, "b" + std::to_string(bind_value(k.update, true)) + ".d[i]");
    update_emitted = true;
    return "mn_update(" + offset + ", " + v + ");";
  }
  uint32_t b = bind_value(n, true);
  std::string lhs = "b" + std::to_string(b) + ".d[" + offset + "]";
  switch (g.node(kg.storage_of(n)).dtype) {
    case DType::I32: return lhs + " = int(" + v + ");";
    case DType::U32: return lhs + " = uint(" + v + ");";
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
      s += "  uint c" + std::to_string(d) + " = rest % " + uint_lit(space[d]) + "; rest /= " + uint_lit(space[d]) + ";\n";
    }
  }
  return s;
}

}  // namespace

std::string Emitter::region_fn(NodeId top, const std::vector<NodeId>& region, const Shape& space, NodeId core) {
  std::string name = "fn" + std::to_string(fn_counter++);
  bool has_core = core.valid();
  std::string sig = "float " + name + "(uint ix" + (has_core ? ", float core" : "") + ")";
  if (top == core) {
    decls += sig + " { return core; }\n";
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
    body = "  return " + float_lit(g.node(top).attrs.reals.at(0)) + ";\n";
  } else if (used.empty()) {
    // `top` is stored: a plain (broadcast) load.
    const Shape& ts = g.node(top).shape;
    if (numel(ts) == numel(space)) body = "  return " + load(top, "ix") + ";\n";
    else body = decompose(space) + "  return " + load(top, broadcast_offset(ts, space)) + ";\n";
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
        stmts += "  float " + v + " = " + float_lit(nd.attrs.reals.at(0)) + ";\n";
        continue;
      }
      std::vector<std::string> operands;
      for (NodeId i : nd.inputs) {
        const Node& in = g.node(i);
        if (i == core) operands.push_back("core");
        else if (used.count(i)) operands.push_back(local[i]);
        else if (in.op == Op::Fill) operands.push_back(float_lit(in.attrs.reals.at(0)));
        else {
          std::string off = in.shape == space ? "ix" : broadcast_offset(in.shape, space);
          needs_coords = needs_coords || (off != "0u" && off != "ix");
          operands.push_back(load(i, off));
        }
      }
      const ops::OpDef& d = ops::def(nd.op);
      if (!d.glsl)
        throw GraphError("[codegen] expected a pointwise op with a GLSL expression, got " + std::string(op_name(nd.op)) +
                         " at node '" + node_label(g, n) + "' (built at " + where(nd.prov.loc) + ")");
      stmts += "  float " + v + " = " + ops::expand_glsl(d, nd, operands) + ";\n";
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
  // No label in the source: kernels that differ only in node names must hash (and compile) as one.
  s += "// " + std::string(archetype_name(k.arch)) + "\n";
  s += "#define MN_SUBGROUP_SIZE " + std::to_string(caps.subgroup_size) + "\n";
  s += "#define MN_MAX_SHARED_BYTES " + std::to_string(caps.max_shared_memory) + "\n";
  s += local_size_decl;
  s += buffer_decls(0);
  s += ops::pointwise_glsl_prelude();
  s += decls;
  s += "void main() {\n" + main_body + "}\n";
  out.glsl = s;
  out.hash = content_hash(s, out.spec_constants);
  // Local size for profiles: "local_size_x_id = N" reads specialization constant N, "local_size_x = N" is literal.
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

std::string Emitter::buffer_decls(size_t from) const {
  std::string s;
  for (size_t i = from; i < out.bindings.size(); ++i) {
    const Binding& b = out.bindings[i];
    std::string idx = std::to_string(i);
    std::string qual = b.write ? "" : "readonly ";
    if (b.kind == Binding::Hyper) {
      s += "layout(std430, set = 0, binding = " + idx + ") buffer Buf" + idx +
           " { float lr; uint step; float clip_scale; float c1; float c2; float unused[3]; float partial[]; } hyper;\n";
      continue;
    }
    std::string ty = "float";
    if (b.kind == Binding::Value) {
      DType t = g.node(b.node).dtype;
      ty = t == DType::I32 ? "int" : t == DType::U32 ? "uint" : "float";
    }
    s += "layout(std430, set = 0, binding = " + idx + ") " + qual + "buffer Buf" + idx + " { " + ty + " d[]; } b" +
         idx + ";\n";
  }
  return s;
}

}  // namespace meganeura::codegen
