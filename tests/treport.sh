#!/bin/sh
# attnacc: tests of `attnacc report`: tables with the published numbers, plots when gnuplot is present, tables and an install note without it.
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
A=${top_builddir:-.}/experiments/attnacc
[ -x "$A" ] || { echo "treport: $A not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/treport.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
# idle OpenMP threads sleep instead of spinning: the machine is shared with other tests
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_WAIT_POLICY
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }
# plots/ of the source tree (the build may be out of tree)
export ATTNACC_PLOTS_DIR="${top_srcdir:-.}/plots"

# A small results folder: the smoke grid (table4-shaped), and a table3 sweep (as attnacc main lays them out).
mkdir -p "$T/in"
"$A" sweep --experiment smoke --quick --variants fa2,nki,naive-bf16 --out "$T/in/grid" >/dev/null 2>"$T/err" ||
  { echo "treport: the sweep failed: $(cat "$T/err")"; exit 1; }
"$A" table3 --samples 20000 --no-exhaustive --search-samples 1024 --out "$T/in/table3" >/dev/null 2>"$T/err" ||
  FAIL "treport: table3 failed: $(cat "$T/err")"

expect_tables() {
  md=$1
  for pat in '^# attnacc accuracy report' \
    '^### Pass rule |a - b| <= 0.01 + 0.01 |b|' \
    '^| recipe | dense 16 | dense 32 | causal 16 | causal 32 |' \
    '^### rel_l2 of o' '^### rel_l2 of dq' '^### rel_l2 of dk' '^### rel_l2 of dv' \
    '1.47e-2' '2.37e-3' \
    '^### Flash-attention test rule' \
    '^| fa2 | dense |' '^| nki | causal |' \
    'Table 3' '1.0440' '1.0687' '6.93e-2' '5.85e-2' \
    'git ' 'seeds: 1..2' 'fa2 \[[0-9a-f]\{8\}\]'; do
    grep -q -- "$pat" "$md" || FAIL "treport $2: report.md lacks '$pat'"
  done
  # the pass table must agree with the CSV's own pass column (a FAIL cell exactly where a row has pass 0)
  nfail_csv=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next } $h["pass"] == 0 { n++ } END { print n + 0 }' "$T/in/grid/results.csv")
  if [ "$nfail_csv" -eq 0 ]; then
    grep -q '| FAIL' "$md" && FAIL "treport $2: a FAIL in the pass table but every row passes"
  else
    grep -q '| FAIL' "$md" || FAIL "treport $2: $nfail_csv failing rows but no FAIL in the pass table"
  fi
}

# ---- with gnuplot (when there is one) ----
"$A" report --in "$T/in" --out "$T/r1" >"$T/out" 2>"$T/err" || FAIL "treport: exit $? ($(cat "$T/err"))"
[ "$(tail -1 "$T/out")" = "$T/r1/report.md" ] || FAIL "treport: last line is not the report path: $(cat "$T/out")"
expect_tables "$T/r1/report.md" "with gnuplot"
gp=${ATTNACC_GNUPLOT:-$(command -v gnuplot || true)}
if [ -n "$gp" ] && [ -x "$gp" ]; then
  for t in o dq dk dv; do
    for ext in png svg; do
      f="$T/r1/grid_$t.$ext"
      [ -s "$f" ] || FAIL "treport: $f missing"
    done
    grep -q "(grid_$t.png)" "$T/r1/report.md" || FAIL "treport: report.md does not show grid_$t.png"
  done
  # a PNG starts with its 8-byte signature
  sig=$(od -An -c -N4 "$T/r1/grid_dq.png" 2>/dev/null | tr -d ' ')
  [ "$sig" = "211PNG" ] || FAIL "treport: grid_dq.png is not a PNG (starts with '$sig')"
  grep -q '<svg' "$T/r1/grid_dq.svg" 2>/dev/null || FAIL "treport: grid_dq.svg is not SVG"
  grep -q 'No plots' "$T/r1/report.md" && FAIL "treport: install note although gnuplot is present"
else
  echo "treport: no gnuplot here: the plot checks are skipped"
fi

# ---- without gnuplot: tables and the install note ----
ATTNACC_GNUPLOT="$T/no/such/gnuplot" "$A" report --in "$T/in" --out "$T/r2" >"$T/out2" 2>"$T/err2" ||
  FAIL "treport no gnuplot: exit $? ($(cat "$T/err2"))"
expect_tables "$T/r2/report.md" "without gnuplot"
grep -q 'apt-get install gnuplot-nox' "$T/r2/report.md" || FAIL "treport no gnuplot: no install note in report.md"
grep -q 'gnuplot-nox' "$T/err2" || FAIL "treport no gnuplot: no install note on stderr"
ls "$T/r2"/*.png >/dev/null 2>&1 && FAIL "treport no gnuplot: PNG files without gnuplot"

# ---- a nanmap folder: the threshold table agrees with an awk reading of the CSV, and the heatmap ----
"$A" sweep --experiment nanmap --quick --n 16 --masks dense --variants fa2 --out "$T/in/map" >/dev/null 2>"$T/err" ||
  FAIL "treport nanmap: the sweep failed: $(cat "$T/err")"
"$A" report --in "$T/in" --out "$T/r3" >/dev/null 2>"$T/err" || FAIL "treport nanmap: exit $? ($(cat "$T/err"))"
grep -q '^## NaN / Inf / overflow map' "$T/r3/report.md" || FAIL "treport nanmap: no map section"
want=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
  { s = $h["log2_sigma"] + 0
    if ($h["pass"] != 1 && (f == "" || s < f)) f = s
    if (($h["nan"] > 0 || $h["inf"] > 0 || $h["error"] != "") && (x == "" || s < x)) x = s }
  END { printf "| fa2 | %s / %s / - |", (f == "" ? "-" : f), (x == "" ? "-" : x) }' "$T/in/map/results.csv")
grep -qF -- "$want" "$T/r3/report.md" || FAIL "treport nanmap: want the row '$want' in: $(grep '^| fa2 |' "$T/r3/report.md" | tail -1)"
if [ -n "$gp" ] && [ -x "$gp" ]; then
  [ -s "$T/r3/map_map.png" ] && [ -s "$T/r3/map_map.svg" ] || FAIL "treport nanmap: heatmap PNG/SVG missing"
fi

# ---- bad usage ----
"$A" report >/dev/null 2>&1
[ $? -eq 2 ] || FAIL "treport: no --in must exit 2"
"$A" report --in "$T/nonexistent" >/dev/null 2>&1
[ $? -eq 2 ] || FAIL "treport: a missing folder must exit 2"
mkdir -p "$T/empty"
"$A" report --in "$T/empty" >/dev/null 2>&1
[ $? -eq 2 ] || FAIL "treport: a folder without results must exit 2"

[ $fails -eq 0 ] && echo "treport: ok"
[ $fails -eq 0 ]
