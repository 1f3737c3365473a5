#!/usr/bin/env bash
# The driver's machine code of the cooperative matmul (issue 7, next step after session 6): pipeline_stats --cache
# dumps the pipeline cache and the ELF images in it for the default large tile (one shared stage, 247 TFLOP/s at
# 8192^3) and the two-stage 128x128x32/2x4 (171), and isa_mix.py disassembles them with nvdisasm, taken from
# PATH or the Triton package. From the project root on the GPU machine:
#   run(command: "source .gl/prelude.sh && bash experiments/scripts/sass.sh",
#       carry: [".gl", "build/bin/pipeline_stats"])
# TIER / TILES override (TIER=scalar TILES=none is the lavapipe smoke test). Everything goes to $OUT.
set -uo pipefail
out=${OUT:-/tmp/sass-out}
bin=${BIN:-build/bin}
mkdir -p "$out"
export MEGANEURA_CACHE_DIR=off
tools=$(python3 -c 'import os, triton; print(os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin"))' 2>/dev/null)
[ -n "$tools" ] && [ -d "$tools" ] && export PATH="$tools:$PATH"
echo "nvdisasm: $(command -v nvdisasm || echo none); cuobjdump: $(command -v cuobjdump || echo none)" | tee "$out/tools.txt"
tier=${TIER:-coopmat-khr}
for tile in ${TILES:-128x256x32/4x4/g4/s1 128x128x32/2x4}; do
  name=${tile//\//_}
  args=(--matmul "${SIZE:-8192}" --tier "$tier" --no-ir --cache --out "$out/$name")
  [ "$tile" != none ] && args+=(--tile "$tile")
  "$bin/pipeline_stats" "${args[@]}" 2>&1 | tee "$out/$name.log"
  python3 "$(dirname "$0")/isa_mix.py" "$out/$name" > "$out/$name.isa_mix.txt" 2>&1
  head -40 "$out/$name.isa_mix.txt"
done
