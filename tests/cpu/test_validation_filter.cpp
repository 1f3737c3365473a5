// The validation layer's known limit (runtime/vk_instance.hpp): Debian bookworm's layer (1.3.239) predates
// VK_KHR_cooperative_matrix and flags every module that uses it with three messages. Only those three, only
// for modules that declare CooperativeMatrixKHR (capability 6022), are set apart; everything else stays
// fatal.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "meganeura/runtime/vk_instance.hpp"

namespace {

using meganeura::runtime::vk::declares_coopmat_khr;
using meganeura::runtime::vk::is_coopmat_device_layer_limit;
using meganeura::runtime::vk::is_coopmat_khr_layer_limit;

// A module header, the given capabilities, then OpMemoryModel.
std::vector<uint32_t> module_with(std::vector<uint32_t> caps, bool capability_after_memory_model = false) {
  std::vector<uint32_t> w{0x07230203u, 0x00010600u, 0, 100, 0};
  auto cap = [&](uint32_t c) {
    w.push_back(2u << 16 | 17u);
    w.push_back(c);
  };
  if (!capability_after_memory_model)
    for (uint32_t c : caps) cap(c);
  w.push_back(3u << 16 | 14u);  // OpMemoryModel Logical GLSL450
  w.push_back(0);
  w.push_back(1);
  if (capability_after_memory_model)
    for (uint32_t c : caps) cap(c);
  return w;
}

TEST(ValidationFilter, OnlyModulesDeclaringCooperativeMatrixKhr) {
  EXPECT_TRUE(declares_coopmat_khr(module_with({1, 6022})));   // Shader, CooperativeMatrixKHR
  EXPECT_FALSE(declares_coopmat_khr(module_with({1, 5357})));  // CooperativeMatrixNV: the layer knows it
  EXPECT_FALSE(declares_coopmat_khr(module_with({1})));
  EXPECT_FALSE(
      declares_coopmat_khr(module_with({6022}, true)));     // a 6022 word outside the capability section
  EXPECT_FALSE(declares_coopmat_khr({0x07230203u, 0, 0}));  // truncated
  EXPECT_FALSE(declares_coopmat_khr({}));
}

TEST(ValidationFilter, OnlyTheThreeKnownMessages) {
  EXPECT_TRUE(is_coopmat_khr_layer_limit("VUID-VkShaderModuleCreateInfo-pCode-01090", "any text"));
  EXPECT_TRUE(is_coopmat_khr_layer_limit("VUID-VkShaderModuleCreateInfo-pCode-04146", "any text"));
  EXPECT_TRUE(is_coopmat_khr_layer_limit("UNASSIGNED-CoreValidation-Shader-InconsistentSpirv",
                                         "SPIR-V module not valid: Invalid capability operand: 6022"));
  EXPECT_FALSE(is_coopmat_khr_layer_limit("UNASSIGNED-CoreValidation-Shader-InconsistentSpirv",
                                          "SPIR-V module not valid: Invalid capability operand: 5357"));
  EXPECT_FALSE(is_coopmat_khr_layer_limit("VUID-VkShaderModuleCreateInfo-pCode-08737", "any text"));
  EXPECT_FALSE(is_coopmat_khr_layer_limit("VUID-vkCmdDispatch-None-02699", "descriptor not updated"));
  EXPECT_FALSE(is_coopmat_khr_layer_limit(nullptr, nullptr));
}

// At vkCreateDevice, the messages of a layer that says it does not know the cooperative-matrix extensions (as
// Debian's 1.3.239 said on the H200), and nothing else.
TEST(ValidationFilter, DeviceCreationOnlyTheLayersOwnWordOnCoopMatExtensions) {
  EXPECT_TRUE(is_coopmat_device_layer_limit("VUID-VkDeviceCreateInfo-pNext-pNext",
                                            "vkCreateDevice: pCreateInfo->pNext chain includes a structure "
                                            "with unknown VkStructureType (1000506000); ..."));
  EXPECT_TRUE(is_coopmat_device_layer_limit("VUID-VkDeviceCreateInfo-pNext-pNext",
                                            "vkCreateDevice: pCreateInfo->pNext chain includes a structure "
                                            "with unknown VkStructureType (1000593000); ..."));
  EXPECT_TRUE(is_coopmat_device_layer_limit(
      "VUID_Undefined",
      "Device Extension VK_KHR_cooperative_matrix is not supported by this layer.  Using ..."));
  EXPECT_TRUE(is_coopmat_device_layer_limit(
      "VUID_Undefined",
      "Device Extension VK_NV_cooperative_matrix2 is not supported by this layer.  Using ..."));
  // Another unknown structure, another extension, or another complaint about the chain stays fatal.
  EXPECT_FALSE(is_coopmat_device_layer_limit("VUID-VkDeviceCreateInfo-pNext-pNext",
                                             "vkCreateDevice: pCreateInfo->pNext chain includes a structure "
                                             "with unknown VkStructureType (1000491000); ..."));
  EXPECT_FALSE(is_coopmat_device_layer_limit(
      "VUID_Undefined",
      "Device Extension VK_NV_cooperative_vector is not supported by this layer.  Using ..."));
  EXPECT_FALSE(is_coopmat_device_layer_limit(
      "VUID_Undefined", "Device Extension VK_KHR_cooperative_matrix2 is not supported by this layer."));
  EXPECT_FALSE(is_coopmat_device_layer_limit("VUID-VkDeviceCreateInfo-pNext-pNext",
                                             "duplicate structure (1000506000)"));
  EXPECT_FALSE(is_coopmat_device_layer_limit(nullptr, nullptr));
}

}  // namespace
