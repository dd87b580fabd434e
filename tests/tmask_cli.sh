#!/bin/sh
# attnacc: tests of run's and score's mask options: a boolean or -inf mask equal to the causal one gives the causal
# SPDX-License-Identifier: LGPL-3.0-or-later
# run's bits, --key-len equals a mask of the padded columns, --logit-offset moves the oracle's LSE only, and bad
# masks are refused (exit 2, one message, no output file).
set -u
A=${top_builddir:-.}/experiments/attnacc
[ -x "$A" ] || { echo "tmask_cli: $A not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tmask.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }

# npy FILE DESCR SHAPE: a version 1.0 .npy header (118 bytes: 128 with the preamble) into FILE; the data follow
# from stdin.
npy() {
  h="{'descr': '$2', 'fortran_order': False, 'shape': $3, }"
  pad=$((128 - 10 - ${#h} - 1))
  {
    printf '\223NUMPY\001\000\166\000%s' "$h"
    printf "%${pad}s\n" ""
    cat
  } >"$1"
}
# bits N RULE: N x N bytes 0/1 by an awk rule on (i, j), as octal escapes.
bits() {
  awk -v n="$1" "BEGIN { for (i = 0; i < n; i++) for (j = 0; j < n; j++) printf \"%s\", (($2) ? \"\\\\001\" : \"\\\\000\") }"
}
N=16
printf "$(bits $N 'j <= i')" | npy "$T/causal.npy" '|b1' "($N, $N)"
printf "$(bits $N 'j < 10')" | npy "$T/pad10.npy" '|b1' "(1, 1, $N, $N)"
# the causal mask as float32 0 / -inf (00 00 00 00 and 00 00 80 ff)
awk -v n=$N 'BEGIN { for (i = 0; i < n; i++) for (j = 0; j < n; j++) printf "%s", (j <= i ? "\\000\\000\\000\\000" : "\\000\\000\\200\\377") }' >"$T/bias.txt"
printf "$(cat "$T/bias.txt")" | npy "$T/bias.npy" '<f4' "($N, $N)"
printf "$(bits 4 '1')" | npy "$T/small.npy" '|b1' "(4, 4)"

R="run --variant fa2,naive-bf16 --n $N --d 8 --heads 2"
same() { # same DIR1 DIR2 WHAT: every .npy of DIR1 equals DIR2's
  for f in o dq dk dv lse; do
    for v in "$1"/*/"$f.npy" "$1/$f.npy"; do
      [ -f "$v" ] || continue
      cmp -s "$v" "$2${v#"$1"}" || FAIL "tmask_cli $3: ${v#"$1"/} differs"
    done
  done
}
"$A" $R --causal --save "$T/c" >/dev/null || FAIL "tmask_cli: causal run failed"
"$A" $R --mask "$T/causal.npy" --save "$T/m" >/dev/null || FAIL "tmask_cli: boolean mask run failed"
"$A" $R --mask "$T/bias.npy" --save "$T/b" >/dev/null || FAIL "tmask_cli: float mask run failed"
[ -n "$(ls "$T/c")" ] || FAIL "tmask_cli: --save wrote nothing"
same "$T/c" "$T/m" "boolean causal mask against --causal"
same "$T/c" "$T/b" "-inf causal mask against --causal"
"$A" $R --key-len 10 --save "$T/k" >/dev/null || FAIL "tmask_cli: --key-len run failed"
"$A" $R --mask "$T/pad10.npy" --save "$T/p" >/dev/null || FAIL "tmask_cli: padding mask run failed"
same "$T/k" "$T/p" "--key-len 10 against a mask of keys 10..15"

# the oracle's LSE with --logit-offset -150 is the LSE without, minus 150 (every row)
"$A" run --variant exact-fp64 --n $N --d 8 --save-oracle "$T/o0" >/dev/null || FAIL "tmask_cli: oracle run failed"
"$A" run --variant exact-fp64 --n $N --d 8 --logit-offset -150 --save-oracle "$T/o1" >/dev/null ||
  FAIL "tmask_cli: offset oracle run failed"
od -An -v -t f8 -j 128 "$T/o0/lse.npy" | tr -s ' ' '\n' | grep . >"$T/l0"
od -An -v -t f8 -j 128 "$T/o1/lse.npy" | tr -s ' ' '\n' | grep . >"$T/l1"
[ "$(wc -l <"$T/l0")" -eq $N ] || FAIL "tmask_cli: lse.npy has $(wc -l <"$T/l0") values, want $N"
paste "$T/l0" "$T/l1" | awk '{ d = $2 - $1 + 150; if (d < 0) d = -d; if (d > 1e-9) { print "FAIL tmask_cli offset: LSE " $1 " -> " $2; bad = 1 } } END { exit bad }' || fails=$((fails + 1))

# score: the saved fa2 outputs under the same mask
"$A" score --inputs "$T/m" --grads "$T/m/fa2" --mask "$T/causal.npy" --json >"$T/s.json" ||
  FAIL "tmask_cli: score --mask failed: $(head -c 300 "$T/s.json")"
grep -q '"attn_mask": "broadcast"' "$T/s.json" || FAIL "tmask_cli: score's JSON has no attn_mask"

# nanmap's dist and logit_offset axes reach the cells: the first cell (constant inputs, offset -150, sigma 2^-56)
"$A" sweep --experiment nanmap --quick --n 32 --masks dense --variants fa2 --dists constant --logit-offsets -150 \
  --max-cells 1 --out "$T/nm" >/dev/null 2>&1 || FAIL "tmask_cli: nanmap --dists --logit-offsets failed"
grep -q 'cols=dist:c,logit_offset:c,' "$T/nm/journal-0-of-1.txt" || FAIL "tmask_cli: nanmap has no dist, logit_offset axes"
[ "$(grep -c "^sconstant	d-1.5e+02	" "$T/nm/journal-0-of-1.txt")" -eq 4 ] ||
  FAIL "tmask_cli: nanmap's first cell is not constant inputs at offset -150 (o, dq, dk, dv rows)"

expect_error() {
  what=$1
  pat=$2
  shift 2
  rm -rf "$T/x"
  mkdir "$T/x"
  "$A" "$@" --out "$T/x/r.json" >"$T/stdout" 2>"$T/stderr"
  rc=$?
  [ $rc -eq 2 ] || FAIL "tmask_cli $what: exit status $rc, want 2 (args: $*)"
  grep -q -- "$pat" "$T/stderr" || FAIL "tmask_cli $what: message does not say '$pat': $(cat "$T/stderr")"
  [ "$(wc -l <"$T/stderr")" -le 1 ] || FAIL "tmask_cli $what: more than one message: $(cat "$T/stderr")"
  [ -z "$(ls -A "$T/x")" ] || FAIL "tmask_cli $what: left files behind: $(ls -A "$T/x")"
}
R="run --variant exact-fp64 --n $N --d 8"
expect_error "mask of another shape" "small.npy has shape \[4, 4\]" $R --mask "$T/small.npy"
expect_error "missing mask" "--mask" $R --mask "$T/none.npy"
expect_error "key length past n_k" "--key-len" $R --key-len 17
expect_error "two key lengths for one sequence" "--key-len" $R --key-len 3,4
expect_error "offset too large" "logit-offset" $R --logit-offset 1e300
printf "0 8 16\n" >"$T/cu"
expect_error "mask with varlen" "varlen" run --variant exact-fp64 --d 8 --cu-seqlens "$T/cu" --mask "$T/causal.npy"

[ $fails -eq 0 ] || exit 1
echo "tmask_cli: ok"
