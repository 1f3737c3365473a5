// The tensor-load rewrite (tensor_loads.hpp), an experiment of bench_coopmat2: the words it writes, checked
// without a device (SPIRV-Tools 2023.1 cannot validate them; the driver is the only validator).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "meganeura/core/error.hpp"
#include "meganeura/shader/coopmat_khr.hpp"
#include "meganeura/shader/shader.hpp"
#include "tensor_loads.hpp"

namespace meganeura::test {
namespace {

shader::CompileOptions compile_options() {
  shader::CompileOptions o;
  o.device_key = "experiments";  // only the cache key; the cache is off
  return o;
}

// The common head of the tensor-load tests' shaders: a float16_t buffer A, a float buffer C, workgroup-scope
// A (64x32), B (32x64) and a 64x64 accumulator (TENSOR_TEST_MATRICES).
const char* kTensorTestHead = R"(#version 450
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_memory_scope_semantics : require
layout(local_size_x = 128) in;
layout(std430, binding = 0) buffer A { float16_t a[]; };
layout(std430, binding = 1) buffer C { float c[]; };
layout(push_constant) uniform P { uint lda, off; } p;
#define TENSOR_TEST_MATRICES \
  fcoopmatNV<16, gl_ScopeWorkgroup, 64, 32> ma; \
  fcoopmatNV<16, gl_ScopeWorkgroup, 32, 64> mb; \
  fcoopmatNV<32, gl_ScopeWorkgroup, 64, 64> acc = fcoopmatNV<32, gl_ScopeWorkgroup, 64, 64>(0.0);
)";

TEST(TensorLoads, RowMajorBufferLoadsBecomeTensorLoadsOfTheSameBlock) {
  // Workgroup-scope A (64x32, row-major from a buffer) and B (32x64, column-major: left alone), stored to
  // shared and reloaded row-major (left alone unless shared loads are asked for).
  const std::string src = std::string(kTensorTestHead) + R"(shared float16_t s[64 * 32];
void main() {
  TENSOR_TEST_MATRICES
  coopMatLoadNV(ma, a, p.off, p.lda, false);
  coopMatLoadNV(mb, a, 4096, 32, true);
  coopMatStoreNV(ma, s, 0, 32, false);
  barrier();
  coopMatLoadNV(ma, s, 0, 32, false);
  acc = coopMatMulAddNV(ma, mb, acc);
  coopMatStoreNV(acc, c, 0, 64, false);
}
)";
  const std::vector<uint32_t> nv = shader::compile_glsl({"tensor_loads", src, {}}, compile_options()).spirv;
  const std::vector<uint32_t> khr = shader::rewrite_coopmat_nv_to_khr(nv, "tensor_loads");
  uint32_t n = 0;
  const std::vector<uint32_t> t = shader::rewrite_loads_to_tensor_nv(khr, "tensor_loads", {}, &n);
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(t[1], 0x00010600u) << "SPIR-V 1.6";
  struct Inst {
    uint32_t op;
    std::vector<uint32_t> w;
  };
  std::vector<Inst> insts;
  std::map<uint32_t, size_t> def;  // result id -> instruction index
  for (size_t pos = 5; pos < t.size();) {
    const uint32_t count = t[pos] >> 16;
    ASSERT_GT(count, 0u);
    ASSERT_LE(pos + count, t.size());
    insts.push_back({t[pos] & 0xffffu, std::vector<uint32_t>(t.begin() + pos + 1, t.begin() + pos + count)});
    pos += count;
  }
  std::map<uint32_t, uint32_t> constants;
  std::vector<uint32_t> caps;
  std::vector<std::string> exts;
  size_t first_function = insts.size();
  for (size_t i = 0; i < insts.size(); ++i) {
    const Inst& in = insts[i];
    if (in.op == shader::spv::kOpCapability) caps.push_back(in.w[0]);
    if (in.op == shader::spv::kOpExtension) exts.emplace_back(reinterpret_cast<const char*>(in.w.data()));
    if (in.op == shader::spv::kOpConstant && in.w.size() == 3) constants[in.w[1]] = in.w[2];
    if (in.op == 54 && first_function == insts.size()) first_function = i;
    // Result ids: types and OpTypeTensorLayoutNV in word 0, most value instructions in word 1.
    const bool type_decl = (in.op >= 19 && in.op <= 39) || in.op == shader::spv::kOpTypeCoopMatKHR ||
                           in.op == shader::spv::kOpTypeTensorLayoutNV;
    if (type_decl) {
      EXPECT_FALSE(def.count(in.w[0])) << "id %" << in.w[0] << " defined twice";
      def[in.w[0]] = i;
    } else if (in.op == shader::spv::kOpConstant || in.op == shader::spv::kOpCreateTensorLayoutNV ||
               in.op == shader::spv::kOpTensorLayoutSetDimensionNV ||
               in.op == shader::spv::kOpTensorLayoutSetStrideNV || in.op == shader::spv::kOpLoadTensorNV ||
               in.op == 1 /* OpUndef */) {
      EXPECT_FALSE(def.count(in.w[1])) << "id %" << in.w[1] << " defined twice";
      def[in.w[1]] = i;
    }
  }
  for (const auto& [id, at] : def) EXPECT_LT(id, t[3]) << "ids stay below the bound";
  EXPECT_NE(std::find(caps.begin(), caps.end(), shader::spv::kCapTensorAddressingNV), caps.end());
  EXPECT_NE(std::find(caps.begin(), caps.end(), shader::spv::kCapCoopMatTensorAddressingNV), caps.end());
  EXPECT_NE(std::find(exts.begin(), exts.end(), "SPV_NV_tensor_addressing"), exts.end());
  EXPECT_NE(std::find(exts.begin(), exts.end(), "SPV_NV_cooperative_matrix2"), exts.end());

