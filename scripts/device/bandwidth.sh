#!/usr/bin/env bash
# Device bandwidth, Vulkan and torch side by side in one call (issue 2, item 11). On the GPU machine, from the
# project root, after the Vulkan loader is unpacked:
#   run(command: "source .gl/prelude.sh && bash scripts/device/bandwidth.sh",
#       carry: [".gl", "build/bin/meganeura", "build/bin/bench_bandwidth"])
# .gl must hold libglvnd0 (and libglx0 libegl1 libgl1 libopengl0) besides libvulkan1: without them the NVIDIA
# ICD (libGLX_nvidia.so.0) returns no vkCreateInstance and the loader reports "Found no drivers".
set -euo pipefail
out=${OUT:-.}
./build/bin/meganeura info --json > "$out/info.json"
./build/bin/meganeura info | head -3
./build/bin/bench_bandwidth | tee "$out/bandwidth_vulkan.jsonl"
python3 scripts/device/bandwidth_torch.py | tee "$out/bandwidth_torch.jsonl"
