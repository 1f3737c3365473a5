#!/usr/bin/env bash
# Matmul tiers on the GPU machine, in one call: the cooperative tiers against the CPU (GPU tests), then our
# benchmark and torch's side by side, then the ratio table (issue 7). From the project root:
#   run(command: "source .gl/prelude.sh && bash scripts/device/matmul.sh",
#       carry: [".gl", "build-E/bin"])      # bin holds bench_matmul and meganeura_tests_gpu (Release)
# BIN overrides the binaries' folder; extra arguments go to bench_matmul.
set -uo pipefail
out=${OUT:-.}
bin=${BIN:-build-E/bin}
export MEGANEURA_CACHE_DIR=off
here=$(dirname "$0")
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$out/gpu.txt"
"$bin/meganeura_tests_gpu" --gtest_filter='MatmulTiers*:CoopMatRewrite*' 2>&1 | tee "$out/tests.txt" | grep -E '^\[|Failure|expected|error' | head -80
"$bin/bench_matmul" "$@" 2>&1 | tee "$out/matmul_vulkan.jsonl"
python3 "$here/matmul_torch.py" 2>&1 | tee "$out/matmul_torch.jsonl"
python3 "$here/matmul_table.py" "$out/matmul_vulkan.jsonl" "$out/matmul_torch.jsonl" | tee "$out/table.md"
