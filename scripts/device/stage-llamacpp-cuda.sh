#!/usr/bin/env bash
# Stages issue 24 item 7's CUDA side: llama.cpp's source of the same release as the Vulkan and CPU builds
# (scripts/install-llamacpp.sh's node-llama-cpp bundle) into .llama-cuda/src.tar.xz (git-ignored, ~4 MB):
# ggml with its CPU and CUDA backends, llama, common, vendor and the tools' CMake files (llama-bench is the only
# target built); no models, docs, tests, examples or other backends. npm's prebuilt libggml-cuda.so is 159 MB,
# over a call's 64 MiB, so the device builds it (scripts/device/llamacpp-cuda.sh). Needs .llama too
# (scripts/device/stage-llamacpp.sh: our bench_gguf and the real model's skeleton).
#   here:  scripts/device/stage-llamacpp.sh && scripts/device/stage-llamacpp-cuda.sh
#   there: one call (the build took 320 s on an H100's 16 cores, 2026-12-07; the bench with REPS=3 fits after it):
#     run(command: "BUILD_S=340 bash scripts/device/llamacpp-cuda.sh build && source .gl/prelude.sh &&
#         REPS=3 bash scripts/device/llamacpp-cuda.sh bench", carry: [".gl", ".llama", ".llama-cuda"], timeout_s: 600)
#   or two on one warm machine, the second NOT carrying .llama-cuda: a carried folder replaces the machine's,
#   and the build inside it is lost with it.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/install-llamacpp.sh >/dev/null
grep -qx '/.llama-cuda/' .git/info/exclude 2>/dev/null || echo '/.llama-cuda/' >> .git/info/exclude
rm -rf .llama-cuda && mkdir -p .llama-cuda
ex=()
for d in .git models docs media tools/ui examples tests gguf-py app benches pocs skills scripts grammars requirements; do
  ex+=("--exclude=./$d")
done
for b in vulkan opencl sycl hexagon metal et webgpu openvino cann virtgpu; do ex+=("--exclude=./ggml/src/ggml-$b"); done
tar -C .models/llamacpp/src "${ex[@]}" -cJf .llama-cuda/src.tar.xz .
cp .models/llamacpp/bins/llama.cpp.info.json .llama-cuda/
du -sh .llama-cuda
