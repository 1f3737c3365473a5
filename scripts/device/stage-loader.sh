#!/usr/bin/env bash
# Puts the Debian Vulkan loader and the GL dispatch libraries the NVIDIA ICD needs into ./.gl (git-ignored),
# so a `device` run can carry them. With libvulkan1 alone, the NVIDIA ICD (libGLX_nvidia.so.0) returns no
# vkCreateInstance and the loader reports "Found no drivers" (seen 2026-12-02 on the H200).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
grep -qx '/.gl/' .git/info/exclude 2>/dev/null || echo '/.gl/' >> .git/info/exclude
mkdir -p .gl /tmp/amd64/partial
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
apt-get $o update -qq
(cd .gl && apt-get $o download libvulkan1 libglvnd0 libglx0 libegl1 libgl1 libopengl0 2>&1 | grep -v '^W:' || true)
cat > .gl/prelude.sh <<'PRE'
# Source first in every device run: unpacks the carried loader and points it at the NVIDIA driver.
for f in .gl/*.deb; do dpkg -x "$f" / ; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PRE
ls -l .gl
