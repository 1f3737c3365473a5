#!/usr/bin/env bash
# Training runs on the device (issue 6 targets): the README MLP with the example's defaults for 10 epochs and
# the CNN (--model cnn) for up to 10 epochs, each under its own time limit, with the Fashion-MNIST files
# carried in build-dev/fashion-mnist. Usage, in one `device` call with carry [".gl","build-dev"]:
#   source .gl/prelude.sh && bash scripts/device/train.sh   (outputs under $OUT/train/)
set -uo pipefail
out=${OUT:-/tmp}/train
mkdir -p "$out"
bin=build-dev/mnist
data=build-dev/fashion-mnist
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt" 2>&1
timeout ${MLP_LIMIT:-120} "$bin" --data "$data" --epochs 10 --json > "$out/mlp.txt" 2>&1
echo "mlp rc $?" >> "$out/rc.txt"
timeout ${CNN1_LIMIT:-120} "$bin" --data "$data" --model cnn --epochs 1 --json > "$out/cnn1.txt" 2>&1
echo "cnn1 rc $?" >> "$out/rc.txt"
timeout ${CNN_LIMIT:-300} "$bin" --data "$data" --model cnn --epochs 10 --json > "$out/cnn10.txt" 2>&1
echo "cnn10 rc $?" >> "$out/rc.txt"
tail -n 3 "$out"/*.txt
