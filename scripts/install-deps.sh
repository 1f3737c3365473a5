#!/usr/bin/env bash
# Installs everything meganeura needs to build, test and train, from Debian bookworm's archive only.
# Idempotent: skips apt entirely when every package is already present.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git
  libvulkan-dev vulkan-tools mesa-vulkan-drivers vulkan-validationlayers
  libshaderc-dev glslang-dev glslang-tools spirv-tools spirv-headers
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev zlib1g-dev libfmt-dev
  libcurl4-openssl-dev  # header only at build time; hub/ dlopens libcurl.so.4 (libcurl4) at run time
  libopenmpi-dev openmpi-bin  # header only at build time; distributed/ dlopens libmpi.so.40; mpirun for tests
  clang-16 libclang-rt-16-dev clang-format-16
  dataset-fashion-mnist python3 python3-torch python3-onnx python3-numpy
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
