#!/usr/bin/env bash
# Installs dependencies, builds, and runs the whole test suite (CPU and GPU tiers; GPU on lavapipe when no
# hardware device is present). GPU tests run with the Khronos validation layer on. Then every libFuzzer
# target (fuzz/) runs for FUZZ_SECONDS each (default 30; 0 skips the step, e.g. on a machine without clang-16):
# a crash fails the script. The fuzz build (clang-16, ASan + UBSan, build-fuzz/) is a second full build of the
# library: docs/reliability.md has its cost.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/install-oracles.sh
scripts/build.sh
export MEGANEURA_VALIDATION=${MEGANEURA_VALIDATION:-1}
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
if [ "$FUZZ_SECONDS" -gt 0 ]; then
  scripts/fuzz.sh -max_total_time="$FUZZ_SECONDS"
fi
