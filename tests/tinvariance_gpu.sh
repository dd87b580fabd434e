#!/bin/sh
# attnacc: `attnacc invariance` against the H200 (fixtures/h200-batch): split counts, which batch sizes change sequence 0's bits, and the bits themselves.
# SPDX-License-Identifier: LGPL-3.0-or-later
# fixtures/h200-batch/compare.py redraws each shape's sequence 0, runs attnacc invariance on it and compares
# with the H200's launches and output rows; it fails on any difference. Measured when the data came in: every
# split count, every changed/unchanged batch size and every stored element agreed on all 36 shapes
# (9 calibration, 27 held out). By default a subset that runs in seconds, both roles; all 36 with
# ATTNACC_CHECK_EXPENSIVE=1 (minutes).
set -u
S=${top_srcdir:-.}
A=${top_builddir:-.}/experiments/attnacc
D=$S/fixtures/h200-batch
[ -x "$A" ] || { echo "tinvariance_gpu: $A not built"; exit 1; }
[ -f "$D/summary.json" ] || { echo "SKIP: $D/summary.json absent"; exit 77; }
py=
for cand in "${PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$cand" ] || continue
  if "$cand" -c 'import numpy' >/dev/null 2>&1; then py=$cand; break; fi
done
[ -n "$py" ] || { echo "SKIP: no python3 with numpy"; exit 77; }
shapes="q1-k512-mha-dense q1-k512-gqa-dense q1-k4096-mha-dense q1-k4096-gqa-dense q1-k16384-mha-dense
 q1-k16384-gqa-dense q128-k512-mha-dense q128-k512-mha-causal q128-k512-gqa-dense q128-k512-gqa-causal
 q128-k4096-gqa-causal q1000-k512-gqa-causal"
[ "${ATTNACC_CHECK_EXPENSIVE:-0}" = 1 ] && shapes=
# shellcheck disable=SC2086
"$py" "$D/compare.py" "$A" "$D" $shapes || { echo "FAIL tinvariance_gpu: the emulation and the H200 disagree (lines marked <--)"; exit 1; }
echo "tinvariance_gpu: ok"
