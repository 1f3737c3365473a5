#!/usr/bin/env bash
# Data-parallel scaling (issue 27, item 5): a training step of SmolLM2-135M's configuration (sequence 512, batch 8 per
# GPU, AdamW) on 1 and 2 ranks, each on its own GPU, with throughput, all-reduce time and how much of it hid behind
# backward. On a 2-GPU machine (kind nvidia-h200-x2), from the project root, after scripts/device/stage-loader.sh and
# scripts/device/stage-mpi.sh ran here:
#   run(kind: "nvidia-h200-x2",
#       command: "source .gl/prelude.sh && source .mpi/prelude.sh && bash scripts/device/mpi-scaling.sh",
#       carry: [".gl", ".mpi", "build/bin/train_lm", "build/bin/meganeura"])
# Env: STEPS (default 30), WARMUP (5), PRECISION (f32; mixed16 too), ORDER (ranked|mpi), BUCKET_BYTES (25 MiB).
set -euo pipefail
out=${OUT:-.}
steps=${STEPS:-30}
warmup=${WARMUP:-5}
export MEGANEURA_REDUCE_ORDER=${ORDER:-ranked}
[ -n "${BUCKET_BYTES:-}" ] && export MEGANEURA_BUCKET_BYTES=$BUCKET_BYTES
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
./build/bin/meganeura info | head -3 || true
nvidia-smi topo -m 2>/dev/null | head -5 || true
args=(--smollm2 --seq 512 --batch 8 --steps "$steps" --warmup "$warmup" --precision "${PRECISION:-f32}" --json)
for np in 1 2; do
  # --bind-to none: each rank drives a GPU from one host thread; binding to a core would only add contention.
  mpirun --bind-to none -np $np ./build/bin/train_lm --distributed "${args[@]}" | tee "$out/mpi_np$np.json"
done
python3 - "$out" <<'PY'
import json, sys
one = json.loads(open(f"{sys.argv[1]}/mpi_np1.json").read().strip().splitlines()[-1])
two = json.loads(open(f"{sys.argv[1]}/mpi_np2.json").read().strip().splitlines()[-1])
ratio = two["tokens_per_s"] / one["tokens_per_s"]
print(f"1 rank: {one['tokens_per_s']:.0f} tokens/s ({one['step_ms']:.1f} ms a step)")
print(f"2 ranks: {two['tokens_per_s']:.0f} tokens/s ({two['step_ms']:.1f} ms a step): {ratio:.2f}x (target 1.8x)")
print(f"all-reduce of {two['gradient_mib']:.0f} MiB in {two['buckets']} buckets: {two['allreduce_ms']:.1f} ms in flight, "
      f"{two['exposed_ms']:.1f} ms exposed after backward ({100 * two['hidden_fraction']:.0f}% hidden), "
      f"backward until the last bucket {two['backward_ms']:.1f} ms")
PY
