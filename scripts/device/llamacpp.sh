#!/usr/bin/env bash
# Issue 24 item 7 in one device call: prompt processing (PP, default 512 tokens in one batch) and generation
# (TG, default 128 tokens one at a time) tokens/s of the SmolLM2-135M-Instruct model in Q4_1 (the real file's
# types: Q4_1 matrices, Q8_0 embedding), Q8_0 and F16, ours (`bench_gguf run`) and llama.cpp's Vulkan build
# (`llamacpp_oracle bench`, llama-bench's two figures) on the same GPU, REPS runs each after a warm-up.
# Weights are random with the real file's shapes, types, metadata and tokenizer (`bench_gguf synth` from the
# skeleton staged by scripts/device/stage-llamacpp.sh): the file does not fit in a call, and neither side's
# kernels depend on the values. llama.cpp's CUDA backend is not in it: npm's prebuilt libggml-cuda.so is
# 159 MB (over a call's 64 MiB), and building it from source with nvcc costs minutes of device time a call.
#   here:  scripts/device/stage-llamacpp.sh
#   there: run(command: "source .gl/prelude.sh && bash scripts/device/llamacpp.sh", carry: [".gl", ".llama"], timeout_s: 600)
# BACKENDS (default vulkan): "vulkan cuda" adds llama.cpp's CUDA build, LLAMA_BENCH naming its llama-bench
# (scripts/device/llamacpp-cuda.sh builds it on the device and calls this script so).
# QUICK=1: a lavapipe smoke test (PP 16, TG 4, 1 rep, Q4_1 only).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/llamacpp-out}
w=/tmp/meganeura-llama
rm -rf "$w" && mkdir -p "$w" "$out" && tar -C "$w" -xJf .llama/llama.tar.xz
pp=${PP:-512} tg=${TG:-128} reps=${REPS:-5} types=${TYPES:-original Q8_0 F16} backends=${BACKENDS:-vulkan}
[[ " $backends " == *" cuda "* ]] && [ ! -x "${LLAMA_BENCH:-}" ] && { echo "BACKENDS has cuda: LLAMA_BENCH must name llama-bench"; exit 1; }
[ -n "${QUICK:-}" ] && pp=16 tg=4 reps=1 types=original
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
  if [[ " $backends " == *" vulkan "* ]]; then
    echo "== $name: llama.cpp Vulkan"
    "$w/llamacpp_oracle" "$w/bins" bench "$f" "$pp" "$tg" "$reps" 2>"$out/llamacpp-$name.err" | tee "$out/llamacpp-$name.txt" |
      awk -v n="$name" '/^(pp|tg) /{print n, "llama.cpp-vulkan", $1, $5, $7, $9} /^device/{print > "/dev/stderr"}' |
      tee -a "$out/results.txt"
    tail -n 3 "$out/llamacpp-$name.err"
  fi
  if [[ " $backends " == *" cuda "* ]]; then
    # llama-bench's own figures (mean and sd of REPS runs; its defaults otherwise: CUDA graphs on, flash
    # attention auto), from scripts/device/llamacpp-cuda.sh's build.
    echo "== $name: llama.cpp CUDA"
    "$LLAMA_BENCH" -m "$f" -p "$pp" -n "$tg" -r "$reps" -ngl 99 -o jsonl 2>"$out/llamacpp-cuda-$name.err" |
      tee "$out/llamacpp-cuda-$name.jsonl" | python3 -c '
import json, sys
for line in sys.stdin:
    d = json.loads(line)
    kind = "pp" if d.get("n_prompt", 0) > 0 else "tg"
    print(sys.argv[1], "llama.cpp-cuda", kind, round(d["avg_ts"], 1), round(d.get("stddev_ts", 0.0), 1), "-")
' "$name" | tee -a "$out/results.txt"
    tail -n 3 "$out/llamacpp-cuda-$name.err"
  fi
  rm -f "$f"
done
echo "== tokens/s (ours and the Vulkan oracle: median of $reps; llama-bench: mean; PP $pp, TG $tg)"
awk -v bk="$backends" '{v[$1" "$3" "$2]=$4; m[$1]=1; b[$3]=1}
  END {nb = split(bk, be, " "); printf "%-6s %-3s %10s", "type", "", "meganeura";
       for (i = 1; i <= nb; ++i) printf " %18s %6s", "llama.cpp " be[i], "ratio"; printf "\n";
       for (t in m) for (x in b) { o=v[t" "x" ours"]; printf "%-6s %-3s %10s", t, x, o;
         for (i = 1; i <= nb; ++i) { l=v[t" "x" llama.cpp-" be[i]];
           printf " %18s %6s", l, (o && l) ? sprintf("%.2f", o/l) : "-" }
         printf "\n" } }' "$out/results.txt"
