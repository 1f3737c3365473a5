#!/usr/bin/env bash
# Configures and builds meganeura (Release) into ./build; all executables land in build/bin/, the Python
# module in build/python/ (nanobind from scripts/requirements-oracle.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} -DMEGANEURA_PYTHON=ON >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" "$@"
