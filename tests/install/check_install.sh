#!/usr/bin/env bash
# Installs the build tree into a scratch prefix and builds tests/install/ (an outside project) against it:
# with find_package(meganeura) (static and shared targets) and with pkg-config (shared, then --static). Each
# consumer must run and pass its own checks; the installed `meganeura` command must answer --version.
# usage: check_install.sh BUILD_DIR SCRATCH_DIR
set -euo pipefail
build=$(realpath "$1")
scratch=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$scratch"
mkdir -p "$scratch"
scratch=$(realpath "$scratch")
prefix=$scratch/prefix
cmake --install "$build" --prefix "$prefix" >"$scratch/install.log"
for f in include/meganeura/meganeura.hpp include/meganeura/ir/init.hpp lib/libmeganeura.a lib/libmeganeura.so \
         lib/cmake/meganeura/meganeuraConfig.cmake lib/cmake/meganeura/meganeuraConfigVersion.cmake \
         lib/pkgconfig/meganeura.pc bin/meganeura share/doc/meganeura/LICENSE; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed under $prefix" >&2; exit 1; }
done
version=$("$prefix/bin/meganeura" --version)
grep -q "^meganeura " <<<"$version" || { echo "FAIL: installed meganeura --version" >&2; exit 1; }

# CMake package.
cmake -S "$here" -B "$scratch/cmake" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$scratch/cmake" >/dev/null
"$scratch/cmake/consumer_static"
LD_LIBRARY_PATH="$prefix/lib" "$scratch/cmake/consumer_shared"
# ldd's output is captured before grep reads it: `ldd | grep -q` under pipefail failed now and then when grep
# exited at its match and ldd, still writing, died of SIGPIPE (the match read as a miss).
deps=$(ldd "$scratch/cmake/consumer_shared")
if grep -q "$prefix/lib/libmeganeura.so" <<<"$deps"; then :; else
  deps=$(LD_LIBRARY_PATH="$prefix/lib" ldd "$scratch/cmake/consumer_shared")
  grep -q "$prefix/lib/libmeganeura.so" <<<"$deps" ||
    { echo "FAIL: consumer_shared does not load the installed libmeganeura.so" >&2; exit 1; }
fi

# pkg-config.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
[ "$(pkg-config --modversion meganeura)" = "$(sed -n 's/^Version: //p' "$prefix/lib/pkgconfig/meganeura.pc")" ]
# shellcheck disable=SC2046
c++ -O1 -o "$scratch/pc_shared" "$here/consumer.cpp" $(pkg-config --cflags --libs meganeura) -Wl,-rpath,"$prefix/lib"
"$scratch/pc_shared"
# shellcheck disable=SC2046
c++ -O1 -o "$scratch/pc_static" "$here/consumer.cpp" $(pkg-config --cflags meganeura) "$prefix/lib/libmeganeura.a" \
    $(pkg-config --static --libs meganeura | sed 's/-lmeganeura / /')
"$scratch/pc_static"
deps=$(ldd "$scratch/pc_static")
if grep -q libmeganeura <<<"$deps"; then echo "FAIL: pc_static loads libmeganeura.so" >&2; exit 1; fi
echo "OK: installed tree usable through find_package and pkg-config"