  std::vector<const Inst*> tensor_loads, plain_loads;
  for (const Inst& in : insts) {
    if (in.op == shader::spv::kOpLoadTensorNV) tensor_loads.push_back(&in);
    if (in.op == shader::spv::kOpLoadKHR) plain_loads.push_back(&in);
  }
  ASSERT_EQ(tensor_loads.size(), 1u);
  EXPECT_EQ(plain_loads.size(), 2u) << "the column-major and the shared-memory load stay";
  // type result pointer object layout memory-operands tensor-operands
  const std::vector<uint32_t>& L = tensor_loads[0]->w;
  ASSERT_EQ(L.size(), 7u);
  EXPECT_EQ(L[5], 0u);
  EXPECT_EQ(L[6], 0u);
  const Inst& mtype = insts.at(def.at(L[0]));
  ASSERT_EQ(mtype.op, shader::spv::kOpTypeCoopMatKHR);
  EXPECT_EQ(constants.at(mtype.w[3]), 64u);
  EXPECT_EQ(constants.at(mtype.w[4]), 32u);
  EXPECT_EQ(insts.at(def.at(L[3])).op, 1u) << "object: OpUndef";
  const Inst& stride = insts.at(def.at(L[4]));
  ASSERT_EQ(stride.op, shader::spv::kOpTensorLayoutSetStrideNV);
  ASSERT_EQ(stride.w.size(), 5u);
  EXPECT_EQ(constants.at(stride.w[4]), 1u) << "unit column stride";
  EXPECT_FALSE(constants.count(stride.w[3])) << "row stride is the load's (a push constant), not a literal";
  const Inst& dims = insts.at(def.at(stride.w[2]));
  ASSERT_EQ(dims.op, shader::spv::kOpTensorLayoutSetDimensionNV);
  EXPECT_EQ(dims.w[3], mtype.w[3]);
  EXPECT_EQ(dims.w[4], mtype.w[4]);
  EXPECT_EQ(insts.at(def.at(dims.w[2])).op, shader::spv::kOpCreateTensorLayoutNV);
  const size_t layout_at = def.at(dims.w[0]);
  const Inst& layout = insts.at(layout_at);
  ASSERT_EQ(layout.op, shader::spv::kOpTypeTensorLayoutNV);
  EXPECT_LT(layout_at, first_function) << "declared with the globals";
  EXPECT_EQ(constants.at(layout.w[1]), 2u) << "two dimensions";
  EXPECT_EQ(constants.at(layout.w[2]), 1u) << "clamp mode Constant (the form the driver stages itself)";

