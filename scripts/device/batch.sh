#!/usr/bin/env bash
# The open measurements of issues 22 (item 9), 24 (item 7) and 29 in one device call, most wanted first: machines
# are scarce, and a call that starts should not be spent on one figure. Each step runs under its own timeout and
# the results are re-packed into $OUT/batch.tar.xz after each one (a call returns few files, and one cut at its
# limit keeps only what is under $OUT).
#   here:   scripts/device/batch.sh stage       strips build/bin's bench_matmul, bench_attention and bench_llm into
#                                               .mm/bin.tar.xz (git-ignored); decode_ab.sh's .bench/bin.tar.xz
#                                               (sides A, B, ...) and stage-llamacpp.sh's .llama as those say
#   there:  run(command: "bash scripts/device/batch.sh run", carry: [".gl", ".llama", ".bench", ".mm"])
# STEPS (default "ab llm attention auto torch cand mixed16") picks and orders the steps:
#   ab        decode_ab.sh: bench_decode --profile and bench_gguf for SIDES (default "A B"), llama.cpp Vulkan
#   llm       bench_llm Adam step, batch 1, sequence 128, with its per-family profile (issue 29); LLM_PRECISIONS
#             (default f32; "f32,mixed16" both) and LLM_S (timeout a side, default 80 s)
#   attention bench_attention at S = 128, 512, D = 64 (issue 29 item 3)
#   dispatch  bench_dispatch: a dispatch's floor (dependent, independent, with a ticket) at 1, 132, 384 workgroups
#   prefill   bench_decode --profile under Mixed16, a 512-token prompt at batch 1, f16 and q4_1 weights: where
#             llama-bench's pp 512 goes (issue 24 item 7; our pp is ~46 000 tok/s for every weight type)
#   decode    bench_decode --profile, q4_1 and f16 weights, batch 1 and 16 (the decode step's families), every
#             side that carries bench_decode
# With .mm/base.tar.xz (the same three tools from a baseline commit, `stage base` copies the current
# .mm/bin.tar.xz there before restaging), llm and attention run the baseline first, then main, in the same call
# (llm_base.jsonl, attention_base.jsonl); every other .mm/NAME.tar.xz is a side too (`stage NAME` keeps the
# current one under that name), run in name order before bin (llm_NAME.jsonl). LLM_ROUNDS (default 1) repeats
# the llm step's sides in turn (llm*_r2.jsonl, ...), so that clock drift hits every side.
#   auto      bench_matmul over SmolLM2's products as sessions pick them, F32 (issue 22 item 9)
#   torch     matmul_torch.py on the same products (cuBLAS, f32 and f16)
#   cand      every candidate at M = 512 and 2048 for the products with K or N = 1536, and the head's input
#             gradient 128x576x49152, F32
#   mixed16   the picks under Mixed16
set -uo pipefail
cd "$(dirname "$0")/../.."

stage() {
  mkdir -p .mm
  [ -n "${1:-}" ] && cp .mm/bin.tar.xz ".mm/$1.tar.xz"
  grep -qx "/.mm/" .git/info/exclude 2>/dev/null || echo "/.mm/" >> .git/info/exclude
  local t=/tmp/batch-stage
  rm -rf "$t" && mkdir -p "$t"
  local tools=(bench_matmul bench_attention bench_llm bench_dispatch bench_decode)
  for b in "${tools[@]}"; do strip -o "$t/$b" "build/bin/$b"; done
  tar -C "$t" -cf - "${tools[@]}" | xz -9e -T2 > .mm/bin.tar.xz  # see test-gpu.sh
  du -sh .mm
}

sfx() { if [ "$1" != bin ]; then echo "_$1"; fi; }

