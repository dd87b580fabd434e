#!/bin/sh
# attnacc: conditional recipe keys through the command line: bad files exit 2 naming FILE:LINE and the key; run and explain resolve per problem.
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
A=${top_builddir:-.}/experiments/attnacc
[ -x "$A" ] || { echo "twhen_cli: $A not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/twhen_cli.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }
P="--n 64 --d 16 --threads 1"

# Bad input: exit status 2, the message names the file, the line and the key (or term).
bad() { # $1 file text, $2 line, $3 word the message must name
  printf '%b' "$1" >"$T/bad.recipe"
  "$A" run --variant "$T/bad.recipe" $P >"$T/out" 2>"$T/err"
  st=$?
  [ $st -eq 2 ] || FAIL "twhen_cli: '$1' exits $st, not 2"
  grep -q "bad.recipe:$2:" "$T/err" || FAIL "twhen_cli: '$1': no bad.recipe:$2: in '$(cat "$T/err")'"
  grep -q -- "$3" "$T/err" || FAIL "twhen_cli: '$1': '$3' not named in '$(cat "$T/err")'"
  [ -s "$T/out" ] && grep -q " dq " "$T/out" && FAIL "twhen_cli: '$1' printed results"
}
bad 'base = fa2\nwhen causal: fwd.tile_k = many\n' 2 fwd.tile_k
bad 'base = fa2\n# c\nwhen causal: no.such.key = 1\n' 3 no.such.key
bad 'when causal and n >> 3: io = fp32\n' 1 'n >> 3'
bad 'when causal: io = fp32\nwhen causal: io = fp16\n' 2 io

# run resolves per problem: a recipe whose causal cells use bf16 dS runs,
# on a causal problem, exactly as the same recipe written without the
# condition, and on a dense problem exactly as fa2 (rel_l2 to all digits).
printf 'base = fa2\nname = w\nwhen causal: bwd.ds_fmt = fp16\n' >"$T/w.recipe"
printf 'base = fa2\nname = u\nbwd.ds_fmt = fp16\n' >"$T/u.recipe"
for m in "" --causal; do
  "$A" run --variant "$T/w.recipe,$T/u.recipe,fa2" $P $m >"$T/run" 2>"$T/e" || FAIL "twhen_cli: run $m: $(cat "$T/e")"
  w=$(awk '$1 == "w" && $2 == "dq" { print $4 }' "$T/run") u=$(awk '$1 == "u" && $2 == "dq" { print $4 }' "$T/run")
  f=$(awk '$1 == "fa2" && $2 == "dq" { print $4 }' "$T/run")
  if [ -n "$m" ]; then
    [ -n "$w" ] && [ "$w" = "$u" ] && [ "$w" != "$f" ] || FAIL "twhen_cli: causal w dq '$w', unconditional '$u', fa2 '$f'"
  else
    [ -n "$w" ] && [ "$w" = "$f" ] && [ "$w" != "$u" ] || FAIL "twhen_cli: dense w dq '$w', fa2 '$f', unconditional '$u'"
  fi
done

# explain prints which conditional lines apply, and list --recipe shows them.
"$A" explain --variant tlx --n 64 --d 16 --causal --threads 1 >"$T/x" 2>"$T/e" || FAIL "twhen_cli: explain: $(cat "$T/e")"
grep -q '^  applies  when causal: fwd.softmax = guarded$' "$T/x" || FAIL "twhen_cli: explain does not show the applied causal line"
grep -q '^  -        when causal and n >= 32768: dq_reduce = fp32-ordered$' "$T/x" || FAIL "twhen_cli: explain marks the n >= 32768 line"
# explain takes run's mask options (run's own parser): a key padding and an offset make the problem `masked`, and
# the first NaN is cuDNN's phantom key slot j = n_k (fixtures/h200-nan/nan.json: n = 64, offset -200, sigma 1, every
# dQ row NaN on the H200); without them the masked lines do not apply. A bad mask option exits 2.
"$A" explain --variant cudnn-h100 --n 64 --d 16 --key-len 48 --logit-offset -200 --threads 1 >"$T/xm" 2>"$T/e" ||
  FAIL "twhen_cli: explain with masks: $(cat "$T/e")"
grep -q '^  applies  when masked: scale_fold = s$' "$T/xm" ||
  FAIL "twhen_cli: explain --key-len does not apply the masked line"
grep -q '^first NaN/Inf (bwd.exp): .*(h 0, i 0, j 64, a key slot past n_k (mask.phantom_tile))' "$T/xm" ||
  FAIL "twhen_cli: explain with masks does not name the phantom slot: $(grep first "$T/xm")"
"$A" explain --variant cudnn-h100 --n 64 --d 16 --threads 1 >"$T/xu" 2>"$T/e" || FAIL "twhen_cli: explain: $(cat "$T/e")"
grep -q '^  -        when masked: scale_fold = s$' "$T/xu" ||
  FAIL "twhen_cli: explain without masks applies the masked line"
"$A" explain --variant cudnn-h100 --n 64 --key-len 65 >/dev/null 2>&1
[ $? -eq 2 ] || FAIL "twhen_cli: explain --key-len 65 (> n) does not exit 2"
"$A" list --recipe tlx >"$T/l" 2>&1 || FAIL "twhen_cli: list --recipe tlx"
grep -q '^when causal and n >= 32768: dq_reduce = fp32-ordered' "$T/l" || FAIL "twhen_cli: list --recipe tlx lacks the conditional lines"

[ $fails -eq 0 ] || exit 1
echo "twhen_cli: ok"
