#!/usr/bin/env bash
# Issue 29's comparison in one device call: bench_llm (SmolLM2-135M configuration from nn layers: forward, one
# token, Adam step; batch 1 and 8, sequence 128 and 512, F32 and Mixed16) and llm_torch.py (the same model in
# PyTorch, eager and torch.compile), then the side-by-side table (llm_table.py). From a folder holding bin/
# (Release bench_llm) and these scripts:
#   run(command: "source .gl/prelude.sh && cd build-dev && bash scripts/device/llm.sh", carry: [".gl", "build-dev"])
# Raw JSON lines and logs go to $OUT; QUICK=1 is a smoke test (one layer, batch 1, sequence 16; no torch without CUDA).
# Extra arguments for both sides: LLM_ARGS (e.g. "--batches 1 --seqs 128").
set -uo pipefail
out=${OUT:-/tmp/llm-out}
mkdir -p "$out"
here=$(dirname "$0")
bin=${BIN:-bin}
export PYTHONUNBUFFERED=1
args=${LLM_ARGS:-}
[ -n "${QUICK:-}" ] && args="--layers 1 --batches 1 --seqs 16 --steps 2 --warmup 1 $args"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee "$out/gpu.txt"
MEGANEURA_GPU_TIMING=1 "$bin/bench_llm" $args 2> "$out/vulkan.log" | tee "$out/vulkan.jsonl"
echo "bench_llm exit ${PIPESTATUS[0]}"
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  python3 "$here/llm_torch.py" $args 2> "$out/torch.log" | tee "$out/torch.jsonl"
  echo "llm_torch exit ${PIPESTATUS[0]}"
else
  echo "no CUDA torch: PyTorch side skipped" | tee "$out/torch.log"
  : > "$out/torch.jsonl"
fi
python3 "$here/llm_table.py" "$out/vulkan.jsonl" "$out/torch.jsonl" | tee "$out/table.md"
