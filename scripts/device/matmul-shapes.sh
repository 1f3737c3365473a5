#!/usr/bin/env bash
# Issue 29 item 2 / issue 22 item 9 in one device call: SmolLM2-135M's matmul shapes (bench_matmul --shapes
# smollm2: GEMV at M = 1, 4, 8 in both weight layouts; M = 128, 512, 2048 forward, input gradient and weight
# gradient against N, K = 192 .. 1536 and the 49152-wide head) timed
#   1. as sessions take them (tier auto, choose_variant's pick), F32 and Mixed16;
#   2. every candidate variant (kernels::matmul_candidates: each tier, scalar tile, split) at M = 128 and 2048, F32 and
#      Mixed16, "rule": true on the pick, so that the selection rule is checked against the fastest;
#   3. torch (cuBLAS) on the same shapes, f32 with TF32 off and f16;
# then the side-by-side tables (matmul_table.py). Each of our rows is spot-checked against double-precision
# dot products ("correct"). From the project root, after scripts/device/stage-loader.sh and a Release build:
#   run(command: "source .gl/prelude.sh && bash scripts/device/matmul-shapes.sh",
#       carry: [".gl", "build/bin/bench_matmul"])
# BIN overrides the binaries' folder; QUICK=1 runs the M = 128 rows of step 1 only (a smoke test here on lavapipe:
# QUICK=1 BIN=build/bin bash scripts/device/matmul-shapes.sh). Raw JSON lines go to $OUT, and all of them in one
# archive, $OUT/raw.tar.xz (a device call returns few files). Step 2 over every M >= 128 shape in both dtypes ran
# past one call's 600 s: split such runs over calls (bench_matmul --shapes a,b,... --candidates).
set -uo pipefail
out=${OUT:-/tmp/matmul-shapes-out}
mkdir -p "$out"
bin=${BIN:-build/bin}
here=$(dirname "$0")
export MEGANEURA_CACHE_DIR=off PYTHONUNBUFFERED=1
iters=${ITERS:-50}
warmup=${WARMUP:-300}  # the H200 idles its SM clock between bursts: warm up in the same command buffer
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee "$out/gpu.txt"
if [ -n "${QUICK:-}" ]; then
  "$bin/bench_matmul" --shapes 128x576x576:nn,128x1536x576:nn,576x576x128:tn,4x576x576:nn,4x576x576:nt \
    --tiers auto --iters 3 --warmup 1 | tee "$out/auto_f32.jsonl"
  "$bin/bench_matmul" --shapes 128x576x576:nn --candidates --iters 2 --warmup 1 --no-probe | tee "$out/cand_f32.jsonl"
  exit 0
fi
"$bin/bench_matmul" --shapes smollm2 --tiers auto --iters "$iters" --warmup "$warmup" 2> "$out/auto_f32.log" | tee "$out/auto_f32.jsonl"
"$bin/bench_matmul" --shapes smollm2 --tiers auto --mixed16 --iters "$iters" --warmup "$warmup" 2> "$out/auto_mixed16.log" |
  tee "$out/auto_mixed16.jsonl"
m128="128x576x576:nn,128x192x576:nn,128x1536x576:nn,128x576x1536:nn,128x576x576:nt,128x576x1536:nt"
m128="$m128,576x576x128:tn,576x1536x128:tn,1536x576x128:tn,128x49152x576:nt,128x576x49152:nn,49152x576x128:tn"
# Batch 16 prefill's products (M = 2048): the gate/up product at 2048x1536x576 ran 2.17 ms on the 128 tile.
m128="$m128,2048x1536x576:nt,2048x576x1536:nt,2048x576x576:nt"
"$bin/bench_matmul" --shapes "$m128" --candidates --iters "$iters" --warmup "$warmup" --no-probe 2> "$out/cand_f32.log" |
  tee "$out/cand_f32.jsonl"
"$bin/bench_matmul" --shapes "$m128" --candidates --mixed16 --iters "$iters" --warmup "$warmup" 2> "$out/cand_mixed16.log" |
  tee "$out/cand_mixed16.jsonl"
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  python3 "$here/matmul_torch.py" --shapes smollm2 --iters "$iters" --warmup 50 2> "$out/torch.log" | tee "$out/torch.jsonl"
else
  echo "no CUDA torch: PyTorch side skipped" | tee "$out/torch.log"
  : > "$out/torch.jsonl"
fi
for f in auto_f32 auto_mixed16 cand_f32 cand_mixed16; do
  echo "## $f"
  python3 "$here/matmul_table.py" "$out/$f.jsonl" "$out/torch.jsonl" | tee "$out/$f.md"
done
tar -C "$out" -cJf "$out/raw.tar.xz" --exclude raw.tar.xz .
