#!/usr/bin/env bash
# Installs the pinned light test oracles (scripts/requirements-oracle.txt) from PyPI for `python3` on PATH.
# Idempotent: pip skips what is already installed at the pinned version.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if "$PY" - <<'PYEOF' 2>/dev/null; then exit 0; fi
import sys
from importlib.metadata import version
for line in open("scripts/requirements-oracle.txt"):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, want = line.split("==")
    if version(name) != want:
        sys.exit(1)
if version("cffconvert") != "2.0.0":
    sys.exit(1)
PYEOF
echo "install-oracles: installing scripts/requirements-oracle.txt"
"$PY" -m pip install -q --disable-pip-version-check -r scripts/requirements-oracle.txt
# Only for the CFF 1.2.0 schema file it ships (scripts/check-citation.py validates with jsonschema 4): its own
# pin of jsonschema < 4 would downgrade the one above, so it comes without dependencies.
"$PY" -m pip install -q --disable-pip-version-check --no-deps cffconvert==2.0.0
