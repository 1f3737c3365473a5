#!/usr/bin/env bash
# Fails when the binary needs a shared library other than glibc's and the Vulkan loader.
set -euo pipefail
bin=$1
allowed='^(linux-vdso\.so|/lib64/ld-linux-x86-64\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libpthread\.so|libdl\.so|librt\.so|libvulkan\.so)'
libs=$(ldd "$bin" | awk '{print $1}')
bad=$(echo "$libs" | grep -Ev "$allowed" || true)
echo "$libs"
if [ -n "$bad" ]; then
  echo "FAIL: $bin needs shared libraries beyond glibc and the Vulkan loader:" >&2
  echo "$bad" >&2
  exit 1
fi
echo "OK: only glibc and libvulkan"
