// What the matmul tiers share: the GLSL prelude, Mixed16's f16 copy and shape
// helpers. Shapes travel as push constants so that one compiled kernel serves every size; tile sizes are
// constants because they size shared arrays and unrolled loops.
#include "meganeura/kernels/matmul/shaders.hpp"  // generated from kernels/matmul/*.comp, *.glsl
#include "meganeura/kernels/matmul/tiers.hpp"
#include "meganeura/quant/glsl.hpp"

namespace meganeura::kernels {

namespace glsl {

std::string fill(std::string text, const std::vector<std::pair<std::string, std::string>>& values) {
  for (const auto& [key, value] : values) {
    const std::string at = "@" + key + "@";
    for (size_t i = text.find(at); i != std::string::npos; i = text.find(at, i + value.size()))
      text.replace(i, at.size(), value);
  }
  return text;
}

std::string common(const MatmulEpilogue& ep, bool coopmat) {
  // prelude.glsl enables 16-bit storage, not requires it: a kernel that declares no 16-bit buffer does not
  // need the feature. round_f16.glsl: x rounded to the nearest f16 by integer arithmetic, because NVIDIA's
  // driver folds unpackHalf2x16(packHalf2x16(x)) back to x.
  std::string s =
      fill(shaders::prelude_glsl, {{"EXTENSIONS", coopmat ? shaders::coopmat_extensions_glsl : ""},
                                   {"ROUND_F16", shaders::round_f16_glsl}});
  s += "layout(std430, set = 0, binding = 2) buffer BufC { " + ep.c_type + " c[]; };\n";
  if (!ep.buffer_decls.empty()) {
    s += ep.buffer_decls;
  } else {
    unsigned taken = 0;  // gemv_multi's product bindings come first and are declared by the template
    for (const MatmulEpilogue::GemvProduct& pr : ep.products) taken += pr.stored ? 2 : 1;
    for (unsigned i = taken; i < ep.extra_buffers; ++i) {
      const std::string n = std::to_string(i);
      s += "layout(std430, set = 0, binding = " + std::to_string(3 + i) + ") readonly buffer BufE" + n +
           " { float e" + n + "[]; };\n";
    }
  }
  s += ep.operand_decls + ep.decls;
  s += "#ifndef CUSTOM_BATCH_BASE\nuint a_base(uint batch) { return batch * p.sa; }\n"
       "uint b_base(uint batch) { return batch * p.sb; }\n#endif\n";
  s += "float epilogue(float v, uint row, uint col, uint batch) { return " +
       (ep.expr.empty() ? std::string("v") : "(" + ep.expr + ")") + "; }\n";
  s += ep.store.empty() ? "#define STORE_C(i, v) c[i] = " + ep.c_type + "(v)\n"
                        : "#define STORE_C(i, v) " + ep.store + "(i, v)\n";
  return s;
}

std::string f16_copy(uint64_t na, uint64_t nb, uint64_t b_offset, MatmulLoad load_b) {
  return fill(
      shaders::f16_copy_comp,
      {{"B_LOAD", std::to_string(int(load_b))},
       {"BLOCKS", is_block_load(load_b) ? quant::glsl_dequantize(tiers::block_type(load_b), "b", "mnq_b")
                                        : std::string()},
       {"ROUND_F16", shaders::round_f16_glsl},
       {"NA", std::to_string(na)},
       {"NB", std::to_string(nb)},
       {"PA", std::to_string((na + 1) / 2)},
       {"PB", std::to_string((nb + 1) / 2)},
       {"OB", std::to_string(b_offset / 2)}});
}

}  // namespace glsl

namespace tiers {

MatmulShape resolved(MatmulShape s) {
  if (s.lda == 0) s.lda = s.trans_a ? s.m : s.k;
  if (s.ldb == 0) s.ldb = s.trans_b ? s.k : s.n;
  if (s.ldc == 0) s.ldc = s.n;
  if (s.stride_a == 0) s.stride_a = s.lda * (s.trans_a ? s.k : s.m);
  if (s.stride_b == 0) s.stride_b = s.ldb * (s.trans_b ? s.n : s.k);
  if (s.stride_c == 0) s.stride_c = s.ldc * s.m;
  return s;
}

uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

bool row_starts_aligned(const MatmulShape& s, uint32_t elems) {
  return (s.trans_a ? s.m : s.k) % elems == 0 && s.lda % elems == 0 && s.stride_a % elems == 0 &&
         (s.trans_b ? s.k : s.n) % elems == 0 && s.ldb % elems == 0 && s.stride_b % elems == 0;
}

quant::Type block_type(MatmulLoad l) {
  switch (l) {
    case MatmulLoad::Q4_0: return quant::Type::Q4_0;
    case MatmulLoad::Q4_1: return quant::Type::Q4_1;
    case MatmulLoad::Q5_0: return quant::Type::Q5_0;
    case MatmulLoad::Q5_1: return quant::Type::Q5_1;
    case MatmulLoad::Q8_0: return quant::Type::Q8_0;
    case MatmulLoad::Q4_K: return quant::Type::Q4_K;
    case MatmulLoad::Q5_K: return quant::Type::Q5_K;
    default: return quant::Type::Q6_K;
  }
}

std::string block_code(const MatmulShape& s) {
  std::string code;
  if (is_block_load(s.load_a)) code += quant::glsl_dequantize(block_type(s.load_a), "a", "mnq_a");
  if (is_block_load(s.load_b)) code += quant::glsl_dequantize(block_type(s.load_b), "b", "mnq_b");
  return code;
}

bool cooperative(MatmulTier t) { return t == MatmulTier::CoopMatNV || t == MatmulTier::CoopMatKHR; }

}  // namespace tiers

}  // namespace meganeura::kernels
