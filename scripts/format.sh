#!/usr/bin/env bash
# Formats the C++ sources with .clang-format: every tracked *.cpp / *.hpp, or only the files given.
#   scripts/format.sh            # the whole tree, in place
#   scripts/format.sh --check    # lists the files that would change; exit 1 if any
#   scripts/format.sh FILE...    # these files only
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=${CLANG_FORMAT:-$(command -v clang-format-16 || command -v clang-format || true)}
if [ -z "$fmt" ]; then
  echo "format.sh: expected clang-format (apt-get install clang-format-16, or set CLANG_FORMAT)" >&2
  exit 2
fi
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
if [ $# -gt 0 ]; then files=("$@"); else mapfile -t files < <(git ls-files '*.cpp' '*.hpp'); fi
if [ $check = 1 ]; then
  bad=0
  for f in "${files[@]}"; do
    if ! "$fmt" --style=file "$f" | cmp -s - "$f"; then echo "$f"; bad=1; fi
  done
  exit $bad
fi
"$fmt" --style=file -i "${files[@]}"
