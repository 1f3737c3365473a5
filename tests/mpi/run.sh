#!/usr/bin/env bash
# Runs tests/mpi/mpi_train.cpp under mpirun (Open MPI from Debian: openmpi-bin).
#   run.sh BINARY parity RANKS OPTIMIZER [ORDER]   N ranks vs one process; passes when the program prints PASS
#   run.sh BINARY dead RANKS                       rank 1 exits mid-run: the others must fail with a clear error fast
#   run.sh BINARY stall RANKS                      rank 1 hangs mid-run: the others must time out and abort the job
#   run.sh BINARY all                              every case above at 2 and 3 ranks (slow on lavapipe)
set -uo pipefail
bin=$1
mode=$2
if ! command -v mpirun >/dev/null; then
  echo "FAIL: mpirun not found: install openmpi-bin (scripts/install-deps.sh)"
  exit 1
fi
# Open MPI refuses to run as root without these; --oversubscribe: more ranks than cores (CI has 2).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# No network interfaces to probe in a container: shared memory between ranks on one host.
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
mpi() { local n=$1; shift; timeout 280 mpirun --oversubscribe --bind-to none -np "$n" "$bin" "$@"; }

parity() {
  local out rc
  out=$(mpi "$1" --optimizer "$2" --order "${3:-ranked}" 2>&1)
  rc=$?
  echo "$out"
  if [ $rc -ne 0 ] || ! grep -q "^PASS: $1 ranks vs one process" <<<"$out"; then
    echo "FAIL: $1 ranks, $2, order ${3:-ranked} (exit $rc)"
    return 1
  fi
}

# A rank that dies or hangs: the job must end with a non-zero status well before the harness timeout, and with
# a message that says what happened (Open MPI's for a dead process, ours for a collective timeout).
broken() {
  local n=$1 how=$2 want=$3 out rc start
  start=$(date +%s)
  out=$(mpi "$n" --optimizer sgd --steps 40 "--$how-at" 5 --timeout 10 2>&1)
  rc=$?
  echo "$out" | tail -n 25
  local took=$(( $(date +%s) - start ))
  if [ $rc -eq 0 ] || [ $rc -eq 124 ] || ! grep -Eq "$want" <<<"$out"; then
    echo "FAIL: $how rank at $n ranks: exit $rc after ${took}s, expected a failure matching /$want/"
    return 1
  fi
  echo "PASS: $how rank at $n ranks: exit $rc after ${took}s"
}
dead() { broken "$1" die "exited on signal|exited with status|did not call finalize|non-zero status|a rank died or hangs"; }
stall() { broken "$1" stall "a rank died or hangs"; }

case $mode in
  parity) parity "$3" "$4" "${5:-ranked}" ;;
  dead) dead "$3" ;;
  stall) stall "$3" ;;
  all)
    fails=0
    for n in 2 3; do
      for opt in sgd adam; do parity $n $opt ranked || fails=$((fails + 1)); done
      parity $n sgd mpi || fails=$((fails + 1))
      dead $n || fails=$((fails + 1))
      stall $n || fails=$((fails + 1))
    done
    echo "tests/mpi/run.sh all: $fails failure(s)"
    [ $fails -eq 0 ] ;;
  *) echo "usage: run.sh BINARY parity|dead|stall|all ..."; exit 2 ;;
esac
