#!/usr/bin/env bash
# Issue 24 item 7's CUDA side: llama.cpp's CUDA backend, built on the device from the staged source
# (scripts/device/stage-llamacpp-cuda.sh), against ours on the same GPU and the same random-weight files of the
# real SmolLM2-135M-Instruct's shapes and types (as scripts/device/llamacpp.sh makes them for the Vulkan side).
#   build   configure (sm_90: the H100 and H200) and build llama-bench into .llama-cuda/build, a git-ignored
#           path that a warm machine keeps between calls unless a call carries .llama-cuda again (the carried
#           folder replaces it); a build cut by BUILD_S (default 560 s) resumes on the next `build` call. Prints
#           the seconds it took (320 s on an H100 machine's 16 cores, 2026-12-07).
#   bench   scripts/device/llamacpp.sh with BACKENDS="vulkan cuda": for each of TYPES ours, llama.cpp's Vulkan
#           build and `llama-bench -p PP -n TG -r REPS -ngl 99` on CUDA, one ratio table.
# Build and bench in one call: stage-llamacpp-cuda.sh's header has the command.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
dir=$root/.llama-cuda
mode=${1:-bench}
out=${OUT:-/tmp/llamacpp-cuda-out}
mkdir -p "$out"
export PATH=$PATH:/usr/local/cuda/bin
case $mode in
  build)
    command -v nvcc >/dev/null || { echo "no nvcc on PATH or in /usr/local/cuda/bin"; exit 1; }
    nvcc --version | tail -n 2
    [ -d "$dir/src" ] || { mkdir -p "$dir/src" && tar -C "$dir/src" -xJf "$dir/src.tar.xz"; }
    start=$SECONDS
    if [ ! -f "$dir/build/build.ninja" ] && [ ! -f "$dir/build/Makefile" ]; then
      gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
      cmake -S "$dir/src" -B "$dir/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF \
        -DGGML_CUDA_NCCL=OFF > "$out/configure.log" 2>&1 || { tail -n 30 "$out/configure.log"; exit 1; }
    fi
    timeout "${BUILD_S:-560}" cmake --build "$dir/build" --target llama-bench -j "$(nproc)" > "$out/build.log" 2>&1
    rc=$?
    tail -n 5 "$out/build.log"
    echo "build rc $rc after $((SECONDS - start)) s (124: cut by BUILD_S; call build again to resume)"
    exit $rc
    ;;
  bench)
    bench=$dir/build/bin/llama-bench
    [ -x "$bench" ] || { echo "no $bench: run the build mode first"; exit 1; }
    BACKENDS=${BACKENDS:-vulkan cuda} LLAMA_BENCH=$bench OUT=$out bash scripts/device/llamacpp.sh
    ;;
  *) echo "usage: llamacpp-cuda.sh build|bench"; exit 2 ;;
esac
