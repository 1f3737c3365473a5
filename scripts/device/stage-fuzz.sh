#!/usr/bin/env bash
# Stages the libFuzzer targets (clang-16, ASan + UBSan, built here by scripts/fuzz.sh into build-fuzz/) for
# a device run of scripts/device/fuzz.sh: .fuzz/fuzz.tar.xz (git-ignored) holds every fuzz_* binary with its
# debug info stripped (the symbol table stays, so sanitizer reports still name functions), the shared
# libraries they need beyond glibc (libc, libm, libresolv, ...: never copied, the device's own must be used), libstdc++ and libgcc (libvulkan.so.1 and the like, from this machine:
# the device's Ubuntu 24.04 has a newer glibc and libstdc++, which run bookworm binaries), and the corpus
# each target has grown here (build-fuzz/corpus/NAME/, a head start; the seeds in fuzz/corpus/ travel
# with the tree). Carry: [".fuzz"] (the archive must stay under the 64 MiB carry limit; the script checks).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.fuzz/' "$exclude" 2>/dev/null || echo '/.fuzz/' >> "$exclude"
FUZZ_BUILD_ONLY=1 scripts/fuzz.sh
stage=$(mktemp -d)
mkdir -p "$stage/bin" "$stage/lib" "$stage/corpus"
for b in build-fuzz/bin/fuzz_*; do
  objcopy --strip-debug "$b" "$stage/bin/$(basename "$b")"
  # Every library outside the C and C++ runtimes goes along (ldd prints "name => path (address)").
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
    case "$name" in
      libc.so.* | libm.so.* | libresolv.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux* | libstdc++.so.* | libgcc_s.so.*) ;;
      *) cp -L "$path" "$stage/lib/$name" ;;
    esac
  done
done
if [ -d build-fuzz/corpus ]; then cp -r build-fuzz/corpus/. "$stage/corpus/"; fi
mkdir -p .fuzz
tar -C "$stage" -cf - bin lib corpus | xz -T2 -6 > .fuzz/fuzz.tar.xz
rm -rf "$stage"
size=$(stat -c %s .fuzz/fuzz.tar.xz)
echo "stage-fuzz: .fuzz/fuzz.tar.xz is $((size / 1024)) KiB (libraries: $(tar -tJf .fuzz/fuzz.tar.xz | grep '^lib/.' | tr '\n' ' '))"
[ "$size" -lt $((60 * 1024 * 1024)) ] || { echo "stage-fuzz: over the 64 MiB carry limit" >&2; exit 1; }