  shader::TensorLoadOptions shared;
  shared.shared = true;
  EXPECT_NO_THROW(shader::rewrite_loads_to_tensor_nv(khr, "tensor_loads", shared, &n));
  EXPECT_EQ(n, 2u) << "the shared-memory reload too";
  EXPECT_THROW(shader::rewrite_loads_to_tensor_nv(nv, "tensor_loads"), ShaderError)
      << "an NV module has no KHR types";
  std::vector<uint32_t> old = khr;
  old[1] = 0x00010300;
  EXPECT_THROW(shader::rewrite_loads_to_tensor_nv(old, "tensor_loads"), ShaderError) << "SPIR-V 1.3";
}

TEST(TensorLoads, LoadsThroughOtherElementTypesStay) {
  // A (64x32) loads row-major from a float16_t buffer; B (32x64) row-major from a uvec4 shared tile, whose
  // KHR stride counts uvec4s while a tensor layout's counts elements: rewritten, it read the wrong elements
  // and lost the device on the H200 (session 8).
  const std::string src = std::string(kTensorTestHead) + R"(shared uvec4 s[32 * 8];
void main() {
  TENSOR_TEST_MATRICES
  s[gl_LocalInvocationIndex] = uvec4(gl_LocalInvocationIndex);
  barrier();
  coopMatLoadNV(ma, a, p.off, p.lda, false);
  coopMatLoadNV(mb, s, 0, 8, false);
  acc = coopMatMulAddNV(ma, mb, acc);
  coopMatStoreNV(acc, c, 0, 64, false);
}
)";
  const std::vector<uint32_t> nv = shader::compile_glsl({"tensor_uvec4", src, {}}, compile_options()).spirv;
  const std::vector<uint32_t> khr = shader::rewrite_coopmat_nv_to_khr(nv, "tensor_uvec4");
  shader::TensorLoadOptions opt;
  opt.shared = true;
  uint32_t n = 0;
  const std::vector<uint32_t> t = shader::rewrite_loads_to_tensor_nv(khr, "tensor_uvec4", opt, &n);
  EXPECT_EQ(n, 1u) << "only the float16_t buffer load";
  std::map<uint32_t, uint32_t> pointer_class;   // pointer type -> storage class
  std::map<uint32_t, uint32_t> value_type;      // access chain -> pointer type
  std::vector<uint32_t> tensor_from, khr_from;  // the pointers each kind of load reads
  for (size_t pos = 5; pos < t.size();) {
    const uint32_t count = t[pos] >> 16, op = t[pos] & 0xffffu;
    ASSERT_GT(count, 0u);
    ASSERT_LE(pos + count, t.size());
    const uint32_t* w = &t[pos];
    if (op == 32) pointer_class[w[1]] = w[2];           // OpTypePointer
    if (op == 65 || op == 59) value_type[w[2]] = w[1];  // OpAccessChain, OpVariable
    if (op == shader::spv::kOpLoadTensorNV) tensor_from.push_back(w[3]);
    if (op == shader::spv::kOpLoadKHR) khr_from.push_back(w[3]);
    pos += count;
  }
  ASSERT_EQ(tensor_from.size(), 1u);
  ASSERT_EQ(khr_from.size(), 1u);
  EXPECT_EQ(pointer_class[value_type[tensor_from[0]]], 12u) << "the tensor load reads the storage buffer";
  EXPECT_EQ(pointer_class[value_type[khr_from[0]]], 4u) << "the uvec4 load (Workgroup) stays a KHR load";
}

}  // namespace
}  // namespace meganeura::test
