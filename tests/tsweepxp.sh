#!/bin/sh
# attnacc: the experiments ported to the sweep engine (normmap, dq-budget, table3, determinism, dropout-map): --jobs, --shard/--merge and the shortcut command give one canonical CSV; their options are their own.
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
A=${top_builddir:-.}/experiments/attnacc
[ -x "$A" ] || { echo "tsweepxp: $A not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tsweepxp.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }
# idle OpenMP threads sleep instead of spinning: the machine is shared with other tests
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_WAIT_POLICY

# check NAME ROWS OPTION ALT ARGS...: ROWS data rows expected in results.canon.csv; OPTION one of the experiment's
# own options that --help must list; ALT other options (a different grid) that --resume into the folder must refuse.
check() {
  x=$1 rows=$2 own=$3 alt=$4
  shift 4
  d="$T/$x"
  mkdir -p "$d"
  "$A" sweep --experiment "$x" "$@" --jobs 1 --out "$d/j1" >"$d/j1.out" 2>"$d/j1.err" ||
    { FAIL "tsweepxp $x: --jobs 1: exit $? ($(cat "$d/j1.err"))"; return; }
  ref="$d/j1/results.canon.csv"
  for f in results.csv results.jsonl results.canon.csv meta.json; do
    [ -s "$d/j1/$f" ] || FAIL "tsweepxp $x: $f missing"
  done
  n=$(($(wc -l <"$ref") - 1))
  [ "$n" -eq "$rows" ] || FAIL "tsweepxp $x: results.canon.csv has $n rows, want $rows"
  grep -q "\"experiment\": \"$x\"" "$d/j1/meta.json" || FAIL "tsweepxp $x: meta.json does not name the experiment"
  grep -q '"git"' "$d/j1/meta.json" || FAIL "tsweepxp $x: meta.json has no git hash"
  # --jobs 2: the same bytes
  "$A" sweep --experiment "$x" "$@" --jobs 2 --out "$d/j2" >/dev/null 2>"$d/j2.err" ||
    FAIL "tsweepxp $x: --jobs 2: exit $? ($(cat "$d/j2.err"))"
  cmp -s "$ref" "$d/j2/results.canon.csv" || FAIL "tsweepxp $x: --jobs 2 canonical CSV differs from --jobs 1"
  # two shards, merged: the same bytes
  "$A" sweep --experiment "$x" "$@" --shard 0/2 --out "$d/s0" >/dev/null 2>&1 || FAIL "tsweepxp $x: shard 0/2: exit $?"
  "$A" sweep --experiment "$x" "$@" --shard 1/2 --out "$d/s1" >/dev/null 2>&1 || FAIL "tsweepxp $x: shard 1/2: exit $?"
  [ -e "$d/s0/results.csv" ] && FAIL "tsweepxp $x: a half shard wrote results.csv"
  "$A" sweep --merge --out "$d/m" "$d/s0" "$d/s1" >/dev/null 2>"$d/m.err" ||
    FAIL "tsweepxp $x: merge: exit $? ($(cat "$d/m.err"))"
  cmp -s "$ref" "$d/m/results.canon.csv" || FAIL "tsweepxp $x: merged shards differ from the unsharded run"
  # the shortcut command: the same bytes
  "$A" "$x" "$@" --out "$d/sc" >"$d/sc.out" 2>"$d/sc.err" || FAIL "tsweepxp $x: shortcut: exit $? ($(cat "$d/sc.err"))"
  cmp -s "$ref" "$d/sc/results.canon.csv" || FAIL "tsweepxp $x: 'attnacc $x' differs from 'attnacc sweep --experiment $x'"
  # a folder holds one grid: other options are refused
  "$A" sweep --experiment "$x" "$@" $alt --out "$d/j1" --resume >/dev/null 2>&1
  [ $? -eq 2 ] || FAIL "tsweepxp $x: --resume with $alt into the folder of another grid must exit 2"
  cmp -s "$ref" "$d/j1/results.canon.csv" || FAIL "tsweepxp $x: the refused run touched the results"
  # options: the experiment's own are listed; an unknown one (or one of another experiment) exits 2 naming it
  "$A" sweep --experiment "$x" --help >"$d/help" 2>&1 || FAIL "tsweepxp $x: --help: exit $?"
  grep -q -- "--$own " "$d/help" || FAIL "tsweepxp $x: --help does not list --$own"
  grep -q -- "--shard " "$d/help" || FAIL "tsweepxp $x: --help does not list the common --shard"
  for bad in no-such-option variants; do
    "$A" sweep --experiment "$x" --$bad 1 --out "$d/bad" >/dev/null 2>"$d/bad.err"
    rc=$?
    [ $rc -eq 2 ] || FAIL "tsweepxp $x: --$bad: exit $rc, want 2"
    grep -q "^attnacc sweep: unknown option '--$bad'" "$d/bad.err" || FAIL "tsweepxp $x: --$bad: message: $(cat "$d/bad.err")"
    "$A" "$x" --$bad 1 --out "$d/bad" >/dev/null 2>"$d/bad.err"
    [ $? -eq 2 ] && grep -q "^attnacc $x: unknown option '--$bad'" "$d/bad.err" ||
      FAIL "tsweepxp $x: shortcut --$bad: want exit 2 and a message naming it: $(cat "$d/bad.err")"
  done
  [ -e "$d/bad" ] && FAIL "tsweepxp $x: a refused run created its folder"
}

# normmap: 2 masks x 2 sigma cells; dense 3 recipes, causal 2; 4 tensors each: (3 + 2) * 2 * 4 = 40 rows
check normmap 40 rows "--sigma 0.5,7" --n 64 --d 8 --sigma 0.5,6 --seeds 1 --reference fp64
# dq-budget: 2 masks x 2 lengths, 17 probed scale exponents each
check dq-budget 68 scale-exp "--sigma 2" --n 128,256 --d 16 --width 16
# table3: 15 constructions (14 + the search), with exhaustive columns over [-1, -0.9375]
check table3 15 search-samples "--no-exhaustive" --samples 2000 --search-samples 64 --lo -1 --hi -0.9375
# determinism: 4 runs
check determinism 4 order-seed-base "--set dq_reduce=fp32" --variant fa2-atomic --n 128 --d 8 --runs 4
# dropout-map: 2 lengths x 1 p x 2 settings
check dropout-map 4 settings "--seed 2" --n 128,256 --p 0.2 --d 8 --settings twin,position-keyed

# normmap's rows: q_rows says which cells were row-subsampled (n = 64, --rows 16: 16; n = 16: all 16)
"$A" normmap --n 16,64 --d 8 --sigma 1 --seeds 1 --masks causal --causal fa2 --rows 16 --reference fp64 --out "$T/rows" \
  >/dev/null 2>"$T/rows.err" || FAIL "tsweepxp normmap --rows: exit $? ($(cat "$T/rows.err"))"
want='n=16:16 n=64:16'
got=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next } $h["tensor"] == "o" { printf "%sn=%s:%s", sep, $h["n"], $h["q_rows"]; sep = " " }' \
  "$T/rows/results.canon.csv")
