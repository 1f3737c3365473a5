#!/usr/bin/env bash
# Cooperative-matrix tile sweep on the GPU machine, with torch beside it (issue 7 tuning). Run like matmul.sh.
set -uo pipefail
out=${OUT:-.}
bin=${BIN:-build-E/bin}
here=$(dirname "$0")
export MEGANEURA_CACHE_DIR=off
tiles=${TILES:-128x128x32/2x4,128x256x16/2x4,256x128x16/4x2,128x128x16/2x4,128x128x32/4x2}
{
  "$bin/bench_matmul" --no-probe --tiers coopmat-nv --layouts nn,tn,nt --sizes 4096 --tiles "$tiles"
  "$bin/bench_matmul" --no-probe --tiers coopmat-nv,coopmat-khr --sizes 1024,8192 --tiles "$tiles"
  "$bin/bench_matmul" --no-probe --tiers coopmat-nv --sizes 8192 --tiles "$tiles" --optimize
  "$bin/bench_matmul" --no-probe --tiers scalar --sizes 1024,4096,8192
} 2>&1 | tee "$out/tune_vulkan.jsonl"
python3 "$here/matmul_torch.py" --sizes 1024,4096,8192 --layouts nn,tn,nt 2>&1 | tee "$out/tune_torch.jsonl"
python3 "$here/matmul_table.py" "$out/tune_vulkan.jsonl" "$out/tune_torch.jsonl" | tee "$out/tune_table.md"
