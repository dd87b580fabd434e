#!/bin/sh
# attnacc: `attnacc invariance`: the split count per batch size, which batch sizes change o's bits and why, --json, --save, a batch-independent recipe, bad input.
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
A=${top_builddir:-.}/experiments/attnacc
[ -x "$A" ] || { echo "tinvariance: $A not built"; exit 1; }
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }
field() { "${top_builddir:-.}/tests/jget" "$1" "$2"; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tinvariance.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT

# n_q 128, n_k 512, 2 heads, d 128 on 132 SMs: 4 splits up to B = 16, 2 at B = 32, the standard kernel at 64
# (tests/tinvariance.c works these out by hand from num_splits_heuristic).
P="--n-q 128 --n-k 512 --d 128 --heads 2 --seed 3"
"$A" invariance $P --batch 1,2,32,64 --save "$T/o" >"$T/table" 2>"$T/err" || FAIL "tinvariance: exit status $? ($(cat "$T/err"))"
cat "$T/table"
splits=$(awk '$1 ~ /^[0-9]+$/ { printf "%s ", $3 }' "$T/table")
[ "$splits" = "4 4 2 1 " ] || FAIL "tinvariance: split counts '$splits', want '4 4 2 1 '"
differ=$(awk '$1 ~ /^[0-9]+$/ { d = $6 + 0 != 0; printf "%d ", d }' "$T/table")
[ "$differ" = "0 0 1 1 " ] || FAIL "tinvariance: rows that differ from B = 1 '$differ', want '0 0 1 1 '"
grep -q "^32 .*split count changed from 4 to 2" "$T/table" || FAIL "tinvariance: B = 32 does not say why it changed"
grep -q "^2 .*same decision as B=1 (4 splits)" "$T/table" || FAIL "tinvariance: B = 2 does not say it kept the decision"
grep -q "^not invariant: o changes bits at 2 of 4 batch sizes" "$T/table" || FAIL "tinvariance: no 'not invariant' verdict"
for b in 1 2 32 64; do [ -s "$T/o/o-b$b.npy" ] || FAIL "tinvariance: --save did not write o-b$b.npy"; done
cmp -s "$T/o/o-b1.npy" "$T/o/o-b2.npy" || FAIL "tinvariance: saved o of B = 1 and B = 2 differ"
cmp -s "$T/o/o-b1.npy" "$T/o/o-b32.npy" && FAIL "tinvariance: saved o of B = 1 and B = 32 are equal"

# --json: the same verdict; decode with GQA is transposed (mha_fwd seqlenq_ngroups_swapped)
"$A" invariance $P --batch 1,32 --json >"$T/j" 2>"$T/err" || FAIL "tinvariance --json: exit status $? ($(cat "$T/err"))"
[ "$(field "$T/j" invariant)" = false ] || FAIL "tinvariance --json: invariant is $(field "$T/j" invariant), want false"
[ "$(field "$T/j" batch_dependent)" = true ] || FAIL "tinvariance --json: batch_dependent is not true"
"$A" invariance --n-q 1 --n-k 4096 --heads 8 --kv-heads 1 --batch 1,2 --json >"$T/jd" 2>"$T/err" ||
  FAIL "tinvariance decode: exit status $? ($(cat "$T/err"))"
[ "$(field "$T/jd" ngroups_swapped)" = true ] || FAIL "tinvariance decode: ngroups_swapped is not true"
[ "$(field "$T/jd" invariant)" = true ] || FAIL "tinvariance decode: B = 1, 2 (32 splits each) not invariant"

# fa2 fixes its tiles and splits: invariant, and says why
"$A" invariance --variant fa2 $P --batch 1,128 >"$T/fixed" 2>"$T/err" || FAIL "tinvariance fa2: exit status $?"
grep -q "recipe fixes tiles and splits" "$T/fixed" || FAIL "tinvariance fa2: no reason given"
grep -q "^invariant: .*the recipe's decisions ignore the batch" "$T/fixed" || FAIL "tinvariance fa2: not reported invariant"

# bad input: a message and status 2
for bad in "--batch 1,0" "--batch x" "--heads 3 --kv-heads 2" "--variant no-such-preset" "--n-q 0"; do
  "$A" invariance --n-q 64 --n-k 64 $bad >/dev/null 2>"$T/err"
  rc=$?
  [ $rc -eq 2 ] || FAIL "tinvariance: '$bad' exit status $rc, want 2"
  grep -q "^attnacc invariance: " "$T/err" || FAIL "tinvariance: '$bad' gave no 'attnacc invariance:' message"
done
[ $fails -eq 0 ] || exit 1
echo "tinvariance: ok"
