#!/usr/bin/env bash
# Issue 24 item 7's CUDA side: llama.cpp's CUDA backend, built on the device from the staged source
# (scripts/device/stage-llamacpp-cuda.sh), against ours on the same GPU and the same random-weight files of the
# real SmolLM2-135M-Instruct's shapes and types (as scripts/device/llamacpp.sh makes them for the Vulkan side).
#   build   configure (sm_90: the H100 and H200) and build llama-bench into .llama-cuda/build, a git-ignored
#           path that a warm machine keeps between calls; a build cut by BUILD_S (default 560 s) resumes on the
#           next `build` call. Prints the seconds it took.
#   bench   for each of TYPES (original = the real file's Q4_1 + Q8_0 mix, Q8_0, F16): ours (`bench_gguf run`,
#           REPS runs) and `llama-bench -p PP -n TG -r REPS -ngl 99` (its defaults otherwise: CUDA graphs on,
#           flash attention auto), tokens/s of both into $OUT/results.txt and a ratio table.
# Measured with the Vulkan side in one call where the time allows: the build alone is minutes of device time.
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
    w=/tmp/meganeura-llama-cuda
    rm -rf "$w" && mkdir -p "$w" && tar -C "$w" -xJf .llama/llama.tar.xz
    pp=${PP:-512} tg=${TG:-128} reps=${REPS:-5} types=${TYPES:-original Q8_0 F16}
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | tee "$out/gpu.txt"
    : > "$out/results.txt"
    for t in $types; do
      name=$([ "$t" = original ] && echo Q4_1 || echo "$t")
      f="$w/smollm2-$name.gguf"
      "$w/bench_gguf" synth "$w/smollm2.skeleton.gguf" "$f" "$t" >/dev/null || { echo "synth $t failed"; continue; }
      echo "== $name: meganeura"
      "$w/bench_gguf" run "$f" --pp "$pp" --tg "$tg" --reps "$reps" 2>&1 | tee "$out/ours-$name.jsonl" |
        sed -n 's/.*"bench":"\([a-z]*\)".*"tokens_per_s":\([0-9.]*\),"min":\([0-9.]*\),"max":\([0-9.]*\).*/\1 \2 \3 \4/p' |
        while read -r b r lo hi; do echo "$name ours $b $r $lo $hi" | tee -a "$out/results.txt"; done
      echo "== $name: llama.cpp CUDA"
      "$bench" -m "$f" -p "$pp" -n "$tg" -r "$reps" -ngl 99 -o jsonl 2>"$out/llamacpp-cuda-$name.err" |
        tee "$out/llamacpp-cuda-$name.jsonl" |
        python3 -c '
import json, sys
for line in sys.stdin:
    d = json.loads(line)
    kind = "pp" if d.get("n_prompt", 0) > 0 else "tg"
    print(sys.argv[1], "llama.cpp-cuda", kind, round(d["avg_ts"], 1), round(d.get("stddev_ts", 0.0), 1), "-")
' "$name" | tee -a "$out/results.txt"
      tail -n 3 "$out/llamacpp-cuda-$name.err"
      rm -f "$f"
    done
    echo "== tokens/s (ours: median of $reps; llama-bench: mean of $reps; PP $pp, TG $tg)"
    awk '{v[$1" "$3" "$2]=$4; m[$1]=1; b[$3]=1}
      END {printf "%-6s %-3s %10s %15s %8s\n", "type", "", "meganeura", "llama.cpp CUDA", "ratio";
           for (t in m) for (x in b) { o=v[t" "x" ours"]; l=v[t" "x" llama.cpp-cuda"];
             printf "%-6s %-3s %10s %15s %8s\n", t, x, o, l, (o && l) ? sprintf("%.2f", o/l) : "-" } }' "$out/results.txt"
    ;;
  *) echo "usage: llamacpp-cuda.sh build|bench"; exit 2 ;;
esac
