#!/bin/sh
# attnacc: tests of explain (error budget per rounding site) and of variant specs in run and sweep --variants.
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
A=${top_builddir:-.}/experiments/attnacc
[ -x "$A" ] || { echo "texplain: $A not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/texplain.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }
P="--n 128 --d 32 --threads 1"

# rel_l2 of OUT for VARIANT from attnacc run's table ($1 file, $2 variant, $3 output).
runrel() { awk -v v="$2" -v o="$3" '$1 == v && $2 == o { print $4 }' "$1"; }
# explain's row $2 (site), column of output $3 (o dq dk dv) from file $1.
col() {
  awk -v s="$2" -v o="$3" 'BEGIN { c["o"] = 0; c["dq"] = 1; c["dk"] = 2; c["dv"] = 3 }
    (s == "all sites exact" && /^all sites exact/) || (s != "all sites exact" && $1 == s) { print $(NF - 3 + c[o]); exit }' "$1"
}

# exact-fp64: no site changes anything, so every part is exactly zero, and
# the total (fp64 roundoff) is that of attnacc run on the same inputs.
"$A" explain --variant exact-fp64 $P >"$T/x64" 2>"$T/e64" || FAIL "texplain: exact-fp64 exit $? ($(cat "$T/e64"))"
awk '/^site/ { on = 1; next } /^all sites exact/ { on = 0 } on && $1 != "total" {
       for (i = NF - 3; i <= NF; i++) if ($i + 0 != 0) { print "FAIL texplain: exact-fp64 site " $1 " has part " $i; bad = 1 } }
     END { exit bad }' "$T/x64" || fails=$((fails + 1))
for o in o dq dk dv; do
  t=$(col "$T/x64" total $o)
  awk -v t="$t" 'BEGIN { exit !(t != "" && t + 0 < 1e-13) }' || FAIL "texplain: exact-fp64 total $o = '$t', not below 1e-13"
done

# fa2: the total is run's fa2 error (same draw); making every site exact
# gives an error at fp64 roundoff like exact-fp64's (a closed check: every
# rounding the table marks is one the pipeline honours); the bwd.ds_fmt part
# equals sqrt(total^2 - e^2) with e from run of the spec fa2:bwd.ds_fmt=fp64.
"$A" explain --variant fa2 $P >"$T/xfa2" 2>"$T/efa2" || FAIL "texplain: fa2 exit $? ($(cat "$T/efa2"))"
"$A" run --variant fa2,fa2:bwd.ds_fmt=fp64,exact-fp64 $P >"$T/run" 2>"$T/erun" || FAIL "texplain: run exit $? ($(cat "$T/erun"))"
for o in o dq dk dv; do
  t=$(col "$T/xfa2" total $o) r=$(runrel "$T/run" fa2 $o) f=$(col "$T/xfa2" "all sites exact" $o)
  awk -v t="$t" -v r="$r" 'BEGIN { exit !(t != "" && r != "" && (t - r) ^ 2 <= (1e-4 * r) ^ 2) }' ||
    FAIL "texplain: fa2 total $o = '$t', run says '$r'"
  awk -v f="$f" 'BEGIN { exit !(f != "" && f + 0 < 1e-13) }' ||
    FAIL "texplain: fa2 with every site exact has $o rel_l2 '$f', not below 1e-13 (exact-fp64: $(runrel "$T/run" exact-fp64 $o))"
done
t=$(col "$T/xfa2" total dq) e=$(runrel "$T/run" fa2:bwd.ds_fmt=fp64 dq) p=$(col "$T/xfa2" bwd.ds_fmt dq)
awk -v t="$t" -v e="$e" -v p="$p" 'BEGIN { w = sqrt(t * t - e * e); exit !(p != "" && (p - w) ^ 2 <= (2e-3 * w) ^ 2 && w > 0.3 * t) }' ||
  FAIL "texplain: fa2 bwd.ds_fmt dq part '$p', expected sqrt(t^2 - e^2) from run (t = $t, e = $e) and a large share (dS to BF16 dominates dQ)"
grep -q '^dq: the parts add in quadrature' "$T/xfa2" || FAIL "texplain: fa2's dq parts do not add in quadrature: $(grep '^dq:' "$T/xfa2")"

# Bad input: one message on stderr, exit 2, nothing on stdout.
bad() {
  what=$1
  shift
  "$A" explain "$@" >"$T/bo" 2>"$T/be"
  st=$?
  [ $st -eq 2 ] || FAIL "texplain: $what: exit $st, expected 2"
  [ ! -s "$T/bo" ] || FAIL "texplain: $what: wrote to stdout"
  [ "$(wc -l <"$T/be")" -eq 1 ] || FAIL "texplain: $what: stderr is not one line: $(cat "$T/be")"
}
bad "no --variant" $P
bad "unknown preset" --variant nope $P
bad "bad override" --variant fa2:bwd.ds_fmt=fp33 $P
bad "--json" --variant fa2 --json $P
bad "--n 0" --variant fa2 --n 0
bad "missing recipe file" --variant "$T/none.recipe" $P

# Specs in run: a spec's text names it; a spec equal to a preset gives the preset's numbers.
"$A" run --variant fa2,fa2:bwd.ds_fmt=bf16 $P >"$T/run2" 2>"$T/erun2" || FAIL "texplain: run spec exit $?"
[ "$(runrel "$T/run2" fa2 dq)" = "$(runrel "$T/run2" fa2:bwd.ds_fmt=bf16 dq)" ] ||
  FAIL "texplain: fa2:bwd.ds_fmt=bf16 (fa2's own value) differs from fa2"

# sweep --variants with a preset, a recipe file and a spec .
printf 'base = fa2\nname = my\nbwd.ds_fmt = fp32\n' >"$T/my.recipe"
AABS=$(cd "$(dirname "$A")" && pwd)/$(basename "$A")
(cd "$T" && "$AABS" sweep --experiment table4 --variants fa2,my.recipe,fa2:bwd.ds_fmt=fp32,bwd.dp_fmt=bf16 \
  --quick --n 128 --masks dense --threads 1 --out "$T/t4" >"$T/sw" 2>"$T/esw") ||
  FAIL "texplain: sweep --variants exit $? ($(cat "$T/esw"))"
for v in ',fa2,dq,' ',my,dq,' ',"fa2:bwd.ds_fmt=fp32,bwd.dp_fmt=bf16",dq,'; do
  grep -q -- "$v" "$T/t4/results.csv" || FAIL "texplain: sweep results.csv has no row $v"
done
# A recipe file that sets `base` but no `name` is named after the file (not a
# second "fa2", which the sweep would refuse as a repeated name).
printf 'base = fa2\nbwd.ds_fmt = fp32\n' >"$T/mine.recipe"
(cd "$T" && "$AABS" sweep --experiment table4 --variants fa2,mine.recipe --quick --n 128 --masks dense --threads 1 \
  --out "$T/t5" >"$T/sw5" 2>"$T/esw5") || FAIL "texplain: sweep with an unnamed recipe file: exit $? ($(cat "$T/esw5"))"
grep -q ',mine,dq,' "$T/t5/results.csv" 2>/dev/null || FAIL "texplain: the unnamed recipe file is not named 'mine'"
if [ $fails -ne 0 ]; then
  echo "texplain: $fails failure(s)"
  exit 1
fi
echo "texplain: ok"
