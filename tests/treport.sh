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
"$A" sweep --experiment smoke --quick --variants fa2,nki,naive-bf16,fa4 --out "$T/in/grid" >/dev/null 2>"$T/err" ||
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

# ---- nanmap's map axes: a scale that is not a power of two (133120, pytorch 121558) is drawn exactly, and the
# heatmap has one column per (sigma, distribution) condition, not the worst over the distributions ----
"$A" sweep --experiment nanmap --n 16 --d 16 --masks dense --variants fa2 --sigma 1,133120 --dists normal,constant \
  --out "$T/in4/cond" >/dev/null 2>"$T/err" || FAIL "treport nanmap conditions: the sweep failed: $(cat "$T/err")"
# every element 133120: O is the mean of equal values of v, exactly 133120 (a closed form, not the program's output)
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
  $h["dist"] == "constant" && $h["tensor"] == "o" && $h["log2_sigma"] > 17 { n++; if ($h["ref_max_abs"] != 133120) bad++ }
  END { exit !(n == 1 && bad == 0) }' "$T/in4/cond/results.csv" ||
  FAIL "treport nanmap conditions: the constant 133120 cell's exact O is not 133120"
"$A" report --in "$T/in4" --out "$T/r4" >/dev/null 2>"$T/err" || FAIL "treport nanmap conditions: exit $? ($(cat "$T/err"))"
want=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next } { c[$h["log2_sigma"] " " $h["dist"]] = 1 }
  END { print length(c) }' "$T/in4/cond/results.csv")
