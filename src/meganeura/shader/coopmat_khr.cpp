// The NV -> KHR cooperative-matrix rewrite (see coopmat_khr.hpp for the mapping and why).
#include "meganeura/shader/coopmat_khr.hpp"

#include <spirv-tools/libspirv.h>

#include <map>
#include <set>

#include "meganeura/core/error.hpp"

namespace meganeura::shader {
namespace {

constexpr uint32_t kMagic = 0x07230203;
constexpr uint32_t kOpTypeInt = 21, kOpConstantTrue = 41, kOpConstantFalse = 42;
constexpr uint32_t kUseA = 0, kUseB = 1, kUseAcc = 2, kUseNone = 3;
const char* const kUseName[] = {"MatrixA", "MatrixB", "MatrixAccumulator"};

// Conversions keep a matrix's use in KHR: the result type inherits the operand type's.
bool is_conversion(uint32_t op) { return op >= 109 && op <= 115; }  // OpConvertFToU .. OpFConvert

[[noreturn]] void fail(const std::string& label, const std::string& what) {
  throw ShaderError("[shader::rewrite_coopmat_nv_to_khr] " + what + " in kernel '" + label + "'", label, "");
}

struct Analysis {
  std::map<uint32_t, uint32_t> value_type;                      // result id -> type id
  std::map<uint32_t, bool> bool_constants;                      // OpConstantTrue/False
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> int_types;  // id -> (width, signed)
  std::set<uint32_t> matrix_types;
  std::map<uint32_t, uint32_t> matrix_component;  // matrix type -> component type
  uint32_t first_scope_id = 0;  // the scope operand of the first matrix type: its type is a 32-bit integer
  struct MulAdd {
    uint32_t result_type, a, b, c;
  };
  std::vector<MulAdd> muladds;
  std::vector<std::pair<uint32_t, uint32_t>> conversions;  // (result type, operand value)
};

spv_result_t on_instruction(void* user, const spv_parsed_instruction_t* inst) {
  auto& an = *static_cast<Analysis*>(user);
  const uint32_t* w = inst->words;
  if (inst->result_id != 0 && inst->type_id != 0) an.value_type[inst->result_id] = inst->type_id;
  switch (inst->opcode) {
    case kOpConstantTrue: an.bool_constants[inst->result_id] = true; break;
    case kOpConstantFalse: an.bool_constants[inst->result_id] = false; break;
    case kOpTypeInt: an.int_types[w[1]] = {w[2], w[3]}; break;
    case spv::kOpTypeCoopMatNV:
      an.matrix_types.insert(w[1]);
      an.matrix_component[w[1]] = w[2];
      if (an.first_scope_id == 0) an.first_scope_id = w[3];
      break;
    case spv::kOpMulAddNV: an.muladds.push_back({w[1], w[3], w[4], w[5]}); break;
    default:
      if (is_conversion(inst->opcode)) an.conversions.push_back({w[1], w[3]});
  }
  return SPV_SUCCESS;
}

Analysis analyse(std::span<const uint32_t> spirv, const std::string& label) {
  Analysis an;
  spv_context ctx = spvContextCreate(SPV_ENV_UNIVERSAL_1_5);
  spv_diagnostic diag = nullptr;
  const spv_result_t r = spvBinaryParse(ctx, &an, spirv.data(), spirv.size(), nullptr, on_instruction, &diag);
  std::string msg = diag != nullptr && diag->error != nullptr ? diag->error : "";
  spvDiagnosticDestroy(diag);
  spvContextDestroy(ctx);
  if (r != SPV_SUCCESS) fail(label, "expected a SPIR-V module that parses, got: " + msg);
  return an;
}

std::string describe_type(const Analysis& an, uint32_t type) {
  return "cooperative-matrix type %" + std::to_string(type) + " (component %" +
         std::to_string(an.matrix_component.at(type)) + ")";
}

// Use per matrix type, from the multiply-adds and then through conversions, to a fixed point.
std::map<uint32_t, uint32_t> infer_uses(const Analysis& an, const std::string& label) {
  std::map<uint32_t, uint32_t> use;
  for (uint32_t t : an.matrix_types) use[t] = kUseNone;
  auto assign = [&](uint32_t type, uint32_t u) {
    auto it = use.find(type);
    if (it == use.end())
      fail(label, "expected a multiply-add operand of cooperative-matrix type, got %" + std::to_string(type));
    if (it->second != kUseNone && it->second != u) {
      fail(label, "expected each cooperative-matrix type in one role, got " + describe_type(an, type) +
                      " used as " + kUseName[it->second] + " and as " + kUseName[u]);
    }
    it->second = u;
  };
  auto type_of = [&](uint32_t value) {
    auto it = an.value_type.find(value);
    return it == an.value_type.end() ? 0u : it->second;
  };
  for (const auto& m : an.muladds) {
    assign(type_of(m.a), kUseA);
    assign(type_of(m.b), kUseB);
    assign(type_of(m.c), kUseAcc);
    assign(m.result_type, kUseAcc);
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& [result_type, operand] : an.conversions) {
      const uint32_t from = type_of(operand);
      if (!use.count(result_type) || !use.count(from)) continue;
      if (use[from] != kUseNone && use[result_type] == kUseNone) {
        use[result_type] = use[from];
        changed = true;
      } else if (use[result_type] != kUseNone && use[from] == kUseNone) {
        use[from] = use[result_type];
        changed = true;
      } else if (use[from] != use[result_type]) {
        fail(label, "expected a conversion between cooperative matrices of one role, got " +
                        describe_type(an, from) + " as " + kUseName[use[from]] + " converted to " +
                        describe_type(an, result_type) + " as " + kUseName[use[result_type]]);
      }
    }
  }
  for (auto& [type, u] : use) {
    if (u == kUseNone) u = kUseAcc;
  }
  return use;
}

std::vector<uint32_t> encode_string(const std::string& s) {
  std::vector<uint32_t> words((s.size() + 4) / 4, 0u);
  for (size_t i = 0; i < s.size(); ++i) words[i / 4] |= uint32_t(uint8_t(s[i])) << (8 * (i % 4));
  return words;
}

std::string decode_string(const uint32_t* w, size_t n) {
  std::string s;
  for (size_t i = 0; i < n * 4; ++i) {
    const char c = static_cast<char>((w[i / 4] >> (8 * (i % 4))) & 0xff);
    if (c == '\0') break;
    s += c;
  }
  return s;
}

void emit(std::vector<uint32_t>& out, uint32_t opcode, const std::vector<uint32_t>& operands) {
  out.push_back(uint32_t(operands.size() + 1) << 16 | opcode);
  out.insert(out.end(), operands.begin(), operands.end());
}

}  // namespace

