#!/bin/sh
# attnacc: the low-precision recipe files of recipes/lowp/ parse, run, and explain attributes their error to the quant.* sites.
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
A=${top_builddir:-.}/experiments/attnacc
S=${top_srcdir:-.}
[ -x "$A" ] || { echo "tlowp_recipes: $A not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tlowp.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }
col() {
  awk -v s="$2" -v o="$3" 'BEGIN { c["o"] = 0; c["dq"] = 1; c["dk"] = 2; c["dv"] = 3 }
    $1 == s { print $(NF - 3 + c[o]); exit }' "$1"
}

# mxfp8-bwd: E4M3 keeps 4 significand bits to BF16's 8, so each quantised
# operand rounds about 2^4 times more coarsely than io: every output's
# largest part must be a quant.* site, and in each column the quant sites
# that feed it must exceed io's part at least 4 times (a margin below 16
# for the correlations explain reports); the parts add in quadrature
# within 10 %.
f=$S/recipes/lowp/mxfp8-bwd.recipe
"$A" explain --variant "$f" --n 256 --d 64 --threads 1 >"$T/x" 2>"$T/e" || FAIL "tlowp: explain $f exit $? ($(cat "$T/e"))"
for o in o dq dk dv; do
  top=$(awk -v o="$o" 'BEGIN { c["o"] = 0; c["dq"] = 1; c["dk"] = 2; c["dv"] = 3 }
    /^site/ { on = 1; next } /^all sites exact/ { on = 0 }
    on && $1 != "total" { v = $(NF - 3 + c[o]) + 0; if (v > best) { best = v; s = $1 } } END { print s }' "$T/x")
  case "$top" in quant.*) ;; *) FAIL "tlowp: the largest part of $o is '$top', not a quant.* site" ;; esac
  io=$(col "$T/x" io "$o")
  q=$(col "$T/x" quant.q "$o")
  awk -v q="$q" -v io="$io" 'BEGIN { exit !(q + 0 >= 4 * (io + 0) && q + 0 > 0) }' ||
    FAIL "tlowp: quant.q part of $o ($q) is not 4 times io's ($io)"
  r=$(awk -v o="$o" 'BEGIN { c["o"] = 0; c["dq"] = 1; c["dk"] = 2; c["dv"] = 3 } /^sum \/ total/ { print $(NF - 3 + c[o]) }' "$T/x")
  awk -v r="$r" 'BEGIN { exit !(r > 0.9 && r < 1.1) }' || FAIL "tlowp: $o sum / total = '$r', not within 10 % of 1"
done
# quant.do and quant.ds act in the backward only: no part of O
for s in quant.do quant.ds; do
  v=$(col "$T/x" "$s" o)
  [ "$v" = "0.0000e+00" ] || FAIL "tlowp: $s has the part $v of o (the forward does not read it)"
done

[ "$fails" -eq 0 ] && echo "tlowp_recipes: ok" && exit 0
echo "tlowp_recipes: $fails failure(s)"
exit 1
