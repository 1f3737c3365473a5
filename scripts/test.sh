#!/usr/bin/env bash
# Installs dependencies, builds, and runs the whole test suite (CPU and GPU tiers; GPU on lavapipe when no
# hardware device is present). GPU tests run with the Khronos validation layer on. Then every libFuzzer
# target (fuzz/) replays its committed corpus (fuzz/corpus/<name>/: seeds and every crash found so far) under
# ASan + UBSan: a crash fails the script. FUZZ_SECONDS=N explores for N seconds a target instead (scripts/fuzz.sh;
# not the CI default, where a new find would block an unrelated change); FUZZ_SECONDS=-1 skips the step (a machine
# without clang-16). The fuzz build (clang-16, build-fuzz/) is a second full build of the library:
# docs/reliability.md has its cost.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/install-oracles.sh
scripts/fetch-onnx-models.sh ci  # the real ONNX model CI checks (tests/oracle/test_onnx_real.cpp; docs/onnx.md)
scripts/build.sh
export MEGANEURA_VALIDATION=${MEGANEURA_VALIDATION:-1}
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
FUZZ_SECONDS=${FUZZ_SECONDS:-0}
if [ "$FUZZ_SECONDS" -gt 0 ]; then
  scripts/fuzz.sh -max_total_time="$FUZZ_SECONDS"
elif [ "$FUZZ_SECONDS" -eq 0 ]; then
  scripts/fuzz.sh -runs=0
fi
