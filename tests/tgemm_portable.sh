#!/bin/sh
# attnacc: the gemm tests on the portable paths (ATTNACC_GEMM_KERNEL=scalar), as a build or CPU without AVX-512 runs them.
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
B=${top_builddir:-.}/tests
for t in tgemm tgemm_tc; do
  [ -x "$B/$t" ] || { echo "tgemm_portable: $B/$t not built"; exit 1; }
done
fails=0
for t in tgemm tgemm_tc; do
  out=$(ATTNACC_GEMM_KERNEL=scalar "$B/$t" 2>&1)
  st=$?
  printf '%s\n' "$out" | tail -n 3
  # the forced choice must have been taken, or the run proves nothing about the portable paths
  printf '%s\n' "$out" | grep -q 'kernel.*scalar' || { echo "FAIL tgemm_portable: $t did not report the scalar kernel"; fails=$((fails + 1)); }
  [ "$st" -eq 0 ] || { echo "FAIL tgemm_portable: $t exit status $st with ATTNACC_GEMM_KERNEL=scalar"; fails=$((fails + 1)); }
done
[ "$fails" -eq 0 ] && echo "tgemm_portable: ok"
[ "$fails" -eq 0 ]
