#!/usr/bin/env bash
# Puts Debian's Open MPI (mpirun, libmpi.so.40 and the libraries they need) into ./.mpi (git-ignored), for the
# GPU machine (Ubuntu 24.04), where Open MPI may be absent: scripts/device/mpi-scaling.sh unpacks it there. Run here,
# once, from the project root. The binaries themselves never link libmpi (distributed/ loads it with dlopen).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
grep -qx '/.mpi/' .git/info/exclude 2>/dev/null || echo '/.mpi/' >> .git/info/exclude
mkdir -p .mpi /tmp/amd64/partial
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
apt-get $o update -qq
# openmpi-bin and libopenmpi3 with their library dependencies that a plain Ubuntu 24.04 may lack (from
# `apt-cache depends --recurse openmpi-bin libopenmpi3`, minus what every Ubuntu has: libc6, libstdc++6, zlib, ...).
(cd .mpi && apt-get $o download openmpi-bin openmpi-common libopenmpi3 libpmix2 libevent-core-2.1-7 \
  libevent-pthreads-2.1-7 libhwloc15 libfabric1 libucx0 libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200 \
  libpsm2-2 libpsm-infinipath1 libnuma1 libmunge2 libpciaccess0 libxnvctrl0 libxml2 libicu72 2>&1 | grep -v '^W:' || true)
cat > .mpi/prelude.sh <<'PRE'
# Source in a device run after .gl/prelude.sh: unpacks the carried Open MPI into / and sets it up for root.
for f in .mpi/*.deb; do dpkg -x "$f" / ; done
ldconfig
[ -e /usr/bin/mpirun ] || ln -sf /usr/bin/orterun /usr/bin/mpirun
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
PRE
du -sh .mpi
