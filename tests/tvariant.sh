#!/bin/sh
# attnacc: tests of a variant sweep: table4's --d, --sigma, --kv-heads, the naive reference added for the fa rule, the verdicts the sweep prints, and the report's variant-against-base ratios (checked against an awk reading of results.csv).
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
A=${top_builddir:-.}/experiments/attnacc
[ -x "$A" ] || { echo "tvariant: $A not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tvariant.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_WAIT_POLICY
export ATTNACC_PLOTS_DIR="${top_srcdir:-.}/plots"
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }
# col FILE NAME: the column index of NAME in the header of FILE
col() { head -1 "$1" | tr , '\n' | grep -n -x "$2" | cut -d: -f1; }

# ---- a variant sweep: fa2 and fa2 with an FP32 dS, two head dims, two seeds ----
"$A" sweep --experiment table4 --variants fa2,fa2:bwd.ds_fmt=fp32 --n 32,64 --d 8,16 --seeds 2 --out "$T/in/v" \
  >"$T/out" 2>"$T/err" || FAIL "tvariant: the sweep failed: $(cat "$T/err")"
R=$T/in/v/results.csv
grep -q '^note: added naive-bf16 to --variants' "$T/out" || FAIL "tvariant: no note that naive-bf16 was added: $(cat "$T/out")"
[ "$(awk -F, -v c="$(col "$R" recipe)" '$c == "naive-bf16"' "$R" | wc -l)" -eq 64 ] ||
  FAIL "tvariant: want 64 naive-bf16 rows (2 n x 2 masks x 2 d x 2 seeds x 4 outputs)"
[ "$(awk -F, -v c="$(col "$R" d)" 'NR > 1 { print $c }' "$R" | sort -u | tr '\n' ' ')" = "16 8 " ] ||
  FAIL "tvariant: --d 8,16 is not the d column"
# the verdicts: one line per recipe, the variant's ratios to its base
grep -q '^verdicts (pass rule' "$T/out" || FAIL "tvariant: the sweep printed no verdicts: $(cat "$T/out")"
for r in fa2 'fa2:bwd.ds_fmt=fp32' naive-bf16; do
  grep -q "^  $r: pass rule \(pass\|FAIL\) ([0-9]* of 8 cells fail)" "$T/out" || FAIL "tvariant: no verdict line for $r"
done
grep -q '^    against fa2 (rel_l2 ratio' "$T/out" || FAIL "tvariant: no ratio line for the variant"
# --no-naive leaves it out
"$A" sweep --experiment table4 --variants fa2 --no-naive --n 32 --d 8 --masks dense --out "$T/nn" >/dev/null 2>&1 ||
  FAIL "tvariant: --no-naive sweep failed"
grep -q ',naive-bf16,' "$T/nn/results.csv" 2>/dev/null && FAIL "tvariant: --no-naive still ran naive-bf16"

# ---- the report: variant against base, no published boilerplate ----
"$A" report --in "$T/in" --out "$T/r" >/dev/null 2>"$T/err" || FAIL "tvariant report: exit $? ($(cat "$T/err"))"
M=$T/r/report.md
grep -q '^\*\*Variants against their base\*\*' "$M" || FAIL "tvariant: the summary has no variant table"
grep -q '^### Variant `fa2:bwd.ds_fmt=fp32` against its base `fa2`' "$M" || FAIL "tvariant: no variant section"
grep -q 'published comparison is left out' "$M" || FAIL "tvariant: no note that the published comparison is left out"
grep -i 'published' "$M" | grep -v 'left out' | grep -q . && FAIL "tvariant: published rows in a sweep without tlx or fa4"
grep -q '^| recipe | dense d=8 32 | dense d=8 64 | dense d=16 32 |' "$M" || FAIL "tvariant: d is not a panel of the pass table"
# the ratios, from the CSV: per (n, mask, d, seed) rel_l2 of the variant over fa2's; the extremes over all of them
# for dq (order-free, so the awk and the C agree to every digit), and the mean over the seeds of one cell
ratios() {
  awk -F, -v t="$1" -v cr="$(col "$R" recipe)" -v ct="$(col "$R" tensor)" -v ce="$(col "$R" rel_l2)" \
    -v cn="$(col "$R" n)" -v cm="$(col "$R" mask)" -v cd="$(col "$R" d)" -v cs="$(col "$R" seed)" '
    NR > 1 && $ct == t { k = $cn SUBSEP $cm SUBSEP $cd SUBSEP $cs
      if ($cr == "fa2") b[k] = $ce; else if ($cr == "fa2:bwd.ds_fmt=fp32") v[k] = $ce }
    END { for (k in v) { split(k, p, SUBSEP); print p[1], p[2], p[3], p[4], v[k] / b[k] } }' "$R"
}
want=$(ratios dq | awk 'NR == 1 || $5 < lo { lo = $5 } NR == 1 || $5 > hi { hi = $5 } END { printf "[%.3g..%.3g]", lo, hi }')
grep '^| fa2:bwd.ds_fmt=fp32 | fa2 |' "$M" | grep -qF "$want" ||
  FAIL "tvariant: the summary's dq ratios are not $want: $(grep '^| fa2:bwd.ds_fmt=fp32 | fa2 |' "$M")"
