#!/bin/sh
# attnacc: a 2-rank MPI sweep (mpirun) must give the same results.canon.csv as one process; skipped without MPI.
# SPDX-License-Identifier: LGPL-3.0-or-later
prog=./tests/tsweep_mpi
if [ ! -x "$prog" ]; then
  echo "tsweep_mpi: not built (configure found no MPI): skipped"
  exit 77
fi
mpirun=${MPIRUN:-mpirun}
if ! command -v "$mpirun" >/dev/null 2>&1; then
  echo "tsweep_mpi: mpirun not found: skipped"
  exit 77
fi
extra=
if [ "$(id -u)" = 0 ]; then extra=--allow-run-as-root; fi
# Under AddressSanitizer, Open MPI's leaks are suppressed by name
# (build-aux/lsan-openmpi.supp), which needs full stacks: its plugins are
# unloaded at MPI_Finalize, where the fast unwinder loses their frames.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
export ASAN_OPTIONS
rm -rf tsweep_mpi.dir
# The reference: the same program as a single rank.
"$mpirun" $extra --oversubscribe -np 1 "$prog" tsweep_mpi.dir/one || exit 1
"$mpirun" $extra --oversubscribe -np 2 "$prog" tsweep_mpi.dir/two || exit 1
if ! cmp tsweep_mpi.dir/one/rank0/results.canon.csv tsweep_mpi.dir/two/rank0/results.canon.csv; then
  echo "FAIL tsweep_mpi: results.canon.csv of 2 ranks differs from 1 rank"
  exit 1
fi
echo "tsweep_mpi: ok"
rm -rf tsweep_mpi.dir
exit 0
