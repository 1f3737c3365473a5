#!/usr/bin/env bash
# Issue 25 item 8: inference latency of real vision models imported from ONNX, batch 1 and 32, our session
# (bench_onnx: GPU timestamps and wall) against PyTorch running the same file through onnx2torch
# (scripts/device/onnx_torch.py: eager fp32 with TF32 off, and PyTorch's default), in one device call.
# Models: PP-OCRv4 text detection (rapidocr-onnxruntime 1.4.4) at 3x640x640 and nudenet's YOLOv8n (3.4.2) at
# 3x320x320 (scripts/fetch-onnx-models.sh).
#
# Here, once (fills build-onnx/, git-ignored by /build*/; ~20 MiB):
#   scripts/device/stage-loader.sh                  # .gl/ (Vulkan loader for the NVIDIA ICD)
#   scripts/device/onnx_latency.sh stage            # Release bench_onnx, the two models, the onnx2torch wheel
# Then:
#   run(command: "source .gl/prelude.sh && bash build-onnx/onnx_latency.sh", carry: [".gl", "build-onnx"])
# Raw JSON lines and logs go to $OUT; the table is printed last. QUICK=1: a smoke test (64x64, batch 1 and 2,
# 2 steps; PyTorch on the CPU when CUDA is absent). The device has torch, torchvision and onnx but no
# onnx2torch: its pure-Python wheel is carried and imported from the .whl file itself.
set -uo pipefail
if [ "${1:-}" = stage ]; then
  set -e
  cd "$(dirname "$0")/../.."
  dst=build-onnx
  mkdir -p $dst/bin $dst/models $dst/wheels
  scripts/fetch-onnx-models.sh >/dev/null
  BUILD_DIR=${BUILD_DIR:-build} scripts/build.sh --target bench_onnx >/dev/null
  strip -o $dst/bin/bench_onnx "${BUILD_DIR:-build}/bin/bench_onnx"
  cp .models/onnx/ppocr_det_v4.onnx .models/onnx/nudenet_320n.onnx $dst/models/
  cp scripts/device/onnx_latency.sh scripts/device/onnx_torch.py $dst/
  [ -n "$(ls $dst/wheels/onnx2torch-1.5.15-*.whl 2>/dev/null)" ] ||
    python3 -m pip download -q --disable-pip-version-check --no-deps -d $dst/wheels onnx2torch==1.5.15
  du -sh $dst
  exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/onnx-latency-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$(ls "$here"/wheels/onnx2torch-*.whl | head -1)${PYTHONPATH:+:$PYTHONPATH}"
steps="--steps 20 --warmup 5 --gpu-steps 20"
batches=1,32
[ -n "${QUICK:-}" ] && steps="--steps 2 --warmup 1 --gpu-steps 2" && batches=1,2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee "$out/gpu.txt"
torch_dev=cuda
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || torch_dev=cpu
for spec in "ppocr_det_v4 x 3,640,640" "nudenet_320n images 3,320,320"; do
  read -r name input chw <<<"$spec"
  [ -n "${QUICK:-}" ] && chw=3,64,64
  model="$here/models/$name.onnx"
  MEGANEURA_GPU_TIMING=1 "$here/bin/bench_onnx" "$model" --input "$input" --chw "$chw" --batches $batches \
    --precisions f32,mixed16 $steps 2>>"$out/vulkan.log" | tee -a "$out/vulkan.jsonl"
  echo "bench_onnx $name exit ${PIPESTATUS[0]}"
  python3 "$here/onnx_torch.py" "$model" --chw "$chw" --batches $batches --device $torch_dev $steps \
    2>>"$out/torch.log" | tee -a "$out/torch.jsonl"
  echo "onnx_torch $name exit ${PIPESTATUS[0]}"
done
python3 - "$out/vulkan.jsonl" "$out/torch.jsonl" <<'PYEOF' | tee "$out/table.md"
import json, sys
rows = {}
for path in sys.argv[1:]:
    for line in open(path):
        d = json.loads(line)
        if "error" in d:
            print("error:", d)
            continue
        side = d.get("precision") or d.get("mode")
        side = ("meganeura " if d["bench"] == "vk_onnx" else "torch ") + side
        rows.setdefault((d["model"], d["batch"]), []).append((side, d["gpu_ms"], d["wall_ms"], d["output0_sum"]))
print("| model | batch | runtime | GPU ms | wall ms | output0 sum |\n|---|---|---|---|---|---|")
for (model, batch), sides in sorted(rows.items()):
    for side, gpu, wall, s in sides:
        g = f"{gpu:.3f}" if gpu is not None else "-"
        print(f"| {model} | {batch} | {side} | {g} | {wall:.3f} | {s:.6g} |")
PYEOF
