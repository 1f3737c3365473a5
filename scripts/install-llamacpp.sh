#!/usr/bin/env bash
# Opt-in: llama.cpp as an oracle (never in default CI). Fetches, with npm's ordinary client, the prebuilt CPU
# libraries of @node-llama-cpp/linux-x64 and node-llama-cpp (whose gitRelease.bundle is the llama.cpp source of
# the same release, for llama.h), pinned below, into .models/llamacpp/ (git-ignored), and builds
# scripts/llamacpp_oracle.c against them: .models/llamacpp/llamacpp_oracle.
# Idempotent: what is already in place is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
NLC_VERSION=3.22.1   # node-llama-cpp; its llama.cpp release is recorded in llama/llama.cpp.info.json
dir=.models/llamacpp
mkdir -p "$dir"
if [ ! -f "$dir/bins/libllama.v0.5.0.so" ] && [ -z "$(ls "$dir"/bins/libllama*.so 2>/dev/null)" ]; then
  (cd "$dir" && npm pack --silent "@node-llama-cpp/linux-x64@$NLC_VERSION" "node-llama-cpp@$NLC_VERSION" >/dev/null)
  rm -rf "$dir/x" && mkdir -p "$dir/x/bins" "$dir/x/nlc"
  tar xzf "$dir/node-llama-cpp-linux-x64-$NLC_VERSION.tgz" -C "$dir/x/bins"
  tar xzf "$dir/node-llama-cpp-$NLC_VERSION.tgz" -C "$dir/x/nlc"
  rm -rf "$dir/src" && git -c advice.detachedHead=false clone -q "$dir/x/nlc/package/llama/gitRelease.bundle" "$dir/src"
  rm -rf "$dir/bins" && mv "$dir/x/bins/package/bins/linux-x64" "$dir/bins"
  cp "$dir/x/nlc/package/llama/llama.cpp.info.json" "$dir/bins/"
  rm -rf "$dir/x" "$dir"/*.tgz
fi
lib=$(basename "$(ls "$dir"/bins/libllama.v*.so | head -1)")
ggml=$(basename "$(ls "$dir"/bins/libggml.v*.so | head -1)")
if [ ! -x "$dir/llamacpp_oracle" ] || [ scripts/llamacpp_oracle.c -nt "$dir/llamacpp_oracle" ]; then
  gcc -O2 -std=c11 -o "$dir/llamacpp_oracle" scripts/llamacpp_oracle.c -I"$dir/src/include" -I"$dir/src/ggml/include" \
    -L"$dir/bins" -l:"$lib" -l:"$ggml" -l:libggml-base.so -Wl,-rpath,"$PWD/$dir/bins"
fi
echo "install-llamacpp: $dir/llamacpp_oracle (llama.cpp $(cat "$dir/bins/llama.cpp.info.json" | tr -d ' \n'), node-llama-cpp $NLC_VERSION)"
# LLAMACPP_BACKEND=vulkan: the same release's Vulkan build too (@node-llama-cpp/linux-x64-vulkan, with its CPU
# backends), in .models/llamacpp-vulkan/ with the oracle built against it. Here it runs on lavapipe
# (GGML_VK_VISIBLE_DEVICES=0: ggml-vulkan skips CPU-type devices unless named); scripts/check-llamacpp.sh sets
# what makes its products take f32 activations (docs/inference.md).
if [ "${LLAMACPP_BACKEND:-cpu}" = vulkan ]; then
  vdir=.models/llamacpp-vulkan
  if [ -z "$(ls "$vdir"/bins/libllama.vulkan.v*.so 2>/dev/null)" ]; then
    rm -rf "$vdir" && mkdir -p "$vdir/x"
    (cd "$vdir/x" && npm pack --silent "@node-llama-cpp/linux-x64-vulkan@$NLC_VERSION" >/dev/null &&
      tar xzf "node-llama-cpp-linux-x64-vulkan-$NLC_VERSION.tgz")
    mv "$vdir/x/package/bins/linux-x64-vulkan" "$vdir/bins" && rm -rf "$vdir/x"
  fi
  vlib=$(basename "$(ls "$vdir"/bins/libllama.vulkan.v*.so | head -1)")
  vggml=$(basename "$(ls "$vdir"/bins/libggml.vulkan.v*.so | head -1)")
  if [ ! -x "$vdir/llamacpp_oracle" ] || [ scripts/llamacpp_oracle.c -nt "$vdir/llamacpp_oracle" ]; then
    gcc -O2 -std=c11 -o "$vdir/llamacpp_oracle" scripts/llamacpp_oracle.c -I"$dir/src/include" -I"$dir/src/ggml/include" \
      -L"$vdir/bins" -l:"$vlib" -l:"$vggml" -l:libggml-base.so -Wl,-rpath,"$PWD/$vdir/bins"
  fi
  echo "install-llamacpp: $vdir/llamacpp_oracle (the Vulkan build)"
fi
