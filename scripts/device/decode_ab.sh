#!/usr/bin/env bash
# Before/after of a decode change in one device call: `bench_decode --profile` (per-family times of a decode
# step) and `bench_gguf run` (the real SmolLM2 file's shapes and types, random weights) for two sets of
# stripped binaries A/ and B/ (each bench_decode and bench_gguf) packed in .bench/bin.tar.xz, alternated
# A B A B so that clock drift hits both; llama.cpp's Vulkan build on the same files once a round.
#   here:  strip both sides' binaries into A/ and B/, tar -C .bench -cf - A B | xz -9e -T2 > .bench/bin.tar.xz;
#          scripts/device/stage-llamacpp.sh (.llama)
#   there: run(command: "source .gl/prelude.sh && bash scripts/device/decode_ab.sh", carry: [".gl", ".llama", ".bench"])
# SIDES (default "A B"), DTYPES (bench_decode), TYPES (bench_gguf: original = the real file's Q4_1/Q8_0 mix, Q8_0, F16), ROUNDS.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/decode-ab}
w=/tmp/meganeura-ab
rm -rf "$w" && mkdir -p "$w/llama" "$out" && tar -C "$w" -xJf .bench/bin.tar.xz && tar -C "$w/llama" -xJf .llama/llama.tar.xz
export MEGANEURA_CACHE_DIR=$w/cache
dtypes=${DTYPES:-q4_1 f16} types=${TYPES:-original F16} rounds=${ROUNDS:-2}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | tee "$out/gpu.txt"
for t in $types; do
  name=$([ "$t" = original ] && echo Q4_1 || echo "$t")
  "$w/llama/bench_gguf" synth "$w/llama/smollm2.skeleton.gguf" "$w/smollm2-$name.gguf" "$t" >/dev/null
done
for round in $(seq "$rounds"); do
  for side in ${SIDES:-A B}; do
    for dt in $dtypes; do
      echo "== round $round $side decode $dt"
      "$w/$side/bench_decode" --dtype "$dt" --steps 64 --batches 1,16 --profile 2>&1 | tail -n 40
    done
    for t in $types; do
      name=$([ "$t" = original ] && echo Q4_1 || echo "$t")
      echo "== round $round $side gguf $name"
      MEGANEURA_PRECISION=mixed16 "$w/$side/bench_gguf" run "$w/smollm2-$name.gguf" --pp 512 --tg 128 --reps 3 2>&1 | grep '"bench"'
    done
  done
  for t in $types; do
    name=$([ "$t" = original ] && echo Q4_1 || echo "$t")
    echo "== round $round llama.cpp $name"
    "$w/llama/llamacpp_oracle" "$w/llama/bins" bench "$w/smollm2-$name.gguf" 512 128 3 2>/dev/null | grep -E '^(pp|tg) '
  done
done 2>&1 | tee "$out/decode_ab.log"
