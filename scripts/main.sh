#!/usr/bin/env bash
# Installs dependencies, builds, and runs the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
if [ -x build/bin/mnist ]; then
  exec build/bin/mnist "$@"
fi
exec build/bin/meganeura info
