#include <string>

#include "meganeura/quant/blocks.hpp"

namespace meganeura::quant {

const TypeInfo* find_type(uint32_t id) {
  for (const TypeInfo& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return &t;
  return nullptr;
}

const TypeInfo& info(Type t) { return *find_type(static_cast<uint32_t>(t)); }

std::string any_type_name(uint32_t id) {
  // ggml's ids of types we do not support, so that a message can say which one a file uses.
  static constexpr const char* kOther[] = {
      nullptr,    nullptr,    nullptr,   nullptr, "Q4_2",       "Q4_3",       nullptr,      nullptr,
      nullptr,    "Q8_1",     "Q2_K",    "Q3_K",  nullptr,      nullptr,      nullptr,      "Q8_K",
      "IQ2_XXS",  "IQ2_XS",   "IQ3_XXS", "IQ1_S", "IQ4_NL",     "IQ3_S",      "IQ2_S",      "IQ4_XS",
      "I8",       "I16",      "I32",     "I64",   "F64",        "IQ1_M",      nullptr,      "Q4_0_4_4",
      "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",   "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4"};
  if (const TypeInfo* t = find_type(id)) return t->name;
  if (id < std::size(kOther) && kOther[id]) return kOther[id];
  return "type " + std::to_string(id);
}

std::string supported_type_names() {
  std::string s;
  for (const TypeInfo& t : kTypes) {
    if (!s.empty()) s += ", ";
    s += t.name;
  }
  return s;
}

}  // namespace meganeura::quant
