// The MatMul archetype: C[b] = epilogue(op(A[b]) · op(B[b])) through the matmul tier family
// (kernels/matmul.hpp: GEMV for small M, scalar tiles, cooperative matrix NV / KHR, split-K). Codegen
// supplies what the family leaves open: the fused epilogue region (a generated function of the flat output
// index and the accumulator, with its own bindings from 3 on), the broadcast batch offsets of each operand,
// and the element type of the stored root. Shapes travel as push constants; the epilogue bakes them like
// every other kernel. The variant is kernels::choose_variant's, with the knobs the tuner's KernelVariant
// sets; a split one is still one dispatch, which binds a Scratch for the partial products (planned in the
// arena) and Tickets (persistent counters; the last slice of each tile sums the partials and applies the
// epilogue). A large Mixed16 product (kernels::kMinF16CopyMacs) first copies both operands to f16 into the
// scratch (a dispatch in Emitter::before), then multiplies f16 buffers reading A and B from it (b_base adds
// B's offset); when it is split too, the partial products follow the copy in the same scratch.
#include <algorithm>
#include <cstring>

#include "meganeura/codegen/emit.hpp"
#include "meganeura/core/error.hpp"
#include "meganeura/ops/ops.hpp"

namespace meganeura::codegen {

namespace {

// Element offset of operand `x` (a [.., R, C] matrix) for output batch index z, broadcasting batch dims.
std::string batch_base_fn(const std::string& name, const Shape& xs, const Shape& out, uint64_t offset = 0) {
  size_t ob = out.size() - 2, xb = xs.size() - 2;
  int64_t mat = xs[xs.size() - 1] * xs[xs.size() - 2];
  std::string s = "uint " + name + "(uint z) {\n  uint rest = z;\n  uint off = 0u;\n";
  int64_t stride = mat;
  for (size_t d = ob; d-- > 0;) {
    std::string c = "c" + std::to_string(d);
    s += "  uint " + c + " = rest % " + uint_lit(out[d]) + "; rest /= " + uint_lit(out[d]) + ";\n";
    size_t shift = ob - xb;
    if (d >= shift && xs[d - shift] != 1) {
      s += "  off += " + c + " * " + uint_lit(stride) + ";\n";
    }
    if (d >= shift) stride *= xs[d - shift];
  }
  return s + (offset ? "  return off + " + uint_lit(int64_t(offset)) + ";\n}\n" : "  return off;\n}\n");
}

// The family's sources take their variants as defines; generated kernels carry them in the text, so that the
// content hash covers them.
std::string with_defines(const shader::ShaderSource& src) {
  const size_t eol = src.glsl.find('\n');
  std::string s = src.glsl.substr(0, eol + 1);  // #version
  for (const shader::Define& d : src.defines) s += "#define " + d.name + " " + d.value + "\n";
  return s + src.glsl.substr(eol + 1);
}

}  // namespace

kernels::MatmulShape matmul_shape(const Graph& g, NodeId mm_id, Precision precision) {
  const Node& mm = g.node(mm_id);
  const Shape& as = g.node(mm.inputs.at(0)).shape;
  const Shape& os = mm.shape;
  const bool ta = mm.attrs.flag_a, tb = mm.attrs.flag_b;
  const int64_t M = os[os.size() - 2], N = os[os.size() - 1];
  const int64_t K = ta ? as[as.size() - 2] : as[as.size() - 1];
  kernels::MatmulShape s;
  s.m = uint32_t(M);
  s.n = uint32_t(N);
  s.k = uint32_t(K);
  s.batch = uint32_t(numel(os) / std::max<int64_t>(1, M * N));
  // A [.., M, K] against a 2-D B (activations times a weight): the batch axes are more rows of one product
  // ([.., M, N] is laid out as [batch·M, N]), so the tiles and the GEMV choice see the whole M.
  if (!ta && g.node(mm.inputs.at(1)).shape.size() == 2 && s.batch > 1) {
    s.m = uint32_t(M * s.batch);
    s.batch = 1;
  }
  s.trans_a = ta;
  s.trans_b = tb;
  s.input = precision == Precision::Mixed16 ? kernels::MatmulInput::F32RoundF16 : kernels::MatmulInput::F32;
  return s;
}

kernels::MatmulTier matmul_best_tier(const Graph& g, NodeId mm, const CodegenOptions& options) {
  const Node& n = g.node(mm);
  const bool fill = g.node(n.inputs.at(0)).op == Op::Fill || g.node(n.inputs.at(1)).op == Op::Fill;
  return fill ? kernels::MatmulTier::Scalar : options.matmul_best;  // the cooperative template has no fills
}

void emit_matmul(Emitter& e) {
  const Node& mm = e.g.node(e.k.core);
  const NodeId a = mm.inputs.at(0), bnode = mm.inputs.at(1);
  const Shape& as = e.g.node(a).shape;
  const Shape& bs = e.g.node(bnode).shape;
  const Shape& os = mm.shape;
  const std::string at = "node '" + node_label(e.g, e.k.core) + "' (built at " + where(mm.prov.loc) + ")";
  if (as.size() < 2 || bs.size() < 2 || os.size() < 2)
    throw GraphError("[codegen] expected matmul operands of rank >= 2, got " + shape_str(as) + " and " +
                     shape_str(bs) + " at " + at);
  const bool a_fill = e.g.node(a).op == Op::Fill, b_fill = e.g.node(bnode).op == Op::Fill;
  // f16 and bf16 operands are read through 16-bit loads, block-quantized ones (GGUF blocks) through
  // dequantizing loads (kernels::MatmulLoad); both accumulate in f32.
  kernels::MatmulLoad loads[2] = {kernels::MatmulLoad::Plain, kernels::MatmulLoad::Plain};
  for (int i = 0; i < 2; ++i) {
    const NodeId x = i ? bnode : a;
    if (e.g.node(x).op == Op::Fill) continue;
    const DType t = e.g.node(e.kg.storage_of(x)).dtype;
    switch (t) {
      case DType::F32: break;
      case DType::F16: loads[i] = kernels::MatmulLoad::F16; break;
      case DType::BF16: loads[i] = kernels::MatmulLoad::BF16; break;
      case DType::Q4_0: loads[i] = kernels::MatmulLoad::Q4_0; break;
      case DType::Q4_1: loads[i] = kernels::MatmulLoad::Q4_1; break;
      case DType::Q5_0: loads[i] = kernels::MatmulLoad::Q5_0; break;
      case DType::Q5_1: loads[i] = kernels::MatmulLoad::Q5_1; break;
      case DType::Q8_0: loads[i] = kernels::MatmulLoad::Q8_0; break;
      case DType::Q4_K: loads[i] = kernels::MatmulLoad::Q4_K; break;
      case DType::Q5_K: loads[i] = kernels::MatmulLoad::Q5_K; break;
      case DType::Q6_K: loads[i] = kernels::MatmulLoad::Q6_K; break;
      default:
        throw GraphError("[codegen] expected f32, f16, bf16 or block-quantized matmul operands, got " +
                         std::string(dtype_name(t)) + " at " + at);
    }
  }
  const bool plain = loads[0] == kernels::MatmulLoad::Plain && loads[1] == kernels::MatmulLoad::Plain;
  const bool loads16 = (loads[0] != kernels::MatmulLoad::Plain && !kernels::is_block_load(loads[0])) ||
                       (loads[1] != kernels::MatmulLoad::Plain && !kernels::is_block_load(loads[1]));
  const DType root_type = e.g.node(e.kg.storage_of(e.k.root)).dtype;
  const bool root16 = root_type == DType::F16 || root_type == DType::BF16;
  if (root16 && e.k.update.valid())
    throw GraphError("[codegen] expected a fused parameter update to store f32, got " +
                     std::string(dtype_name(root_type)) + " at " + at);
  if (numel(os) > int64_t(UINT32_MAX) || numel(as) > int64_t(UINT32_MAX) || numel(bs) > int64_t(UINT32_MAX))
    throw GraphError("[codegen] expected matmul operands of at most 2^32 elements at " + at);
  kernels::MatmulShape s = matmul_shape(e.g, e.k.core, e.opt.precision);
  s.load_a = loads[0];
  s.load_b = loads[1];
  const int64_t M = s.m, N = s.n;

  // Bindings 0, 1, 2 are A, B and C, as the family expects, even when A and B share storage; the epilogue
  // region binds from 3 on.
  // A Fill has no storage: the template returns its literal (scalar and GEMV tiers) and the binding holds
  // the root's buffer, never read.
  // An RMSNorm fused as A's prologue (schedule.cpp, GEMV passes of several products): A binds the rows it
  // normalises; the template sums their squares and reads the norm weight through mn_norm_w.
  const bool a_norm = e.k.fused(a) && e.g.node(a).op == Op::RmsNorm;
  e.bind_value_unshared(a_fill ? e.k.root : a_norm ? e.g.node(a).inputs[0] : a, false);
  e.bind_value_unshared(b_fill ? e.k.root : bnode, false);
  // With a fused update C is the parameter, and each element of the product goes into its update.
  e.bind_value_unshared(e.k.update.valid() ? e.k.update : e.k.root, true);
  e.dedup_from = 3;
  kernels::MatmulEpilogue ep;
  // Further products of the same A in the same GEMV pass (kernels::MatmulEpilogue::products): the twin, which
  // only the epilogue reads (as mm_extra<j>), then the stored siblings; each weight binds next, then its
  // output.
  std::string extra_decls;
  std::vector<NodeId> products;
  if (e.k.twin.valid()) products.push_back(e.k.twin);
  products.insert(products.end(), e.k.siblings.begin(), e.k.siblings.end());
  for (size_t j = 0; j < products.size(); ++j) {
    const NodeId pw = e.g.node(products[j]).inputs.at(1);
    if (e.g.node(e.kg.storage_of(pw)).dtype != e.g.node(e.kg.storage_of(bnode)).dtype)
      throw GraphError("[codegen] expected the weights of one GEMV pass to share a dtype at " + at);
    e.bind_value_unshared(pw, false);
    const bool stored = products[j] != e.k.twin;
    if (stored) {
      e.bind_value_unshared(products[j], true);
    } else {
      e.computed[products[j]] = round_to(e.g.node(products[j]).dtype, "mm_extra" + std::to_string(j));
      extra_decls += "float mm_extra" + std::to_string(j) + ";\n";
    }
    ep.products.push_back({uint32_t(e.g.node(products[j]).shape.back()), stored});
  }
  e.dedup_from = uint32_t(e.out.bindings.size());
  if (a_norm) {
    if (ep.products.empty())
      throw GraphError("[codegen] expected a fused RMSNorm only in a GEMV pass of several products at " + at);
    const std::string w = e.load(e.g.node(a).inputs[1], "k");
    e.decls += "#define A_RMSNORM 1\n#define A_RMS_EPS " + float_lit(e.g.node(a).attrs.reals.at(0)) +
               "\nfloat mn_norm_w(uint k) { return " + w + "; }\n";
  }
  ep.c_type = glsl_storage_type(root_type);
  if (e.k.root != e.k.core || !e.k.epilogue.empty()) {
    const std::string fn = e.region_fn(e.k.root, e.k.epilogue, os, e.k.core);
    ep.expr = fn + "(batch * " + uint_lit(M * N) + " + row * " + uint_lit(N) + " + col, v)";
  }
  if (e.k.update.valid()) {
    e.decls += fused_update_fn(e, "c[i]");
    ep.store = "mn_update";
  } else if (root16) {  // rounded by integer arithmetic, as every 16-bit store
    e.decls += std::string("void mn_store_c(uint i, float v) { c[i] = uint16_t(") +
               (root_type == DType::F16 ? "mn_f16_bits" : "mn_bf16_bits") + "(v)); }\n";
    ep.store = "mn_store_c";
  }
  std::string fills;
  if (a_fill) fills += "#define A_FILL " + float_lit(e.g.node(a).attrs.reals.at(0)) + "\n";
  if (b_fill) fills += "#define B_FILL " + float_lit(e.g.node(bnode).attrs.reals.at(0)) + "\n";
  ep.decls = std::string(ops::pointwise_glsl_prelude()) + storage_glsl() + extra_decls + e.decls;
  if ((e.uses_16bit() || loads16) && !e.caps.storage_16bit)
    throw GraphError(
        "[codegen] expected a device with 16-bit storage (storageBuffer16BitAccess) for f16/bf16 values, "
        "got " +
        e.caps.name + " without it at " + at);
  ep.buffer_decls = e.buffer_decls(e.dedup_from);
  ep.extra_buffers = uint32_t(e.out.bindings.size() - 3);
  // Mixed16's f16 copy (kernels::kMinF16CopyMacs): A's halves at 0, B's from b_offset in the kernel's
  // scratch.
  const uint64_t na = uint64_t(numel(as)), nb = uint64_t(numel(bs));
  const uint64_t b_offset = (na + 7) / 8 * 8;
  bool copy = false;

  kernels::MatmulKernel k;
  kernels::MatmulShape used = s;
  try {
    // The tuner's KernelVariant (codegen/variant.hpp) may name the tier, the tile (scalar: 128, 64 or 16;
    // cooperative: a CoopMatTile) and the split; what it leaves unset is kernels::choose_variant's.
    const kernels::MatmulTier best = matmul_best_tier(e.g, e.k.core, e.opt);
    kernels::MatmulTier tier = e.variant.tier ? *e.variant.tier : kernels::choose_tier(e.caps, s, best);
    // Mixed16 rounds matmul operands where f16 arithmetic pays for it; the GEMV tier has none (it multiplies
    // in f32 either way), and rounding there cost decode 35 % (SmolLM2 f16 weights batch 1 on the H100:
    // 2.34 → 3.15 ms a token, GEMV 1.54 → 2.37 ms), so GEMV products read the exact activations.
    if (tier == kernels::MatmulTier::Gemv) s.input = kernels::MatmulInput::F32;
    if (!ep.products.empty() && tier != kernels::MatmulTier::Gemv)
      throw ConfigError("[codegen] expected the GEMV tier for a kernel of several products, got " +
                        std::string(kernels::tier_name(tier)));
    const bool coop = tier == kernels::MatmulTier::CoopMatNV || tier == kernels::MatmulTier::CoopMatKHR;
    if (e.variant.tier && coop && (a_fill || b_fill || tier != e.opt.matmul_best))
      throw ConfigError(
          "[codegen] expected a cooperative tier the device's self-test passed (and no fill operand), got " +
          std::string(kernels::tier_name(tier)));
    const bool numeric_tile = !e.variant.tile.empty() && e.variant.tile.find('x') == std::string::npos;
    if (!e.variant.tile.empty() && (tier == kernels::MatmulTier::Gemv || coop == numeric_tile))
      throw ConfigError(
          "[codegen] expected a matmul tile of 128, 64 or 16 with the scalar tier, or a cooperative tile "
          "with a cooperative tier, got " +
          e.variant.to_string());
    auto pick = [&](const kernels::MatmulShape& sh) {
      kernels::MatmulVariant v = kernels::choose_variant(
          e.caps, sh, tier,
          coop && !e.variant.tile.empty() ? kernels::CoopMatTile::parse(e.variant.tile)
                                          : kernels::default_coopmat_tile(e.caps, sh, tier, ep));
      if (numeric_tile) {
        v.tile = uint32_t(std::stoul(e.variant.tile));
        v.split_k = kernels::choose_split(e.caps, sh, v);
      }
      if (e.variant.split) v.split_k = e.variant.split;
      return v;
    };
    kernels::MatmulVariant v;
    // A 16-bit or block-quantized weight (B) takes the copy from kMinStagedLoadMacs on: converted to f16,
    // both operands suit the cooperative tiers, which take no loads (choose_tier gave the scalar tier).
    const uint64_t macs = uint64_t(s.m) * s.n * s.k * s.batch;
    const bool staged_load = loads[0] == kernels::MatmulLoad::Plain &&
                             loads[1] != kernels::MatmulLoad::Plain && s.m >= kernels::kMinStagedRows &&
                             macs >= kernels::kMinStagedLoadMacs && !e.variant.tier && e.variant.tile.empty();
    if (s.input == kernels::MatmulInput::F32RoundF16 && !a_fill && !b_fill &&
        (plain ? macs >= kernels::kMinF16CopyMacs : staged_load) && e.caps.storage_16bit &&
        tier != kernels::MatmulTier::Gemv && b_offset + nb < (uint64_t(1) << 32)) {  // 32-bit copy indices
      used.input = kernels::MatmulInput::F16;
      used.load_a = used.load_b = kernels::MatmulLoad::Plain;
      if (staged_load) tier = kernels::choose_tier(e.caps, used, best);
      v = pick(used);
      copy = true;
    }
    if (!copy) {
      used = s;
      v = pick(used);
    }
    ep.operand_decls = fills + "#define CUSTOM_BATCH_BASE 1\n" + batch_base_fn("a_base", as, os) +
                       batch_base_fn("b_base", bs, os, copy ? b_offset : 0);
    k = kernels::select_matmul(e.caps, used, v, ep);
  } catch (const Error& err) {
    throw GraphError(std::string(err.what()) + " at " + at);
  }
  const std::string variant = std::string("matmul.") + k.variant.to_string();
  auto fill = [&](GeneratedKernel& out, const kernels::MatmulPass& pass) {
    out.glsl = with_defines(pass.source);
    out.grid = {pass.grid[0], pass.grid[1], pass.grid[2]};
    out.spec_constants = pass.spec_constants;
    out.push.resize(sizeof(pass.push) / 4);
    std::memcpy(out.push.data(), &pass.push, sizeof(pass.push));
    out.required_subgroup_size = pass.required_subgroup_size;
    out.workgroup = {pass.local_size, 1, 1};
    out.variant = variant;
    out.rewrite_to_khr = pass.rewrite_to_khr;
    out.hash = content_hash(out.glsl + (pass.rewrite_to_khr ? "// khr\n" : ""), out.spec_constants);
  };
  // The kernel's scratch holds Mixed16's f16 copy of A and B first, then split-K's partial products (each
  // part where a binding may start).
  Binding a_in = e.out.bindings[0], b_in = e.out.bindings[1];
  uint64_t partials_at = 0;
  if (copy) {
    // The copy reads A and B and writes the scratch; the product reads both operands from it.
    Binding scratch;
    scratch.kind = Binding::Scratch;
    scratch.node = e.kg.storage_of(e.k.root);
    scratch.bytes = (b_offset + nb + 1) / 2 * 4;
    const uint64_t align = std::max<uint64_t>(e.caps.min_storage_buffer_offset_alignment, 16);
    partials_at = (scratch.bytes + align - 1) / align * align;
    const kernels::MatmulPass pass = kernels::f16_copy_pass(e.caps, na, nb, b_offset, loads[1]);
    GeneratedKernel conv;
    conv.label = "f16 copy " + e.out.label;
    conv.arch = e.out.arch;
    conv.bindings = {a_in, b_in, scratch};
    conv.bindings[2].write = true;
    fill(conv, pass);
    conv.push.clear();
    conv.variant = "matmul.f16-copy";
    e.before.push_back(std::move(conv));
    a_in = b_in = scratch;
  }
  e.out.bindings[0] = a_in;
  e.out.bindings[1] = b_in;
  fill(e.out, k.pass);
  if (k.scratch_bytes == 0) return;
  // Split-K: after C and the epilogue's buffers, the partial products (in the scratch, after Mixed16's copy)
  // and the tickets (select_matmul's SPLIT_PART and SPLIT_TICKET). Appended as they are, not through bind():
  // the copy's scratch binding differs only in its offset.
  Binding partials;
  partials.kind = Binding::Scratch;
  partials.node = e.kg.storage_of(e.k.root);
  partials.bytes = k.scratch_bytes;
  partials.offset = partials_at;
  partials.write = true;
  e.out.bindings.push_back(partials);
  e.bind_tickets(k.ticket_bytes);
}

}  // namespace meganeura::codegen
