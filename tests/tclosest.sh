#!/bin/sh
# attnacc: `attnacc closest` names the preset a real kernel's outputs come from: the H200 flash gradients are fa2-h100's.
# SPDX-License-Identifier: LGPL-3.0-or-later
# Fixture: fixtures/h200-sdpa (PyTorch 2.11 SDPA FLASH_ATTENTION on an H200, experiments/README-gpu.md). Its o is
# 3.5 % more accurate than a one-pass online softmax (split-KV forward), which fa2-h100 models and fa2 does not; its
# dq/dk are 22 % more accurate than the efficient backend's. So closest must rank fa2-h100 first with a distance
# below 0.5 %, fa2 behind it, efficient-h100 last; bad usage exits 2.
set -u
A=${top_builddir:-.}/experiments/attnacc
F=${top_srcdir:-..}/fixtures/h200-sdpa
[ -x "$A" ] || { echo "tclosest: $A not built"; exit 1; }
[ -f "$F/inputs/q.npy" ] || { echo "tclosest: $F missing (skipped)"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tclosest.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }
"$A" closest --inputs "$F/inputs" --grads "$F/flash-dense" --variants fa2,efficient-h100,fa2-h100 --threads 2 >"$T/out" ||
  FAIL "closest exited $?"
grep -q '^closest: fa2-h100 (0\.[0-4][0-9]%)' "$T/out" || FAIL "closest is not fa2-h100 below 0.5 %: $(grep '^closest' "$T/out")"
order=$(awk '/^preset/ { on = 1; next } on && NF == 6 { printf "%s ", $1 }' "$T/out")
[ "$order" = "fa2-h100 fa2 efficient-h100 " ] || FAIL "ranking '$order'"
"$A" closest --inputs "$F/inputs" >/dev/null 2>&1; [ $? -eq 2 ] || FAIL "no --grads: want exit 2"
"$A" closest --inputs "$F/inputs" --grads "$T/none" --variants fa2 >/dev/null 2>&1; [ $? -eq 2 ] || FAIL "missing grads: want exit 2"
[ "$fails" -eq 0 ] && echo "tclosest: ok"
exit $((fails > 0))
