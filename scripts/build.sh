#!/usr/bin/env bash
# Configures and builds meganeura (Release) into ./build; all executables land in build/bin/, the Python
# module in build/python/.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# The Python module needs nanobind (scripts/install-oracles.sh, which scripts/test.sh runs first); a machine
# without it (the device) builds everything else.
python=OFF
if python3 -c "import nanobind" 2>/dev/null; then python=ON; fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} -DMEGANEURA_PYTHON=$python >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" "$@"
