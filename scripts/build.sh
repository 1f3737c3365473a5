#!/usr/bin/env bash
# Configures and builds meganeura (Release) into ./build; all executables land in build/bin/.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" "$@"
