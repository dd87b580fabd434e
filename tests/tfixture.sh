#!/bin/sh
# attnacc: oracle regression check: stored inputs keep their sha256, and their golden outputs (MPFR, 256 bits) still match the oracle.
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
A=${top_builddir:-.}/experiments/attnacc
J=${top_builddir:-.}/tests/jget
F=${top_srcdir:-..}/fixtures
[ -x "$A" ] || { echo "tfixture: $A not built"; exit 1; }
[ -f "$F/MANIFEST" ] || { echo "tfixture: $F/MANIFEST missing"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tfixture.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }

# 1. Every file listed in the MANIFEST has the recorded sha256 (and every .npy is listed).
n=0
grep -v '^#' "$F/MANIFEST" | while read -r file shape dtype sum; do
  [ -n "$file" ] || continue
  got=$(sha256sum "$F/$file" 2>/dev/null | cut -d' ' -f1)
  [ "$got" = "$sum" ] || echo "FAIL tfixture sha256: $file is ${got:-missing}, MANIFEST says $sum"
  head -c 128 "$F/$file" | grep -aq "'descr': '$dtype'" || echo "FAIL tfixture dtype: $file is not $dtype"
done >"$T/sums"
[ -s "$T/sums" ] && { cat "$T/sums"; fails=$((fails + 1)); }
# every .npy at any depth (a GPU case keeps its inputs and outputs in subfolders)
for f in $(cd "$F" && find . -name '*.npy' | sed 's|^\./||' | sort); do
  grep -q "^$f " "$F/MANIFEST" || FAIL "tfixture: $f is not in the MANIFEST"
  n=$((n + 1))
done
[ $n -ge 8 ] || FAIL "tfixture: only $n fixture files"

# 2. The golden outputs (MPFR oracle at 256 bits, rounded to double) against
#    today's oracle: both paths must agree to far better than 1e-14.
score() { # score NAME ORACLE-ARGS...
  name=$1
  shift
  "$A" score --inputs "$F/$name" --grads "$F/$name/golden" --json "$@" >"$T/s.json" 2>"$T/e" ||
    { FAIL "tfixture $name ($*): exit status: $(cat "$T/e")"; return; }
  for o in o dq dk dv; do
    v=$("$J" "$T/s.json" "runs.0.outputs.$o.rel_l2" "runs.0.outputs.$o.nan" "runs.0.outputs.$o.inf" | tr '\n' ' ')
    [ -n "$v" ] || { FAIL "tfixture $name ($*): output $o missing"; continue; }
    echo "$v" | awk -v what="tfixture $name ($*) $o" '{
      if ($1 == "null" || $1 + 0 >= 1e-14) print "FAIL " what ": rel_l2 " $1 " is not below 1e-14"
      if ($2 != 0 || $3 != 0) print "FAIL " what ": NaN or Inf"
    }' >>"$T/fails"
  done
}
: >"$T/fails"
score small --oracle fast
score small --oracle mpfr
score causal-gqa --causal --oracle fast
score causal-gqa --causal --oracle mpfr --prec 160
# Scoring without the mask must not match: the check can fail.
"$A" score --inputs "$F/causal-gqa" --grads "$F/causal-gqa/golden" --json >"$T/s.json" 2>/dev/null
v=$("$J" "$T/s.json" runs.0.outputs.dq.rel_l2)
awk -v v="$v" 'BEGIN { exit !(v != "" && v != "null" && v + 0 > 1e-6) }' ||
  FAIL "tfixture: the causal golden also matches the oracle without the mask (dq rel_l2 '$v')"
if [ -s "$T/fails" ]; then
  cat "$T/fails"
  fails=$((fails + 1))
fi

if [ $fails -ne 0 ]; then
  echo "tfixture: $fails failure(s)"
  exit 1
fi
echo "tfixture: ok"
