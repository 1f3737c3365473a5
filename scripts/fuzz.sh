#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-16, ASan + UBSan) into build-fuzz/ and runs them.
#   scripts/fuzz.sh                       every target for 60 s each
#   scripts/fuzz.sh -max_total_time=30    every target for 30 s each (what scripts/test.sh runs, FUZZ_SECONDS)
#   scripts/fuzz.sh idx -runs=10000000    one target with libFuzzer flags of your own
#   FUZZ_BUILD_ONLY=1 scripts/fuzz.sh     build every target, run none (scripts/device/stage-fuzz.sh)
# Each target starts from fuzz/corpus/<name>/ (seeds, committed) and keeps what it finds in
# build-fuzz/corpus/<name>/ (not committed). A crash leaves crash-* in build-fuzz/ and fails the script:
# turn it into a regression test before fixing it.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
# -O1 and line tables only (libFuzzer's documentation suggests -O1 or -O2 with -g): sanitizer reports still
# name file and line, while the build and the binaries are lighter than with -O2 -g (docs/reliability.md).
flags="-O1 -gline-tables-only -DNDEBUG"
CC=clang-16 CXX=clang++-16 cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$flags" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$flags" \
  -DMEGANEURA_FUZZ=ON -DMEGANEURA_TESTS=OFF -DMEGANEURA_BENCH=OFF >/dev/null
targets=()
if [ $# -ge 1 ] && [[ "$1" != -* ]]; then
  targets=("fuzz_$1"); shift
else
  for f in fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${targets[@]}"
[ "${FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(-max_total_time=60)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  mkdir -p "$BUILD_DIR/corpus/$name" "fuzz/corpus/$name"
  echo "fuzz: $t ${flags[*]}"
  (cd "$BUILD_DIR" && "./bin/$t" "${flags[@]}" -print_final_stats=1 "corpus/$name" "../fuzz/corpus/$name" 2>&1 | tail -n 15)
done