std::vector<uint32_t> rewrite_coopmat_nv_to_khr(std::span<const uint32_t> spirv, const std::string& label,
                                                CoopMatRewriteStats* stats) {
  if (spirv.size() < 5 || spirv[0] != kMagic) {
    fail(label,
         "expected a SPIR-V module (magic 0x07230203), got " + std::to_string(spirv.size()) + " words");
  }
  const Analysis an = analyse(spirv, label);
  if (an.matrix_types.empty()) fail(label, "expected a module using SPV_NV_cooperative_matrix, got none");
  const std::map<uint32_t, uint32_t> use = infer_uses(an, label);

  const uint32_t int_type = an.value_type.count(an.first_scope_id) ? an.value_type.at(an.first_scope_id) : 0;
  if (!an.int_types.count(int_type) || an.int_types.at(int_type).first != 32) {
    fail(label, "expected the matrix scope to be a 32-bit integer constant, got %" +
                    std::to_string(an.first_scope_id));
  }
  auto is_signed_int = [&](uint32_t matrix_type) {
    auto it = an.int_types.find(an.matrix_component.at(matrix_type));
    return it != an.int_types.end() && it->second.second == 1;
  };

  uint32_t bound = spirv[3];
  const uint32_t const_id[3] = {bound, bound + 1, bound + 2};  // integer constants 0, 1, 2
  bound += 3;
  // Layout constants: RowMajorKHR = 0, ColumnMajorKHR = 1; use constants: A = 0, B = 1, Accumulator = 2.
  auto layout_of = [&](uint32_t col_major_id) {
    auto it = an.bool_constants.find(col_major_id);
    if (it == an.bool_constants.end()) {
      fail(label,
           "expected the column-major operand of a cooperative-matrix load/store to be a boolean constant, "
           "got %" +
               std::to_string(col_major_id));
    }
    return const_id[it->second ? 1 : 0];
  };

  CoopMatRewriteStats st;
  std::vector<uint32_t> out(spirv.begin(), spirv.begin() + 5);
  out.reserve(spirv.size() + 16);
  bool constants_emitted = false;
  for (size_t pos = 5; pos < spirv.size();) {
    const uint32_t count = spirv[pos] >> 16, op = spirv[pos] & 0xffff;
    if (count == 0 || pos + count > spirv.size())
      fail(label, "expected well-formed instructions, got a truncated one");
    const uint32_t* w = &spirv[pos];
    std::vector<uint32_t> ops(w + 1, w + count);
    pos += count;
    switch (op) {
      case spv::kOpCapability:
        if (ops[0] == spv::kCapCoopMatNV) ops[0] = spv::kCapCoopMatKHR;
        emit(out, op, ops);
        break;
      case spv::kOpExtension:
        if (decode_string(w + 1, count - 1) == "SPV_NV_cooperative_matrix") {
          emit(out, op, encode_string("SPV_KHR_cooperative_matrix"));
        } else {
          emit(out, op, ops);
        }
        break;
      case spv::kOpTypeCoopMatNV: {
        if (!constants_emitted) {
          for (uint32_t v = 0; v < 3; ++v) emit(out, spv::kOpConstant, {int_type, const_id[v], v});
          constants_emitted = true;
        }
        const uint32_t u = use.at(ops[0]);
        ++st.types;
        ++st.uses[u];
        emit(out, spv::kOpTypeCoopMatKHR, {ops[0], ops[1], ops[2], ops[3], ops[4], const_id[u]});
        break;
      }
      case spv::kOpLoadNV: {  // type result pointer stride colmajor [memory access...]
        std::vector<uint32_t> k = {ops[0], ops[1], ops[2], layout_of(ops[4]), ops[3]};
        k.insert(k.end(), ops.begin() + 5, ops.end());
        emit(out, spv::kOpLoadKHR, k);
        ++st.loads;
        break;
      }
      case spv::kOpStoreNV: {  // pointer object stride colmajor [memory access...]
        std::vector<uint32_t> k = {ops[0], ops[1], layout_of(ops[3]), ops[2]};
        k.insert(k.end(), ops.begin() + 4, ops.end());
        emit(out, spv::kOpStoreKHR, k);
        ++st.stores;
        break;
      }
      case spv::kOpMulAddNV: {
        // NV takes integer signedness from the component types; KHR spells it out as operands.
        uint32_t signedness = 0;
        auto type_of = [&](uint32_t v) { return an.value_type.at(v); };
        if (is_signed_int(type_of(ops[2]))) signedness |= 0x1;
        if (is_signed_int(type_of(ops[3]))) signedness |= 0x2;
        if (is_signed_int(type_of(ops[4]))) signedness |= 0x4;
        if (is_signed_int(ops[0])) signedness |= 0x8;
        if (signedness != 0) ops.push_back(signedness);
        emit(out, spv::kOpMulAddKHR, ops);
        ++st.muladds;
        break;
      }
      case spv::kOpLengthNV:
        emit(out, spv::kOpLengthKHR, ops);
        ++st.lengths;
        break;
      default: emit(out, op, ops);
    }
  }
  out[3] = bound;
  if (stats != nullptr) *stats = st;
  return out;
}

}  // namespace meganeura::shader
