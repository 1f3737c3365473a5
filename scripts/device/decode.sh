#!/usr/bin/env bash
# Issue 22 item 8 in one device call: bench_decode (SmolLM2-135M configuration, random weights: prefill of a
# 128-token prompt, decode at batch 1 and 16, dispatches a step) in f32, f16, q8_0 and q4_1, and
# decode_torch.py (transformers LlamaForCausalLM, same config: eager and static cache + torch.compile) in
# float32 and float16, then the side-by-side table (decode_table.py). Staging, from the project root here:
#   scripts/device/stage-loader.sh                       # .gl: the Vulkan loader and glvnd for the NVIDIA ICD
#   scripts/build.sh --target bench_decode               # Release (static libstdc++, shaderc combined)
#   grep -qx '/.stage/' .git/info/exclude || echo '/.stage/' >> .git/info/exclude
#   mkdir -p .stage/bin && strip -o .stage/bin/bench_decode build/bin/bench_decode    # about 11 MB
# there:
#   run(command: "source .gl/prelude.sh && BIN=.stage/bin bash scripts/device/decode.sh",
#       carry: [".gl", ".stage"], timeout_s: 600)
# If it runs past 600 s, split it: TORCH_DTYPES=float32 in one call, DTYPES= TORCH_DTYPES=float16 in the next.
# Raw JSON lines and logs go to $OUT; DTYPES / TORCH_DTYPES / DECODE_ARGS narrow or extend a run; PRECISIONS
# (default "f32") runs every dtype under each SessionConfig precision (mixed16 rows are labelled
# "f16/mixed16": prefill products over 16-bit and quantized weights then take the f16 copy and the
# cooperative tier, kernels::kMinStagedLoadMacs); QUICK=1 is a
# lavapipe smoke test (bench_decode --tiny, 2 steps; no torch without CUDA).
set -uo pipefail
out=${OUT:-/tmp/decode-out}
mkdir -p "$out"
here=$(dirname "$0")
bin=${BIN:-build/bin}
export PYTHONUNBUFFERED=1
dtypes=${DTYPES-f32 f16 q8_0 q4_1}
torch_dtypes=${TORCH_DTYPES-float32 float16}
args=${DECODE_ARGS:---steps 64}
[ -n "${QUICK:-}" ] && args="--tiny --steps 2 --prompt 8 --context 64 --batches 1,2"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee "$out/gpu.txt"
: > "$out/vulkan.jsonl"
for prec in ${PRECISIONS:-f32}; do
  for dt in $dtypes; do
    # --profile for f32 and f16 (each dispatch of a prefill and a decode step timed alone: the per-family
    # tables of performance.md)
    prof=""
    case "$dt" in f32 | f16) prof="--profile" ;; esac
    MEGANEURA_PRECISION=$prec "$bin/bench_decode" --dtype "$dt" $prof $args 2>> "$out/vulkan.log" |
      tee -a "$out/vulkan.jsonl"
    echo "bench_decode $dt $prec exit ${PIPESTATUS[0]}"
  done
done
: > "$out/torch.jsonl"
if [ -z "${QUICK:-}" ] && python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  for dt in $torch_dtypes; do
    python3 "$here/decode_torch.py" --dtype "$dt" --steps 64 2>> "$out/torch.log" | tee -a "$out/torch.jsonl"
    echo "decode_torch $dt exit ${PIPESTATUS[0]}"
  done
else
  echo "no CUDA torch (or QUICK): PyTorch side skipped" | tee "$out/torch.log"
fi
python3 "$here/decode_table.py" "$out/vulkan.jsonl" "$out/torch.jsonl" | tee "$out/table.md"
