#!/bin/sh
# attnacc: tests of run's problem-feature options: clear errors (exit 2, no output file), the features in
# SPDX-License-Identifier: LGPL-3.0-or-later
# the JSON, the varlen batch (per sequence and batch, batch metrics over the packed elements).
set -u
A=${top_builddir:-.}/experiments/attnacc
J=${top_builddir:-.}/tests/jget
[ -x "$A" ] || { echo "tfeatures_cli: $A not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tfeat.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }

expect_error() {
  what=$1
  pat=$2
  shift 2
  rm -rf "$T/o"
  mkdir "$T/o"
  "$A" "$@" --out "$T/o/r.json" >"$T/stdout" 2>"$T/stderr"
  rc=$?
  [ $rc -eq 2 ] || FAIL "tfeatures_cli $what: exit status $rc, want 2 (args: $*)"
  grep -q -- "$pat" "$T/stderr" || FAIL "tfeatures_cli $what: message does not say '$pat': $(cat "$T/stderr")"
  [ "$(wc -l <"$T/stderr")" -le 2 ] || FAIL "tfeatures_cli $what: more than one message: $(cat "$T/stderr")"
  [ -s "$T/stdout" ] && FAIL "tfeatures_cli $what: printed on stdout: $(head -c 200 "$T/stdout")"
  [ -z "$(ls -A "$T/o")" ] || FAIL "tfeatures_cli $what: left files behind: $(ls -A "$T/o")"
}

R="run --variant exact-fp64 --n 32 --d 8"
expect_error "bad window" "window" $R --window 3,x
expect_error "window side below -1" "window" $R --window -2,3
expect_error "old window without causal" "causal" $R --window 4
expect_error "bad alignment" "causal-align" $R --causal-align middle
expect_error "negative softcap" "softcap" $R --softcap -1
expect_error "alibi form without alibi" "alibi" $R --alibi-form torch
expect_error "bad alibi form" "alibi-form" $R --alibi --alibi-form sideways
expect_error "missing slopes file" "alibi-slopes" $R --alibi-slopes "$T/none"
printf '0.5\n' >"$T/s1"
expect_error "too few slopes" "--heads" $R --heads 2 --alibi-slopes "$T/s1"
printf '0.5 abc\n' >"$T/s2"
expect_error "bad slope" "abc" $R --heads 2 --alibi-slopes "$T/s2"
expect_error "missing cu_seqlens file" "cu-seqlens" run --variant exact-fp64 --d 8 --cu-seqlens "$T/none"
printf '0 5 3\n' >"$T/cu1"
expect_error "decreasing cu_seqlens" "increase" run --variant exact-fp64 --d 8 --cu-seqlens "$T/cu1" --json
printf '1 5\n' >"$T/cu2"
expect_error "cu_seqlens not from 0" "start at 0" run --variant exact-fp64 --d 8 --cu-seqlens "$T/cu2" --json
printf '0 5 9\n0 4\n' >"$T/cu3"
expect_error "cu_seqlens q and k of different batches" "offsets" run --variant exact-fp64 --d 8 --cu-seqlens "$T/cu3" --json
printf '0 5 9\n' >"$T/cu4"
expect_error "cu_seqlens with --n" "leave out" run --variant exact-fp64 --d 8 --n 9 --cu-seqlens "$T/cu4" --json

# features in the JSON, oracle certified
"$A" run --variant exact-fp64 --n 40 --n-q 24 --d 8 --heads 2 --causal --causal-align bottom-right --softcap 3 \
  --alibi --json >"$T/j" || FAIL "tfeatures_cli featured run: exit status $?"
P=problem
[ "$("$J" "$T/j" $P.causal_align $P.softcap $P.alibi $P.alibi_slopes $P.n $P.n_k oracle.uncertified | tr '\n' ' ')" = \
  "bottom-right 3 flash [0.0625,0.00390625] 24 40 0 " ] || FAIL "tfeatures_cli featured run: JSON problem is $("$J" "$T/j" $P)"
"$A" run --variant exact-fp64 --n 40 --d 8 --window 5,2 --json >"$T/w" || FAIL "tfeatures_cli window run: exit $?"
[ "$("$J" "$T/w" problem.window_size)" = "[5,2]" ] || FAIL "tfeatures_cli window run: JSON lacks window_size [5, 2]"

# varlen: three sequences, per-sequence results and the batch's; the exact recipe is near the oracle everywhere
printf '0 7 20 32\n0 9 20 40\n' >"$T/cu"
"$A" run --variant exact-fp64 --cu-seqlens "$T/cu" --d 8 --causal --causal-align bottom-right --json >"$T/v" ||
  FAIL "tfeatures_cli varlen: exit status $?"
[ "$("$J" "$T/v" runs.0.variant sequences.0.runs.0.variant sequences.2.runs.0.variant | tr '\n' ' ')" = \
  "exact-fp64 exact-fp64 exact-fp64 " ] || FAIL "tfeatures_cli varlen: want 3 sequences + the batch's run"
"$J" "$T/v" sequences.3 >/dev/null 2>&1 && FAIL "tfeatures_cli varlen: more than 3 sequences"
[ "$("$J" "$T/v" cu_seqlens_k)" = "[0,9,20,40]" ] || FAIL "tfeatures_cli varlen: cu_seqlens_k not echoed"
[ "$("$J" "$T/v" problem.n problem.n_k | tr '\n' ' ')" = "32 40 " ] || FAIL "tfeatures_cli varlen: the batch problem is not 32 x 40"
[ "$("$J" "$T/v" sequences.1.problem.n sequences.1.problem.n_k | tr '\n' ' ')" = "13 11 " ] ||
  FAIL "tfeatures_cli varlen: sequence 1 is not 13 x 11"
for r in runs.0 sequences.0.runs.0 sequences.1.runs.0 sequences.2.runs.0; do
  for o in o dq dk dv; do
    v=$("$J" "$T/v" "$r.outputs.$o.rel_l2")
    awk -v v="$v" 'BEGIN { exit !(v != "" && v != "null" && v + 0 <= 1e-12) }' ||
      FAIL "tfeatures_cli varlen: $r $o exact-fp64 rel_l2 '$v' above 1e-12"
  done
done
"$A" run --variant fa2 --cu-seqlens "$T/cu" --d 8 --json >"$T/vf" || FAIL "tfeatures_cli varlen fa2: exit status $?"
for r in runs.0 sequences.0.runs.0 sequences.1.runs.0 sequences.2.runs.0; do
  for o in o dq dk dv; do
    [ "$("$J" "$T/vf" "$r.outputs.$o.fa_factor")" = null ] &&
      FAIL "tfeatures_cli varlen fa2: the flash-attention rule not applied to $r $o"
  done
done
"$A" run --variant exact-fp64 --cu-seqlens "$T/cu" --d 8 >"$T/vt" || FAIL "tfeatures_cli varlen table: exit status $?"
grep -q "^== batch of 3 sequences: 32 queries, 40 keys" "$T/vt" || FAIL "tfeatures_cli varlen table: no batch header"

[ $fails -eq 0 ] && echo "tfeatures_cli: ok"
[ $fails -eq 0 ]
