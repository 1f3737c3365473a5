#!/usr/bin/env bash
# Issue 7's whole comparison in one device call: our benchmarks and PyTorch's equivalents side by side, then the
# ratio table (scripts/device/bench_table.py). On the GPU machine, from a folder holding bin/ (Release binaries:
# meganeura_tests_gpu, bench_matmul, bench_bandwidth, bench_step, mnist), data/fashion-mnist and these scripts:
#   run(command: "source .gl/prelude.sh && cd build-dev && bash scripts/bench_all.sh",
#       carry: [".gl", "build-dev"])
# Everything goes to $OUT (raw JSON lines, logs, table.md). QUICK=1 shrinks it to a smoke test (lavapipe).
set -uo pipefail
out=${OUT:-/tmp/bench-out}
mkdir -p "$out"
here=$(dirname "$0")
bin=${BIN:-bin}
export MEGANEURA_CACHE_DIR=off PYTHONUNBUFFERED=1
if [ -n "${QUICK:-}" ]; then
  sizes=256; mm="--sizes 256 --iters 3 --warmup 1"; st="--steps 20 --gpu-steps 5 --warmup 5 --mib 4"; bw="--mib 4 --iters 3"
  tests='SessionMatmul*'
else
  sizes=1024,4096,8192; mm="--sizes $sizes --iters 20 --warmup 300"; st=""; bw="--mib 256,1024"
  tests='MatmulTiers*:CoopMatRewrite*:SessionMatmul*:Session_*'
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv 2>&1 | tee "$out/gpu.txt"
"$bin/meganeura_tests_gpu" --gtest_filter="$tests" > "$out/tests.txt" 2>&1; echo "gpu tests exit $?"
grep -E '^\[  (PASSED|FAILED)|FAILED' "$out/tests.txt" | head -20
{
  "$bin/bench_matmul" $mm --tiers scalar,coopmat-nv,coopmat-khr
  "$bin/bench_matmul" $mm --no-probe --tiers coopmat-nv --mixed16
  [ -z "${QUICK:-}" ] && "$bin/bench_mma_peak"
  "$bin/bench_bandwidth" $bw
  "$bin/bench_step" $st
} 2>&1 | tee "$out/vulkan.jsonl"
if [ -d data/fashion-mnist ]; then
  for opt in adam sgd; do
    lr=0.001; [ $opt = sgd ] && lr=0.1
    "$bin/mnist" --data data/fashion-mnist --epochs 1 --optimizer $opt --lr $lr --json 2>&1 | tail -1 |
      sed "s/^{/{\"bench\":\"vk_epoch\",\"optimizer\":\"$opt\",/" | tee -a "$out/vulkan.jsonl"
  done
fi
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  {
    python3 "$here/matmul_torch.py" --sizes "$sizes" --iters 20
    python3 "$here/bench_torch.py" $( [ -n "${QUICK:-}" ] && echo "--steps 20 --mib 4" )
    [ -d data/fashion-mnist ] && python3 "$here/mlp_torch.py" data/fashion-mnist
  } 2>&1 | tee "$out/torch.jsonl"
else
  echo "no CUDA torch here: the table has our side only" | tee "$out/torch.jsonl"
fi
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv 2>&1 | tee -a "$out/gpu.txt"
python3 "$here/bench_table.py" "$out/vulkan.jsonl" "$out/torch.jsonl" | tee "$out/table.md"
