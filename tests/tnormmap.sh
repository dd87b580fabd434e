#!/bin/sh
# attnacc: test of the normmap command on a tiny grid: CSV rows, where the fixed shift must and must not break, the summary.
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
A=${top_builddir:-.}/experiments/attnacc
[ -x "$A" ] || { echo "tnormmap: $A not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tnormmap.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }

# n = 256, d = 16, sigma 0.5 and 6. Scaled scores have standard deviation
# sigma^2: at sigma = 6 (sd 36 natural units) the largest of the 65536
# scores is about 4.3 * 36 = 155 natural = 223 log2 units, far above the
# 128 + shift (0) where the fixed shift's row sum overflows, so recip must
# hold NaN/Inf there; at sigma = 0.5 (sd 0.25) every row LSE is near
# log2(256) = 8: nothing may break and the guarded route may not recover.
"$A" normmap --out "$T/m" --n 256 --d 16 --sigma 0.5,6 --seeds 1 --reference fp64 --threads 1 >"$T/out" 2>"$T/err" ||
  FAIL "tnormmap: exit status $? ($(cat "$T/err"))"
csv="$T/m/results.csv"
[ -s "$csv" ] || FAIL "tnormmap: no results.csv"
# 2 masks x 2 sigma cells; dense 3 recipes, causal 2; 4 tensors each: (3 + 2) * 2 * 4 = 40 rows + header
[ "$(wc -l <"$csv")" -eq 41 ] || FAIL "tnormmap: results.csv has $(wc -l <"$csv") lines, expected 41"
head -1 "$csv" | grep -q "tiles_flagged" || FAIL "tnormmap: no tiles_flagged column"
col() { head -1 "$csv" | tr ',' '\n' | grep -n -x "$1" | cut -d: -f1; }
cm=$(col mask); cs=$(col sigma); cr=$(col recipe); cn=$(col nonfinite); cf=$(col tiles_flagged); ct=$(col tensor)
line() { awk -F, -v m="$1" -v s="$2" -v r="$3" -v cm="$cm" -v cs="$cs" -v cr="$cr" -v ct="$ct" \
  '$cm == m && $cs == s && $cr == r && $ct == "o"' "$csv"; }
[ "$(line dense 6 recip | cut -d, -f"$cn")" = 1 ] || FAIL "tnormmap: the fixed shift did not overflow at sigma 6"
[ "$(line dense 0.5 recip | cut -d, -f"$cn")" = 0 ] || FAIL "tnormmap: the fixed shift broke at sigma 0.5"
[ "$(line dense 6 fa2 | cut -d, -f"$cn")" = 0 ] || FAIL "tnormmap: fa2 broke at sigma 6"
[ "$(line causal 6 recip-causal | cut -d, -f"$cn")" = 0 ] || FAIL "tnormmap: the guarded route holds NaN/Inf at sigma 6"
[ "$(line causal 6 recip-causal | cut -d, -f"$cf")" -ge 1 ] || FAIL "tnormmap: the guarded route did not recover at sigma 6"
[ "$(line causal 0.5 recip-causal | cut -d, -f"$cf")" = 0 ] || FAIL "tnormmap: the guarded route flagged at sigma 0.5"
grep -q "NaN/Inf from sigma=6" "$T/out" || FAIL "tnormmap: summary does not name sigma 6: $(cat "$T/out")"
grep -q "overflow" "$T/out" || FAIL "tnormmap: summary does not say overflow"
[ "$fails" -eq 0 ] || exit 1
echo "tnormmap: ok"
