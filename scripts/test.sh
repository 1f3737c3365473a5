#!/usr/bin/env bash
# Installs dependencies, builds, and runs the whole test suite (CPU and GPU tiers; GPU on lavapipe when no
# hardware device is present). GPU tests run with the Khronos validation layer on.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/install-oracles.sh
scripts/build.sh
export MEGANEURA_VALIDATION=${MEGANEURA_VALIDATION:-1}
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