run() {
  # shellcheck disable=SC1091
  source .gl/prelude.sh > /dev/null 2>&1
  local r=/tmp/batch b=/tmp/batch-bin/bench_matmul here=scripts/device
  rm -rf "$r" /tmp/batch-bin && mkdir -p "$r" /tmp/batch-bin
  tar -C /tmp/batch-bin -xJf .mm/bin.tar.xz
  local bases="" f side
  for f in .mm/*.tar.xz; do
    side=$(basename "$f" .tar.xz)
    [ "$side" = bin ] && continue
    rm -rf "/tmp/batch-$side" && mkdir -p "/tmp/batch-$side" && tar -C "/tmp/batch-$side" -xJf "$f"
    bases="$bases $side"
  done
  export MEGANEURA_CACHE_DIR=off PYTHONUNBUFFERED=1
  local m1536="2048x1536x576:nt,2048x576x1536:nt,2048x576x576:nt,512x1536x576:nt,512x576x1536:nt,128x576x49152:nn"
  for step in ${STEPS:-ab llm attention auto torch cand mixed16}; do
    case "$step" in
      ab) SIDES="${SIDES:-A B}" DTYPES="${DTYPES:-q4_1}" TYPES="${TYPES:-original}" ROUNDS="${ROUNDS:-1}" OUT=$r/ab \
        timeout "${AB_S:-240}" bash "$here/decode_ab.sh" > /dev/null 2>&1 ;;
      llm) for round in $(seq "${LLM_ROUNDS:-1}"); do
          for side in $bases bin; do
            [ -x "/tmp/batch-$side/bench_llm" ] || continue  # a side may carry only some tools
            timeout "${LLM_S:-80}" "/tmp/batch-$side/bench_llm" --batches 1 --seqs 128 --precisions "${LLM_PRECISIONS:-f32}" --modes train --steps 20 \
              --warmup 5 > "$r/llm$(sfx "$side")$([ "$round" -gt 1 ] && echo "_r$round").jsonl" 2>&1
          done
        done ;;
      attention) for side in $bases bin; do
          [ -x "/tmp/batch-$side/bench_attention" ] || continue
          timeout 30 "/tmp/batch-$side/bench_attention" --seqs 128,512 --dims 64 > "$r/attention$(sfx "$side").jsonl" 2>&1
        done ;;
      dispatch) timeout 60 /tmp/batch-bin/bench_dispatch > "$r/dispatch.jsonl" 2>&1 ;;
      decode) for side in $bases bin; do
          [ -x "/tmp/batch-$side/bench_decode" ] || continue
          for dt in q4_1 f16; do
            timeout 60 "/tmp/batch-$side/bench_decode" --dtype "$dt" --steps 64 --batches 1,16 --profile \
              > "$r/decode_$dt$(sfx "$side").jsonl" 2>&1
          done
        done ;;
      prefill) for dt in f16 q4_1; do
          MEGANEURA_PRECISION=mixed16 timeout 60 /tmp/batch-bin/bench_decode --dtype "$dt" --prompt 512 --context 640 \
            --batches 1 --steps 8 --profile > "$r/prefill_$dt.jsonl" 2>&1
        done ;;
      auto) timeout 80 "$b" --shapes smollm2 --tiers auto --iters 50 --warmup 300 > "$r/auto_f32.jsonl" \
        2> "$r/auto_f32.log" ;;
      torch) timeout 60 python3 "$here/matmul_torch.py" --shapes smollm2 --iters 50 --warmup 50 > "$r/torch.jsonl" \
        2> "$r/torch.log" ;;
      cand) timeout 80 "$b" --shapes "$m1536" --candidates --iters 50 --warmup 300 --no-probe > "$r/cand_f32.jsonl" \
        2> "$r/cand_f32.log" ;;
      mixed16) timeout 80 "$b" --shapes smollm2 --tiers auto --mixed16 --iters 50 --warmup 300 \
        > "$r/auto_mixed16.jsonl" 2> "$r/auto_mixed16.log" ;;
      *) echo "batch.sh: unknown step $step" >&2 ;;
    esac
    echo "$step rc $? at $SECONDS s" | tee -a "$r/steps.txt"
    tar -C /tmp -cJf "$OUT/batch.tar.xz" batch
  done
}

case "${1:-}" in
  stage) stage "${2:-}" ;;
  run) run ;;
  *) echo "usage: scripts/device/batch.sh stage|run" >&2; exit 2 ;;
esac
