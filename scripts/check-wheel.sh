#!/usr/bin/env bash
# The Python wheel end to end (python/tests/check_wheel.py): pip wheel offline, a fresh venv, import, training.
#   scripts/check-wheel.sh                 over build/lib/libmeganeura.a (what ctest python_wheel runs; build first)
#   scripts/check-wheel.sh --from-source   the whole library compiled by scikit-build-core, as `pip wheel .` does
#                                          for a user (~20 minutes on two cores without a warm ccache)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
scripts/install-oracles.sh
if [ "${1:-}" = "--from-source" ]; then
  exec python3 python/tests/check_wheel.py --scratch "$BUILD_DIR/wheel_from_source"
fi
exec python3 python/tests/check_wheel.py --scratch "$BUILD_DIR/wheel_scratch" --library "$BUILD_DIR/lib/libmeganeura.a"
