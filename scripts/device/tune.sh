#!/usr/bin/env bash
# Session::tune_with before/after on the GPU machine (issue 8 item 7) in one device call, run like bench_all.sh
# from a folder holding bin/ (Release bench_step, bench_matmul, mnist) and these scripts:
#   run(command: "source .gl/prelude.sh && cd build-dev && bash scripts/tune.sh", carry: [".gl", "build-dev"])
# Writes $OUT/tune.jsonl (gpu_ms_untuned / gpu_ms_tuned per benchmark) and $OUT/tune_reports.txt (every
# TuneReport: which variant each kernel got). The tuning cache is a fresh folder, so every run starts untuned.
# QUICK=1 shrinks it to a smoke test (lavapipe).
set -uo pipefail
out=${OUT:-/tmp/tune-out}
mkdir -p "$out"
bin=${BIN:-bin}
export MEGANEURA_CACHE_DIR=$(mktemp -d)
if [ -n "${QUICK:-}" ]; then
  st="--steps 20 --gpu-steps 5 --warmup 5 --mib 4"; mm="--sizes 128 --iters 3 --warmup 1"; limit="--limit 640"
else
  st=""; mm="--sizes 1024,4096,8192 --iters 20 --warmup 10"; limit=""
fi
{
  "$bin/bench_step" $st --tune
  "$bin/bench_matmul" $mm --no-probe --layouts nn,tn,nt --tune
  "$bin/bench_matmul" $mm --no-probe --layouts nn,tn,nt --tune --mixed16
} 2> "$out/tune_reports.txt" | tee "$out/tune.jsonl"
# A whole training run with MEGANEURA_TUNE=1: the first build tunes (and caches), the epoch runs tuned.
if [ -d data/fashion-mnist ]; then
  for tune in 0 1; do
    MEGANEURA_TUNE=$tune "$bin/mnist" --data data/fashion-mnist --epochs 1 --optimizer adam --lr 0.001 $limit --json 2>&1 |
      tail -1 | sed "s/^{/{\"bench\":\"vk_epoch\",\"tune\":$tune,/" | tee -a "$out/tune.jsonl"
  done
fi
rm -rf "$MEGANEURA_CACHE_DIR"