[ "$got" = "$want" ] || FAIL "tsweepxp normmap --rows: q_rows '$got', want '$want'"
# the summary comes after a merge too, when the experiment and its options are given
"$A" sweep --experiment normmap --n 64 --d 8 --sigma 0.5,6 --seeds 1 --reference fp64 --merge --out "$T/nm" \
  "$T/normmap/s0" "$T/normmap/s1" >"$T/nm.out" 2>&1 || FAIL "tsweepxp normmap merge: exit $? ($(cat "$T/nm.out"))"
grep -q "NaN/Inf from sigma=6" "$T/nm.out" || FAIL "tsweepxp normmap merge: no summary: $(cat "$T/nm.out")"
# determinism's verdict counts the distinct dq_hash values of the runs
npat=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next } { s[$h["dq_hash"]] = 1 } END { print length(s) }' \
  "$T/determinism/j1/results.canon.csv")
grep -q "distinct dQ bit patterns: $npat" "$T/determinism/sc.out" ||
  FAIL "tsweepxp determinism: verdict does not say $npat distinct patterns: $(cat "$T/determinism/sc.out")"
# table3: the printed table holds the published row, and the report reads the sweep folder
grep -qF '| published ([blackwell-fa] Table 3) | 1.0440 | 1.0687 |' "$T/table3/sc.out" || FAIL "tsweepxp table3: no published row"
"$A" list >"$T/list" || FAIL "tsweepxp list: exit $?"
sed -n '/^experiments/,$p' "$T/list" >"$T/xlist"
for x in normmap dq-budget table3 determinism dropout-map; do
  grep -q "^  $x  *[a-z]" "$T/xlist" || FAIL "tsweepxp list: experiment $x not listed with a summary"
done

[ $fails -eq 0 ] && echo "tsweepxp: ok"
[ $fails -eq 0 ]
