// The code generator's driver: one Emitter per kernel, dispatched on the archetype.
#include "meganeura/codegen/codegen.hpp"

#include "meganeura/codegen/emit.hpp"
#include "meganeura/core/error.hpp"

namespace meganeura {

uint64_t content_hash(const std::string& text, const std::vector<uint32_t>& spec) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](unsigned char c) {
    h ^= c;
    h *= 1099511628211ull;
  };
  for (char c : text) mix(static_cast<unsigned char>(c));
  for (uint32_t v : spec)
    for (int i = 0; i < 4; ++i) mix(static_cast<unsigned char>(v >> (8 * i)));
  return h;
}

std::vector<GeneratedKernel> generate_kernel(const Graph& g, const KernelGraph& kg, size_t ki,
                                             const runtime::DeviceCaps& caps, const CodegenOptions& options,
                                             const KernelVariant& variant) {
  std::vector<GeneratedKernel> out;
  const Kernel& k = kg.kernels.at(ki);
  if (!variant.is_default() && !tunable(k.arch))
    throw ConfigError("[codegen] expected the default variant for a " + std::string(archetype_name(k.arch)) +
                      " kernel, got " + variant.to_string());
  codegen::Emitter e(g, kg, k, caps, options);
  e.variant = variant;
  switch (k.arch) {
    case Archetype::Pointwise: codegen::emit_pointwise(e); break;
    case Archetype::MatMul: codegen::emit_matmul(e); break;
    case Archetype::Conv: codegen::emit_conv(e); break;
    case Archetype::RowReduce: codegen::emit_reduce(e); break;
    case Archetype::Scatter:
      if (codegen::scatter_atomic(e)) {  // atomics accumulate into the root: a dispatch clears it first
        codegen::Emitter z(g, kg, k, caps, options);
        codegen::emit_clear(z);
        z.out.kernel = ki;
        out.push_back(std::move(z.out));
      }
      codegen::emit_movement(e);
      break;
    case Archetype::Copy:
    case Archetype::Gather: codegen::emit_movement(e); break;
    case Archetype::Attention: codegen::emit_attention(e); break;
    case Archetype::Optimizer: codegen::emit_optimizer(e); break;
    case Archetype::Counter: codegen::emit_counter(e); break;
    case Archetype::Accumulate: codegen::emit_accumulate(e); break;
    case Archetype::GradNorm: codegen::emit_grad_norm(e); break;
    case Archetype::ClipScale: codegen::emit_clip_scale(e); break;
  }
  for (GeneratedKernel& b : e.before) {  // Mixed16's f16 copy, a scatter's clear, attention's dK/dV parts
    b.kernel = ki;
    out.push_back(std::move(b));
  }
  e.out.kernel = ki;
  out.push_back(std::move(e.out));
  // The tuning key covers the shader and its push constants (a matmul's shape travels there), not the
  // variant.
  uint64_t base = 0;
  if (variant.is_default()) {
    const GeneratedKernel& last = out.back();
    std::vector<uint32_t> words = last.spec_constants;
    words.insert(words.end(), last.push.begin(), last.push.end());
    base = content_hash(last.glsl, words);
  } else {
    base = generate_kernel(g, kg, ki, caps, options).back().base_hash;
  }
  for (GeneratedKernel& gk : out) {
    gk.tuned = variant;
    gk.base_hash = base;
  }
  return out;
}

std::vector<GeneratedKernel> generate(const Graph& g, const KernelGraph& kg, const runtime::DeviceCaps& caps,
                                      const CodegenOptions& options) {
  std::vector<GeneratedKernel> out;
  out.reserve(kg.kernels.size());
  for (size_t ki = 0; ki < kg.kernels.size(); ++ki)
    for (GeneratedKernel& k : generate_kernel(g, kg, ki, caps, options)) out.push_back(std::move(k));
  return out;
}

}  // namespace meganeura
