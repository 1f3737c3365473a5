#!/usr/bin/env bash
# Runs every libFuzzer target (ASan + UBSan, staged by scripts/device/stage-fuzz.sh into .fuzz/fuzz.tar.xz)
# at once over the device machine's cores for SECONDS (default 480, so a call stays under 9 minutes with
# unpacking and the summary), then prints one line per target: executions, crashes, workers. Any crash,
# leak, timeout or out-of-memory input goes to $OUT/crashes/NAME/ with the worker logs that report it; the
# corpus each target grew goes to $OUT/corpus.tar.xz (bring it back into build-fuzz/corpus/ for a head
# start next time). Run from the project root:
#   scripts/device/fuzz.sh [SECONDS]          carry [".fuzz"], timeout_s 570
# Workers per target (WORKERS below) follow the rates measured on the 2-core machine (docs/reliability.md,
# ## Fuzzing): slower targets get more cores, so each gets roughly its share of the 10 M executions.
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
# name:workers, 16 in all (the machine has 16 cores); a target missing here gets 1.
WORKERS=${WORKERS:-"idx:1 checkpoint:1 spirv_cache:1 tune_cache:1 graph:2 gguf:1 gguf_model:2 safetensors:1 hf_config:2 tokenizer:2 onnx:2"}
workers_of() {
  local w
  for w in $WORKERS; do [ "${w%%:*}" = "$1" ] && { echo "${w#*:}"; return; }; done
  echo 1
}
echo "fuzz: $(nproc) cores, ${T} s per worker, $(ls "$work/bin" | wc -l) targets"
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
printf '%-12s %14s %8s %8s %s\n' target executions crashes workers "exec/s (all workers)"
for d in "$work"/run/*; do
  name=$(basename "$d")
  execs=$(cat "$d"/fuzz-*.log 2>/dev/null | awk '/stat::number_of_executed_units/ {s += $2} END {print s + 0}')
  crashes=$(find "$d/artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  # A worker that died without an artifact (a sanitizer abort outside an input) still shows in its log.
  deaths=$(grep -l -E '^==[0-9]+==ERROR|deadly signal|runtime error:' "$d"/fuzz-*.log 2>/dev/null | wc -l)
  [ "$crashes" -lt "$deaths" ] && crashes=$deaths
  printf '%-12s %14s %8s %8s %s\n' "$name" "$execs" "$crashes" "$(workers_of "$name")" "$((execs / T))"
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
