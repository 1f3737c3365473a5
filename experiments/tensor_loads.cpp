// The KHR load -> tensor load rewrite (see tensor_loads.hpp for the mapping and why). A plain walk over the
// words: bookworm's SPIRV-Tools cannot parse KHR cooperative-matrix modules.
#include "tensor_loads.hpp"

#include <algorithm>
#include <map>

#include "meganeura/core/error.hpp"
#include "meganeura/shader/coopmat_khr.hpp"

namespace meganeura::shader {
namespace {

constexpr uint32_t kMagic = 0x07230203, kVersion14 = 0x00010400, kVersion16 = 0x00010600;
constexpr uint32_t kOpUndef = 1, kOpTypeInt = 21, kOpTypePointer = 32, kOpVariable = 59, kOpAccessChain = 65,
                   kOpInBoundsAccessChain = 66, kOpPtrAccessChain = 67, kOpFunction = 54;
constexpr uint32_t kStorageWorkgroup = 4, kStorageBuffer = 12, kStoragePhysical = 5349;

[[noreturn]] void fail(const std::string& label, const std::string& what) {
  throw ShaderError("[shader::rewrite_loads_to_tensor_nv] " + what + " in kernel '" + label + "'", label, "");
}

void emit(std::vector<uint32_t>& out, uint32_t opcode, const std::vector<uint32_t>& operands) {
  out.push_back(uint32_t(operands.size() + 1) << 16 | opcode);
  out.insert(out.end(), operands.begin(), operands.end());
}

std::vector<uint32_t> encode_string(const std::string& s) {
  std::vector<uint32_t> words((s.size() + 4) / 4, 0u);
  for (size_t i = 0; i < s.size(); ++i) words[i / 4] |= uint32_t(uint8_t(s[i])) << (8 * (i % 4));
  return words;
}

}  // namespace

std::vector<uint32_t> rewrite_loads_to_tensor_nv(std::span<const uint32_t> spirv, const std::string& label,
                                                 const TensorLoadOptions& options, uint32_t* rewritten) {
  if (spirv.size() < 5 || spirv[0] != kMagic) {
    fail(label,
         "expected a SPIR-V module (magic 0x07230203), got " + std::to_string(spirv.size()) + " words");
  }
  if (spirv[1] < kVersion14)
    fail(label, "expected SPIR-V 1.4 or later (compile for Vulkan 1.2 or 1.3), got an older module");

  // First walk: the facts the rewrite needs.
  std::map<uint32_t, uint32_t> pointer_class;   // pointer type -> storage class
  std::map<uint32_t, uint32_t> pointee;         // pointer type -> the type it points to
  std::map<uint32_t, uint32_t> component;       // KHR matrix type -> its component type
  std::map<uint32_t, uint32_t> value_type;      // pointer value -> its type (variables, access chains)
  std::map<uint32_t, uint32_t> constant_value;  // 32-bit OpConstant -> value
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> matrix_dims;  // KHR matrix type -> (rows id, columns id)
  uint32_t uint_type = 0;
  for (size_t pos = 5; pos < spirv.size();) {
    const uint32_t count = spirv[pos] >> 16, op = spirv[pos] & 0xffff;
    if (count == 0 || pos + count > spirv.size())
      fail(label, "expected well-formed instructions, got a truncated one");
    const uint32_t* w = &spirv[pos];
    if (op == kOpTypeInt && count == 4 && w[2] == 32 && w[3] == 0) uint_type = w[1];
    if (op == kOpTypePointer && count == 4) {
      pointer_class[w[1]] = w[2];
      pointee[w[1]] = w[3];
    }
    if (op == spv::kOpConstant && count == 4) constant_value[w[2]] = w[3];
    if ((op == kOpVariable || op == kOpAccessChain || op == kOpInBoundsAccessChain ||
         op == kOpPtrAccessChain) &&
        count >= 3)
      value_type[w[2]] = w[1];
    if (op == spv::kOpTypeCoopMatKHR && count == 7) {
      matrix_dims[w[1]] = {w[4], w[5]};
      component[w[1]] = w[2];
    }
    pos += count;
  }
  if (matrix_dims.empty()) fail(label, "expected a module with KHR cooperative-matrix types, got none");
  // A load qualifies when it reads elements of the matrix's own component type: the KHR stride counts
  // elements of the pointee (a uvec4 array's stride is in uvec4s), a tensor layout's counts matrix elements.
  // Loads through other types stay (rewritten, a uvec4 shared tile read the wrong elements and lost the
  // device on the H200, session 8).
  auto wanted = [&](uint32_t pointer, uint32_t matrix_type) {
    auto t = value_type.find(pointer);
    if (t == value_type.end()) return false;
    auto c = pointer_class.find(t->second);
    if (c == pointer_class.end()) return false;
    if (pointee[t->second] != component[matrix_type]) return false;
    if (c->second == kStorageWorkgroup) return options.shared;
    return (c->second == kStorageBuffer || c->second == kStoragePhysical) && options.storage_buffers;
  };

  uint32_t bound = spirv[3];
  const bool new_uint = uint_type == 0;
  if (new_uint) uint_type = bound++;
  const uint32_t c_zero = bound++, c_one = bound++, c_two = bound++, layout_type = bound++;

  std::vector<uint32_t> out(spirv.begin(), spirv.begin() + 5);
  out[1] = std::max(out[1], kVersion16);
  out.reserve(spirv.size() + 64);
  bool caps_done = false, exts_done = false, globals_done = false;
  uint32_t count_rewritten = 0;
  for (size_t pos = 5; pos < spirv.size();) {
    const uint32_t count = spirv[pos] >> 16, op = spirv[pos] & 0xffff;
    const uint32_t* w = &spirv[pos];
    pos += count;
    if (!caps_done && op != spv::kOpCapability) {
      emit(out, spv::kOpCapability, {spv::kCapTensorAddressingNV});
      emit(out, spv::kOpCapability, {spv::kCapCoopMatTensorAddressingNV});
      caps_done = true;
    }
    if (!exts_done && op != spv::kOpCapability && op != spv::kOpExtension) {
      emit(out, spv::kOpExtension, encode_string("SPV_NV_cooperative_matrix2"));
      emit(out, spv::kOpExtension, encode_string("SPV_NV_tensor_addressing"));
      exts_done = true;
    }
    if (!globals_done && op == kOpFunction) {
      if (new_uint) emit(out, kOpTypeInt, {uint_type, 32, 0});
      emit(out, spv::kOpConstant, {uint_type, c_zero, 0});
      emit(out, spv::kOpConstant, {uint_type, c_one, 1});
      emit(out, spv::kOpConstant, {uint_type, c_two, 2});
      emit(out, spv::kOpTypeTensorLayoutNV,
           {layout_type, c_two, c_one});  // 2 dimensions, clamp mode Constant
      globals_done = true;
    }
    // OpCooperativeMatrixLoadKHR: type result pointer layout stride [memory operands]
    if (op == spv::kOpLoadKHR && count >= 6) {
      const uint32_t type = w[1], result = w[2], pointer = w[3], layout = w[4], stride = w[5];
      const auto dims = matrix_dims.find(type);
      const auto layout_value = constant_value.find(layout);
      if (dims != matrix_dims.end() && layout_value != constant_value.end() && layout_value->second == 0 &&
          wanted(pointer, type)) {
        const uint32_t l0 = bound++, l1 = bound++, l2 = bound++, undef = bound++;
        emit(out, spv::kOpCreateTensorLayoutNV, {layout_type, l0});
        emit(out, spv::kOpTensorLayoutSetDimensionNV,
             {layout_type, l1, l0, dims->second.first, dims->second.second});
        emit(out, spv::kOpTensorLayoutSetStrideNV, {layout_type, l2, l1, stride, c_one});
        emit(out, kOpUndef, {type, undef});
        emit(out, spv::kOpLoadTensorNV, {type, result, pointer, undef, l2, 0u, 0u});
        ++count_rewritten;
        continue;
      }
    }
    out.insert(out.end(), w, w + count);
  }
  if (!globals_done) fail(label, "expected a function in the module, got none");
  out[3] = bound;
  if (rewritten != nullptr) *rewritten = count_rewritten;
  return out;
}

}  // namespace meganeura::shader
