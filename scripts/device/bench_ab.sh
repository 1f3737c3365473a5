#!/usr/bin/env bash
# Before/after of a change (issue 21 item 6): bench_all's Vulkan benchmarks for two sets of Release binaries,
# alternated A B A B so clock drift hits both, then the per-measure ratio table (bench_ab.py). From a folder
# holding A/ and B/ (each with bench_matmul, bench_step, bench_bandwidth, bench_mma_peak, mnist), data/fashion-mnist
# and these scripts:
#   run(command: "source .gl/prelude.sh && cd .ab && bash scripts/bench_ab.sh", carry: [".gl", ".ab"])
# QUICK=1: small shapes (a lavapipe smoke test).
set -uo pipefail
out=${OUT:-/tmp/bench-ab}
mkdir -p "$out"
here=$(dirname "$0")
export MEGANEURA_CACHE_DIR=off
if [ -n "${QUICK:-}" ]; then
  mm="--sizes 256 --iters 3 --warmup 1"; st="--steps 20 --gpu-steps 5 --warmup 5 --mib 4"; bw="--mib 4 --iters 3"; rounds=1
else
  mm="--sizes 1024,4096,8192 --iters 20 --warmup 300"; st=""; bw="--mib 256,1024"; rounds=${ROUNDS:-2}
fi
for round in $(seq "$rounds"); do
  for side in A B; do
    bin=$side
    {
      "$bin/bench_matmul" $mm --tiers scalar,coopmat-nv,coopmat-khr
      "$bin/bench_matmul" $mm --no-probe --tiers coopmat-nv --mixed16
      [ -z "${QUICK:-}" ] && "$bin/bench_mma_peak"
      "$bin/bench_bandwidth" $bw
      "$bin/bench_step" $st
      if [ -d data/fashion-mnist ]; then
        "$bin/mnist" --data data/fashion-mnist --epochs 1 --optimizer adam --lr 0.001 --json 2>&1 | tail -1 |
          sed 's/^{/{"bench":"vk_epoch",/'
      fi
    } 2>&1 | tee -a "$out/$side.jsonl" | grep -c '^{' | sed "s/^/round $round side $side: /;s/$/ JSON lines/"
  done
done
python3 "$here/bench_ab.py" "$out/A.jsonl" "$out/B.jsonl" | tee "$out/ab.md"
