#!/usr/bin/env bash
# Opt-in: the real pretrained ONNX models (scripts/fetch-onnx-models.sh: PP-OCR classifier, detector and
# recogniser from rapidocr-onnxruntime, magika, nudenet's YOLOv8n) imported by load_onnx and run on the GPU
# against onnxruntime (pinned in scripts/requirements-oracle.txt) on real inputs, and the imported classifier
# fine-tuned (tests/oracle/test_onnx_real.cpp; docs/onnx.md "Real models"). Here a missing model is a failure,
# never a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-oracles.sh
scripts/fetch-onnx-models.sh
BUILD_DIR=${BUILD_DIR:-build}
scripts/build.sh --target meganeura_tests_oracle
MEGANEURA_ONNX_REAL_REQUIRED=1 "$BUILD_DIR/bin/meganeura_tests_oracle" --gtest_filter='OnnxReal.*' "$@"