cell=$(ratios dk | awk '$1 == 64 && $2 == "causal" && $3 == 16 { s += $5; n++ } END { printf "%.3g", s / n }')
grep -q "^| dk | causal d=16 | [^|]* | $cell \[" "$M" ||
  FAIL "tvariant: dk causal d=16 n=64 is not $cell: $(grep '^| dk | causal d=16 |' "$M")"
# o and dv do not read dS: the variant's error is fa2's, ratio exactly 1
grep -q '^| o | dense d=8 | 1 \[1..1\] | 1 \[1..1\] |$' "$M" || FAIL "tvariant: o's ratio must be exactly 1"

# the ratio plot's data: one block per output and (variant, panel), 4 x 4 here; the dq dense d=8 block's n = 32
# line holds the table's mean
gp=${ATTNACC_GNUPLOT:-$(command -v gnuplot || true)}
if [ -n "$gp" ] && [ -x "$gp" ]; then
  [ -s "$T/r/v_variants.png" ] || FAIL "tvariant: no ratio plot v_variants.png"
  [ "$(grep -c '^# ' "$T/r/v_variants.dat")" -eq 17 ] || FAIL "tvariant: v_variants.dat has not 16 blocks"
  m=$(awk '/^# dq fa2:bwd.ds_fmt=fp32\/fa2 \(dense d=8\)/ { on = 1; next } on && $1 == 32 { printf "%.3g", $2; exit }' "$T/r/v_variants.dat")
  grep -q "^| dq | dense d=8 | $m \[" "$M" || FAIL "tvariant: the plot's dq dense d=8 n=32 mean $m is not the table's"
fi

# ---- --sigma, --kv-heads ----
"$A" sweep --experiment table4 --variants fa2 --no-naive --n 32 --d 8 --masks dense --sigma 0.001,1000 \
  --heads 4 --kv-heads 2 --out "$T/s" >/dev/null 2>"$T/err" || FAIL "tvariant --sigma: exit $? ($(cat "$T/err"))"
S=$T/s/results.csv
# o is a convex combination of the rows of v ~ sigma N(0,1): |o| < 10 sigma, and one-hot rows at sigma = 1000
awk -F, -v cs="$(col "$S" sigma)" -v ct="$(col "$S" tensor)" -v cm="$(col "$S" ref_max_abs)" -v ck="$(col "$S" kv_heads)" '
  NR > 1 && $ct == "o" { n++; if ($ck != 2) bad = bad " kv_heads " $ck
    if ($cs == 0.001 && !($cm < 0.01)) bad = bad " sigma 0.001: " $cm
    if ($cs == 1000 && !($cm > 100 && $cm < 10000)) bad = bad " sigma 1000: " $cm }
  END { if (n != 2 || bad != "") { print n, bad; exit 1 } }' "$S" || FAIL "tvariant --sigma/--kv-heads: rows do not scale"
"$A" sweep --experiment table4 --variants fa2 --n 32 --heads 4 --kv-heads 3 --out "$T/k3" >/dev/null 2>"$T/err"
[ $? -eq 2 ] && grep -q 'does not divide' "$T/err" || FAIL "tvariant: --kv-heads 3 with 4 heads must exit 2 naming it"
[ -e "$T/k3" ] && FAIL "tvariant: --kv-heads 3 created the folder"
# any positive sigma is a cell (133120, pytorch 121558, is not a power of two); zero is refused
"$A" sweep --experiment nanmap --variants fa2 --sigma 0 --out "$T/n0" >/dev/null 2>"$T/err"
[ $? -eq 2 ] && grep -q -- '--sigma: 0 is out of range' "$T/err" || FAIL "tvariant: nanmap --sigma 0 must exit 2 naming it"
[ -e "$T/n0" ] && FAIL "tvariant: --sigma 0 created the folder"
"$A" sweep --experiment nanmap --variants fa2 --n 16 --masks dense --sigma 0.25,4 --d 8,16 --out "$T/nm" >/dev/null 2>"$T/err" ||
  FAIL "tvariant nanmap --sigma: exit $? ($(cat "$T/err"))"
[ "$(awk -F, -v c="$(col "$T/nm/results.csv" log2_sigma)" 'NR > 1 { print $c }' "$T/nm/results.csv" | sort -un | tr '\n' ' ')" = "-2 2 " ] ||
  FAIL "tvariant: nanmap --sigma 0.25,4 is not log2_sigma -2, 2"
# the map keeps each d apart: one threshold column per (mask, d)
"$A" report --in "$T/nm" --out "$T/nmr" >/dev/null 2>&1 || FAIL "tvariant: nanmap report failed"
grep -q '^| recipe | dense d=8 16: fail / Inf-NaN / exact overflow | dense d=16 16: ' "$T/nmr/report.md" ||
  FAIL "tvariant: the nanmap report does not keep d=8 and d=16 apart"

[ $fails -eq 0 ] && echo "tvariant: ok"
[ $fails -eq 0 ]
