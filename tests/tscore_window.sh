#!/bin/sh
# attnacc: `attnacc score` takes run's problem features: outputs saved by `run --window L,R` score, under the same --window L,R, exactly as run measured them (a second path to the same numbers), and far off without it.
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
A=${top_builddir:-.}/experiments/attnacc
[ -x "$A" ] || { echo "tscore_window: $A not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tscore_window.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }
# rel_l2 of OUT in a table of run or score (column 4)
rel() { awk -v o="$2" '$2 == o { print $4; exit }' "$1"; }

for spec in "8,0" "4,4" "-1,2"; do
  "$A" run --variant fa2 --window "$spec" --n 64 --d 16 --seed 3 --save "$T/w" >"$T/run" 2>"$T/err" ||
    FAIL "tscore_window $spec: run failed: $(cat "$T/err")"
  "$A" score --inputs "$T/w" --grads "$T/w" --window "$spec" --no-fail >"$T/score" 2>"$T/err" ||
    FAIL "tscore_window $spec: score failed: $(cat "$T/err")"
  for o in o dq dk dv; do
    [ -n "$(rel "$T/run" "$o")" ] && [ "$(rel "$T/run" "$o")" = "$(rel "$T/score" "$o")" ] ||
      FAIL "tscore_window $spec: $o rel_l2 of score $(rel "$T/score" "$o") is not run's $(rel "$T/run" "$o")"
  done
  grep -q "window_size=$spec" "$T/score" || FAIL "tscore_window $spec: the problem line does not name the window"
  # without the window the oracle is another problem: errors of order 1
  "$A" score --inputs "$T/w" --grads "$T/w" --no-fail >"$T/dense" 2>&1
  awk -v r="$(rel "$T/dense" dq)" 'BEGIN { exit !(r > 0.1) }' || FAIL "tscore_window $spec: dense scoring is not far off"
done
"$A" score --inputs "$T/w" --grads "$T/w" --window 8,x >/dev/null 2>"$T/err"
[ $? -eq 2 ] && grep -q "is not W or L,R" "$T/err" || FAIL "tscore_window: --window 8,x must exit 2 naming it"

[ $fails -eq 0 ] && echo "tscore_window: ok"
[ $fails -eq 0 ]
