#!/usr/bin/env bash
# Runs every libFuzzer target (ASan + UBSan, staged by scripts/device/stage-fuzz.sh into .fuzz/fuzz.tar.xz)
# at once over the device machine's cores for SECONDS (default 480, so a call stays under 9 minutes with
# unpacking and the summary), then prints one line per target: executions, crashes, workers. Any crash,
# leak, timeout or out-of-memory input goes to $OUT/crashes/NAME/ with the worker logs that report it; the
# corpus each target grew goes to $OUT/corpus.tar.xz (bring it back into build-fuzz/corpus/ for a head
# start next time). Run from the project root:
#   scripts/device/fuzz.sh [SECONDS]          carry [".fuzz"], timeout_s 570
# At the rates measured here (RATES below), one 480 s call on 16 cores gives each target 0.74 M (graph) to
# 29 M (spirv_cache) executions, at least 1 M for all but graph and tokenizer; on 128 cores (kind
# nvidia-h100-x8) 9.1 M to 10.4 M each (spirv_cache 29 M). The "expected" column prints that estimate.
set -uo pipefail
cd "$(dirname "$0")/../.."
T=${1:-480}
OUT=${OUT:-/tmp/fuzz-out}
work=/tmp/meganeura-fuzz
rm -rf "$work" && mkdir -p "$work" "$OUT"
tar -C "$work" -xJf .fuzz/fuzz.tar.xz || { echo "fuzz: no .fuzz/fuzz.tar.xz (run scripts/device/stage-fuzz.sh and carry .fuzz)"; exit 1; }
export LD_LIBRARY_PATH="$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# Executions a second of one worker, measured on the shared 2-core machine (15 s a target, nice 10, load
# ~15; 2026-12-05, docs/reliability.md). Workers go to targets in proportion to 1/rate, so that every
# target reaches about the same number of executions: the fast ones get one core, the slow ones the rest.
RATES=${RATES:-"idx:7177 checkpoint:2697 spirv_cache:61384 tune_cache:3024 graph:774 gguf:2103 gguf_model:1270 safetensors:3233 hf_config:2593 tokenizer:497 onnx:3037 nnef:1658"}
cores=${CORES:-$(nproc)}
names=$(ls "$work/bin" | sed 's/^fuzz_//')
# name workers: at least one each, then every remaining core to the target furthest behind (need / workers).
WORKERS=$(for n in $names; do
  r=$(for x in $RATES; do [ "${x%%:*}" = "$n" ] && echo "${x#*:}"; done)
  echo "$n ${r:-1000}"
done | awk -v cores="$cores" '
  { name[NR] = $1; need[NR] = 1 / $2; w[NR] = 1 }
  END {
    for (left = cores - NR; left > 0; --left) {
      best = 1
      for (i = 2; i <= NR; ++i) if (need[i] / w[i] > need[best] / w[best]) best = i
      ++w[best]
    }
    for (i = 1; i <= NR; ++i) printf "%s:%d ", name[i], w[i]
  }')
workers_of() {
  local w
  for w in $WORKERS; do [ "${w%%:*}" = "$1" ] && { echo "${w#*:}"; return; }; done
  echo 1
}
echo "fuzz: $cores cores, ${T} s per worker, workers: $WORKERS"
for b in "$work"/bin/fuzz_*; do
  name=$(basename "$b"); name=${name#fuzz_}
  n=$(workers_of "$name")
  d="$work/run/$name"
  mkdir -p "$d/corpus" "$d/artifacts"
  [ -d "$work/corpus/$name" ] && cp -r "$work/corpus/$name/." "$d/corpus/"
  [ -d "fuzz/corpus/$name" ] && cp -r "fuzz/corpus/$name/." "$d/corpus/"
  # -jobs = -workers: n independent fuzzers sharing one corpus directory, each bounded by -max_total_time;
  # each writes fuzz-<job>.log in $d with its final statistics.
  (cd "$d" && "$b" -jobs="$n" -workers="$n" -max_total_time="$T" -timeout=30 -rss_limit_mb=4096 \
      -print_final_stats=1 -artifact_prefix="$d/artifacts/" corpus >/dev/null 2>&1) &
done
wait
status=0
printf '%-12s %12s %8s %8s %12s %s\n' target executions crashes workers expected "exec/s (all workers)"
for d in "$work"/run/*; do
  name=$(basename "$d")
  execs=$(cat "$d"/fuzz-*.log 2>/dev/null | awk '/stat::number_of_executed_units/ {s += $2} END {print s + 0}')
  crashes=$(find "$d/artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  # A worker that died without an artifact (a sanitizer abort outside an input) still shows in its log.
  deaths=$(grep -l -E '^==[0-9]+==ERROR|deadly signal|runtime error:' "$d"/fuzz-*.log 2>/dev/null | wc -l)
  [ "$crashes" -lt "$deaths" ] && crashes=$deaths
  r=$(for x in $RATES; do [ "${x%%:*}" = "$name" ] && echo "${x#*:}"; done)
  printf '%-12s %12s %8s %8s %12s %s\n' "$name" "$execs" "$crashes" "$(workers_of "$name")" \
    "$(( ${r:-0} * $(workers_of "$name") * T ))" "$((execs / T))"
  if [ "$crashes" -gt 0 ]; then
    status=1
    mkdir -p "$OUT/crashes/$name"
    cp "$d"/artifacts/* "$OUT/crashes/$name/" 2>/dev/null
    for l in $(grep -l -E '^==[0-9]+==ERROR|deadly signal|runtime error:' "$d"/fuzz-*.log); do
      tail -c 20000 "$l" > "$OUT/crashes/$name/$(basename "$l")"
    done
    grep -h -m3 -E 'ERROR: |runtime error:|SUMMARY' "$d"/fuzz-*.log | head -n 6 | sed 's/^/    /'
  fi
done
(cd "$work/run" && tar -cf - */corpus | xz -T0 -6 > "$OUT/corpus.tar.xz")
echo "fuzz: corpus.tar.xz $(($(stat -c %s "$OUT/corpus.tar.xz") / 1024)) KiB in \$OUT"
exit $status