got=$(awk 'NF == 3 && $1 !~ /^#/ { x[$1] = 1 } END { print length(x) }' "$T/r4/cond_map.dat")
[ "$want" = 4 ] && [ "$got" = "$want" ] || FAIL "treport nanmap conditions: $got heatmap columns, $want conditions (want 4)"
# the 133120 column is labelled with sigma as people know it (pytorch 121558's constant), not its log2 17.02
grep -rq 's=133120 constant' "$T/r4" || FAIL "treport nanmap conditions: no column labelled 's=133120 constant'"
grep -rq '17\.02' "$T/r4"/*.md && FAIL "treport nanmap conditions: the report still shows log2 17.02"

# ---- the summary comes first: the first section after the title is the summary, before any grid ----
first=$(grep -n '^## ' "$T/r1/report.md" | head -1)
case "$first" in *'## Summary') ;; *) FAIL "treport: the first section is '$first', not the summary" ;; esac
grep -q '^\*\*Pass rule' "$T/r1/report.md" || FAIL "treport: the summary has no pass-rule verdict"
grep -q '^\*\*Ours beside the published numbers' "$T/r1/report.md" || FAIL "treport: the summary has no published comparison"
# every recipe failing a pass-rule cell in the CSV is named in the summary's failing table (an awk reading of the CSV)
for r in $(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next } $h["pass"] == 0 { print $h["recipe"] }' \
  "$T/in/grid/results.csv" | sort -u); do
  sed -n '/^## Summary/,/^## Accuracy grid/p' "$T/r1/report.md" | grep -q "^| $r | " ||
    FAIL "treport: recipe $r fails the rule in results.csv but the summary does not name it"
done
# the flash-attention reference is found by its numerics (lib/score's naive BF16 recipe), not by its name:
# the same recipe text under another name is still the reference
grep -q 'reference: `naive-bf16`' "$T/r1/report.md" || FAIL "treport: the fa rule does not name its reference"

# ... and a recipe merely named naive-bf16 is not: swap the names of nki and naive-bf16 in results.csv and meta.json
mkdir -p "$T/swap/grid"
sed 's/"name": "naive-bf16"/"name": "my-naive"/; s/name = naive-bf16/name = my-naive/; s/"name": "nki"/"name": "naive-bf16"/; s/name = nki\\n/name = naive-bf16\\n/' \
  "$T/in/grid/meta.json" >"$T/swap/grid/meta.json"
awk -F, 'NR == 1 { print; for (i = 1; i <= NF; i++) h[$i] = i; next }
  { if ($h["recipe"] == "naive-bf16") $h["recipe"] = "my-naive"; else if ($h["recipe"] == "nki") $h["recipe"] = "naive-bf16"
    print }' OFS=, "$T/in/grid/results.csv" >"$T/swap/grid/results.csv"
"$A" report --in "$T/swap" --out "$T/r6" >/dev/null 2>"$T/err" || FAIL "treport swap: exit $? ($(cat "$T/err"))"
grep -q 'reference: `my-naive`' "$T/r6/report.md" ||
  FAIL "treport swap: the fa reference must be my-naive (the naive numerics), not the recipe named naive-bf16"

# ---- the reading behind the FA4 row (the fa4 preset): name and text hash from results.csv, description from the
# preset file ----
h=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } $c["recipe"] == "fa4" { print $c["recipe_hash"]; exit }' \
  "$T/in/grid/results.csv")
d=$(sed -n '1s/^# fa4: //p' "${top_srcdir:-.}/lib/recipe/presets/fa4.recipe")
grep -qF "Reading: recipe \`fa4\`, text hash \`$h\`" "$T/r1/report.md" || FAIL "treport: no reading line for fa4 with hash $h"
grep -qF ": $d." "$T/r1/report.md" || FAIL "treport: the fa4 reading lacks its preset's description '$d'"
grep -q '^### `fa4` beside the published FA4' "$T/r1/report.md" || FAIL "treport: FA4's numbers are not beside the fa4 preset"

# ---- no silent cap: a grid of 70 recipes (the smoke rows copied under new names) keeps every one ----
mkdir -p "$T/big/grid"
cp "$T/in/grid/meta.json" "$T/big/grid/"
awk -F, 'NR == 1 { print; for (i = 1; i <= NF; i++) h[$i] = i; next }
  $h["recipe"] == "fa2" { for (k = 1; k <= 70; k++) { $h["recipe"] = sprintf("r%03d", k); print } }' OFS=, \
  "$T/in/grid/results.csv" >"$T/big/grid/results.csv"
"$A" report --in "$T/big" --out "$T/r4" >/dev/null 2>"$T/err" || FAIL "treport 70 recipes: exit $? ($(cat "$T/err"))"
nrows=$(sed -n '/^### Pass rule/,/^### rel_l2 of o/p' "$T/r4/report.md" | grep -c '^| r[0-9][0-9][0-9] |')
[ "$nrows" -eq 70 ] || FAIL "treport 70 recipes: the pass table has $nrows recipe rows, want 70"
grep -q '^| r065 | dense |' "$T/r4/report.md" || FAIL "treport 70 recipes: the 65th recipe is missing from the rel_l2 tables"
if [ -n "$gp" ] && [ -x "$gp" ]; then
  # every recipe is plotted, in rows of at most 8 (the palette has 8 colours)
  nb=$(grep -c '^# r[0-9][0-9][0-9]/' "$T/r4/grid_dq.dat")
  [ "$nb" -eq 140 ] || FAIL "treport 70 recipes: grid_dq.dat has $nb recipe/mask blocks, want 140"
fi

# ---- published values only at the lengths the source measured ([blackwell-fa] Table 4: 1024..32768) ----
mkdir -p "$T/short/grid"
cp "$T/in/grid/meta.json" "$T/short/grid/"
awk -F, 'NR == 1 { print; for (i = 1; i <= NF; i++) h[$i] = i; next }
  { if ($h["n"] == 16) $h["n"] = 512; else if ($h["n"] == 32) $h["n"] = 1024
    if ($h["recipe"] == "nki") $h["recipe"] = "tlx"
    print }' OFS=, "$T/in/grid/results.csv" >"$T/short/grid/results.csv"
"$A" report --in "$T/short" --out "$T/r5" >/dev/null 2>"$T/err" || FAIL "treport lengths: exit $? ($(cat "$T/err"))"
grep -q '^| recipe | dense 512 | dense 1024 | causal 512 | causal 1024 |' "$T/r5/report.md" ||
  FAIL "treport lengths: no 512/1024 pass table"
for k in 'TLX (the paper' 'FA4'; do
  row=$(grep "^| \*$k.*published" "$T/r5/report.md" | head -1)
  echo "$row" | grep -q '| not run | pass | not run | pass |$' ||
    FAIL "treport lengths: published row of $k must read 'not run' at 512 and 'pass' at 1024: $row"
done
grep -q '^| dq rel_l2, published | dense | not measured | not measured | not measured | not measured | not measured | not measured | 1.47e-2 |$' \
  "$T/r5/report.md" || FAIL "treport lengths: the tlx block must show the published dense dq only at 32768"
grep -q '^| ours / published | dense | | | | | | | |$' "$T/r5/report.md" ||
  FAIL "treport lengths: a ratio where the source did not measure"
grep -q 'TLX (the paper.s kernel): dense dq rel_l2 at 32768 .* not run (largest length here: 1024, where ours is ' "$T/r5/report.md" ||
  FAIL "treport lengths: the summary must say that 32768 was not run"

# ---- Table 3: the searched construction is labelled as fitted; its error columns over the published ones
# ([blackwell-fa] Table 3: max 6.93e-2, mean 5.85e-2), computed here from results.csv ----
grep -q '^| quadratic-bf16 search best .* (\*\*fitted\*\* to the published ratio range) |' "$T/r1/report.md" ||
  FAIL "treport table3: the searched construction is not labelled as fitted"
want=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
  { gsub(/"[^"]*"/, "spec") } # the quoted spec holds commas
  $h["label"] ~ /^quadratic-bf16 search best/ { printf "| (fitted) | (fitted) | %.3f | %.3f |", $h["s_max_rel_err"] / 6.93e-2, $h["s_mean_rel_err"] / 5.85e-2 }' \
  "$T/in/table3/results.csv")
grep '^| \*fitted / published\*' "$T/r1/report.md" | grep -qF -- "$want" ||
  FAIL "treport table3: want the fitted / published row to end '$want': $(grep '^| \*fitted / published' "$T/r1/report.md")"
grep -q '^Fitted: `quadratic-bf16 search best' "$T/r1/report.md" || FAIL "treport table3: the summary does not say which row is fitted"

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
