#!/usr/bin/env bash
# The whole GPU, oracle and CPU test tiers on a machine of the `device` tool (the H200), with the Khronos
# validation layer on: 0 failures and 0 validation messages is the bar (docs/testing.md).
#
#   here:   scripts/device/test-gpu.sh stage
#           builds Release, then stages into git-ignored folders that a `device` run carries:
#             .gl/     Debian's Vulkan loader, the glvnd libraries the NVIDIA ICD needs, vulkan-validationlayers
#             .stage/  the test binaries and the tools they run, stripped and xz-packed; the oracles' wheels
#             .data/   Debian's dataset-fashion-mnist (the CNN training test)
#   there:  run(command: "scripts/device/test-gpu.sh run", carry: [".gl", ".stage", ".data"], timeout_s: 600)
#
# `run` unpacks, runs each tier's gtest binary in 4 shards at once (one GPU, shared), packs the JSON results and
# logs into $OUT/test-gpu-logs.tar.gz (when $OUT is set), and prints one summary line per tier, every failure, and the validation line of each
# shard: its fatal messages and the ones set apart as the layer's known limit (a layer older than
# VK_KHR_cooperative_matrix flags every module that uses it; runtime/vk_instance.hpp). Exit status: 0 only when
# every test passed.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
# EXTRA_TOOLS (stage only): more binaries to carry in the same call, e.g. "bench_llm soak".
tools=(meganeura_tests_gpu meganeura_tests_oracle meganeura_tests_cpu profile_session pipeline_stats ${EXTRA_TOOLS:-})

stage() {
  scripts/install-deps.sh >/dev/null
  scripts/build.sh --target "${tools[@]}" >/dev/null
  for d in .gl .stage .data; do grep -qx "/$d/" .git/info/exclude 2>/dev/null || echo "/$d/" >> .git/info/exclude; done
  mkdir -p .gl .data /tmp/amd64/partial
  rm -rf .stage && mkdir -p .stage/bin .stage/whl
  local o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  if ! ls .gl/vulkan-validationlayers_*.deb >/dev/null 2>&1 || [ ! -d .data/fashion-mnist ]; then
    apt-get $o update -qq
    (cd .gl && apt-get $o download libvulkan1 libglvnd0 libglx0 libegl1 libgl1 libopengl0 vulkan-validationlayers \
      2>&1 | grep -v '^W:' || true)
    if [ ! -d .data/fashion-mnist ]; then
      (cd /tmp && rm -f dataset-fashion-mnist_*.deb && apt-get $o download dataset-fashion-mnist 2>&1 | grep -v '^W:' || true)
      rm -rf /tmp/fmnist && dpkg -x /tmp/dataset-fashion-mnist_*.deb /tmp/fmnist
      cp -r /tmp/fmnist/usr/share/datasets/fashion-mnist .data/fashion-mnist
    fi
  fi
  cat > .gl/prelude.sh <<'PRE'
# Source first in every device run: unpacks the carried loader and layer, points the loader at the NVIDIA driver.
for f in .gl/*.deb; do dpkg -x "$f" / ; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PRE
  for t in "${tools[@]}"; do strip -o ".stage/bin/$t" "build/bin/$t"; done
  # The matmul GLSL lint (cpu tier) runs glslangValidator, a build tool the device lacks: Debian's needs only
  # libc and libstdc++, which Ubuntu 24.04 has.
  strip -o .stage/bin/glslangValidator "$(command -v glslangValidator)"
  # xz -9e: its 64 MiB window spans the binaries, which share most of their code (25 MB at the default
  # level, 10 MB here), so a call has room for more than the suite.
  tar -C .stage -cf - bin | xz -9e -T2 > .stage/bin.tar.xz && rm -rf .stage/bin
  # The light oracles (scripts/requirements-oracle.txt) as wheels for the device's Python 3.12, but those it has
  # (numpy, tokenizers) or whose tests stay with CI (huggingface_hub; onnx, 9 MB, for the conformance driver
  # and, with ml_dtypes, the number formats' oracle; onnxruntime, 17 MB, for the real ONNX models, whose files
  # are not carried either; the CLI/citation/bindings tools): a run carries at most 64 MiB.
  # nnef, nnef-tools and scikit-build-core (4.7 MB) serve only tests this run leaves to CI (NNEF models, the wheel).
  grep -Ev '^(numpy|tokenizers|huggingface_hub|onnx|ml_dtypes|onnxruntime|jsonschema|PyYAML|nanobind|pytest|nnef|nnef-tools|scikit-build-core)==' scripts/requirements-oracle.txt \
    > /tmp/oracles-device.txt
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d .stage/whl -r /tmp/oracles-device.txt
  du -sh .gl .stage .data
}

run() {
  # shellcheck disable=SC1091
  source .gl/prelude.sh
  tar -C .stage -xJf .stage/bin.tar.xz
  export PATH="$root/.stage/bin:$PATH"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .stage/whl/*.whl && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  export MEGANEURA_VALIDATION=1 MEGANEURA_SOURCE_DIR="$root"
  local out=/tmp/test-gpu shards=4 status=0 start=$SECONDS
  mkdir -p "$out"
  # The hub downloads' tests (HubTest, HubPython) use no device and need Debian's libcurl and huggingface_hub's
  # dependencies, which this run does not stage: CI runs them.
  # NumberFormatOracle reads onnx's reference cast (onnx is CI-only, above); the GPU test of the same rounding
  # (RoundToFormatGpu) needs no Python and runs here.
  # The NNEF model tests convert with nnef-tools (CI-only wheels, like onnx), the real ONNX models are not
  # staged (OnnxReal: scripts/check-real-onnx.sh): CI runs them.
  export GTEST_FILTER='-HubTest.*:HubPython.*:HfHub.*:OnnxConformance.*:NumberFormatOracle.*:NnefTools/NnefModels.*:NnefModelsGpu.*:OnnxReal.*'
  for tier in gpu oracle cpu; do
    local pids=()
    for ((i = 0; i < shards; ++i)); do
      GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i ".stage/bin/meganeura_tests_$tier" \
        --gtest_output="json:$out/$tier-$i.json" > "$out/$tier-$i.log" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || status=1; done
    python3 - "$tier" "$out" "$shards" <<'PY'
import json, sys, pathlib
tier, out, shards = sys.argv[1], pathlib.Path(sys.argv[2]), int(sys.argv[3])
tests = failures = 0
for i in range(shards):
    p = out / f"{tier}-{i}.json"
    if not p.exists():
        print(f"{tier} shard {i}: no result (crashed?); log tail:")
        print("\n".join((out / f"{tier}-{i}.log").read_text(errors="replace").splitlines()[-30:]))
        failures += 1
        continue
    doc = json.loads(p.read_text())
    for suite in doc["testsuites"]:
        for t in suite["testsuite"]:
            tests += 1
            for f in t.get("failures", []):
                failures += 1
                print(f"FAILED {suite['name']}.{t['name']}: {f['failure'][:1500]}")
    for line in (out / f"{tier}-{i}.log").read_text(errors="replace").splitlines():
        if line.startswith("[meganeura] validation:"):
            print(f"{tier} shard {i}: {line}")
print(f"tier {tier}: {tests} tests, {failures} failed")
PY
  done
  echo "test-gpu: wall $((SECONDS - start)) s"
  if [ -n "${OUT:-}" ]; then tar -C "$out" -czf "$OUT/test-gpu-logs.tar.gz" .; fi
  return $status
}

case "${1:-}" in
  stage) stage ;;
  run) run ;;
  *) echo "usage: scripts/device/test-gpu.sh stage|run" >&2; exit 2 ;;
esac
