#!/usr/bin/env bash
# f16 cooperative matmul tile sweep (issue 7): the cooperative correctness tests, bench_matmul over TILES with
# the driver's register counts, and torch.mm f16 in the same call. From the project root on the GPU machine:
#   run(command: "source .gl/prelude.sh && TILES=... bash experiments/scripts/coop_sweep.sh",
#       carry: [".gl", "build/bin/bench_matmul", "build/bin/meganeura_tests_gpu"])
# TILES / LAYOUTS / SIZES / TESTS (a gtest filter, or "none") override the defaults. Raw output goes to $OUT.
set -uo pipefail
out=${OUT:-/tmp/coop-out}
mkdir -p "$out"
bin=${BIN:-build/bin}
export MEGANEURA_CACHE_DIR=off PYTHONUNBUFFERED=1
tiles=${TILES:-128x256x32/2x4/g4/s1,128x128x32/2x4,128x128x32/4x4/d2,128x256x32/4x4/g4/s1/d2}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv 2>&1 | tee "$out/gpu.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 500 > "$out/smi.txt" 2>&1 &
smi=$!
if [ "${TESTS:-}" != none ]; then
  "$bin/meganeura_tests_gpu" --gtest_filter="${TESTS:-MatmulTiers*:CoopMatRewrite*}" > "$out/tests.txt" 2>&1
  echo "gpu tests exit $?"
  grep -E '^\[  (PASSED|FAILED)|FAILED|Failure' "$out/tests.txt" | head -20
fi
for n in ${SIZES:-8192 4096}; do
  w=150; [ "$n" -lt 8192 ] && w=800
  "$bin/bench_matmul" --no-probe --sizes "$n" --tiers coopmat-khr --layouts "${LAYOUTS:-nn}" --tiles "$tiles" --iters 20 --warmup $w
done 2>&1 | tee "$out/sweep.jsonl" | python3 -c '
import json, sys
for line in sys.stdin:
    try: r = json.loads(line)
    except ValueError: print(line.strip()); continue
    st = r.get("stats", {})
    regs = next((v for k, v in st.items() if "egister" in k), "?")
    print(r.get("m"), r.get("layout"), r.get("variant"), "regs", regs, "median", r.get("tflops_median"), "best", r.get("tflops_best"), "ok", r.get("correct"), r.get("error", "")[:200])
'
python3 scripts/device/matmul_torch.py --sizes "$(echo ${SIZES:-8192 4096} | tr ' ' ,)" --dtypes f16 --layouts "${LAYOUTS:-nn}" --iters 20 --warmup 10 2>&1 | tee "$out/torch.jsonl"
kill $smi 2>/dev/null
