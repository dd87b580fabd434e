#!/bin/sh
# attnacc: tests of the attnacc command: clear errors (exit 2, no output file), list, run --json keys, save/score consistency, determinism.
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
A=${top_builddir:-.}/experiments/attnacc
J=${top_builddir:-.}/tests/jget
[ -x "$A" ] || { echo "tcli: $A not built"; exit 1; }
[ -x "$J" ] || { echo "tcli: $J not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tcli.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }

# Strip the timing fields, the only part of the JSON allowed to change between identical runs.
untimed() { sed -e 's/"seconds": [^,}]*/"seconds": T/g' -e 's/"emulation_seconds": [^,}]*/"emulation_seconds": T/g' "$1"; }

# expect_error WHAT PATTERN COMMAND...: exit status 2, one "attnacc CMD: ..." message naming PATTERN, nothing on
# stdout, and the --out file (appended) not created, not even as a temporary.
expect_error() {
  what=$1
  pat=$2
  shift 2
  rm -rf "$T/o"
  mkdir "$T/o"
  "$A" "$@" --out "$T/o/r.json" >"$T/stdout" 2>"$T/stderr"
  rc=$?
  [ $rc -eq 2 ] || FAIL "tcli $what: exit status $rc, want 2 (args: $*)"
  grep -q "^attnacc [a-z]*: " "$T/stderr" || FAIL "tcli $what: no 'attnacc CMD:' message on stderr: $(cat "$T/stderr")"
  grep -q -- "$pat" "$T/stderr" || FAIL "tcli $what: message does not say '$pat': $(cat "$T/stderr")"
  [ "$(wc -l <"$T/stderr")" -le 2 ] || FAIL "tcli $what: more than one message: $(cat "$T/stderr")"
  [ -s "$T/stdout" ] && FAIL "tcli $what: printed on stdout: $(head -c 200 "$T/stdout")"
  [ -z "$(ls -A "$T/o")" ] || FAIL "tcli $what: left files behind: $(ls -A "$T/o")"
}

# ---- identity and help ----
v=$("$A" --version) || FAIL "tcli --version: exit status $?"
case $v in "attnacc $(cat "${top_srcdir:-..}/VERSION") (git "*")") ;; *) FAIL "tcli --version: printed '$v'" ;; esac
"$A" --help >"$T/h" || FAIL "tcli --help: exit status"
for c in list run score; do grep -q "^  $c " "$T/h" || FAIL "tcli --help: command $c not listed"; done
"$A" run --help >"$T/h" || FAIL "tcli run --help: exit status"
for o in variant recipe n d heads kv-heads seed dist sigma scale causal window sinks oracle prec inputs json \
  out save save-oracle threads; do
  grep -q -- "--$o[ =]" "$T/h" || FAIL "tcli run --help: option --$o not listed"
done
grep -q -- "--n N .*(default: 1024)" "$T/h" || FAIL "tcli run --help: default of --n"
grep -q -- "--prec BITS .*(default: 128)" "$T/h" || FAIL "tcli run --help: default of --prec"
"$A" score --help >"$T/h" || FAIL "tcli score --help: exit status"
for o in inputs grads causal window scale oracle prec fa json out; do
  grep -q -- "--$o[ =]" "$T/h" || FAIL "tcli score --help: option --$o not listed"
done

# ---- list ----
"$A" list >"$T/list" || FAIL "tcli list: exit status"
for w in nki fa2 naive-bf16 mpfr fast run score; do
  grep -q "^  $w " "$T/list" || FAIL "tcli list: '$w' not listed"
done

# ---- bad input: exit 2, one message, no output file ----
S="--variant fa2 --n 16 --d 8"
expect_error "unknown option" "unknown option '--bogus'" run $S --bogus 3
expect_error "unknown variant" "unknown variant 'nosuch'.*fa2" run --variant fa2,nosuch --n 16 --d 8
expect_error "no variant" "--variant" run --n 16
expect_error "--n 0" "--n" run $S --n 0
expect_error "--n huge" "too large" run $S --n 99999999999
expect_error "--n 2^64" "too large" run $S --n 18446744073709551616
expect_error "--d huge" "too large" run $S --d 4000000000000
expect_error "--n text" "not a non-negative integer" run $S --n 12x
expect_error "--n negative" "not a non-negative integer" run $S --n -5
expect_error "--seed negative" "--seed" run $S --seed -1
expect_error "missing value" "needs a value" run $S --n
expect_error "--sigma 0" "--sigma" run $S --sigma 0
expect_error "--sigma nan" "--sigma" run $S --sigma nan
expect_error "--dist" "--dist" run $S --dist cauchy
expect_error "--oracle" "--oracle" run $S --oracle exact
expect_error "--prec" "--prec" run $S --prec 10
expect_error "--window without --causal" "window" run $S --window 4
expect_error "kv-heads" "kv-heads\|kv_heads" run $S --heads 3 --kv-heads 2
expect_error "positional" "unexpected argument" run $S extra
expect_error "--recipe missing" "nope.rcp" run --recipe "$T/nope.rcp"
expect_error "inputs missing" "missing-dir" run $S --inputs "$T/missing-dir"
expect_error "score without grads" "--grads" score --inputs "$T"
"$A" frobnicate >/dev/null 2>"$T/stderr"
[ $? -eq 2 ] && grep -q "unknown command 'frobnicate'" "$T/stderr" || FAIL "tcli unknown command"
"$A" run $S --out "$T/no/such/dir/r.json" >/dev/null 2>"$T/stderr"
[ $? -eq 2 ] && grep -q "does not exist" "$T/stderr" || FAIL "tcli --out into a missing folder: $(cat "$T/stderr")"

# ---- run --json: the keys ----
"$A" run --variant fa2 --n 64 --d 16 --json --out "$T/r1.json" >"$T/j1" 2>"$T/e1" || FAIL "tcli run --json: exit status $?: $(cat "$T/e1")"
# schema 2: the same top level for one variant or many (experiments/README-json.md)
"$J" "$T/j1" >/dev/null || FAIL "tcli run --json: not one valid JSON text"
for k in schema_version attnacc.version attnacc.git command seed inputs problem oracle runs.0.variant runs.0.recipe \
  oracle.relerr_bound oracle.recomputed oracle.path oracle.prec problem.n problem.d problem.heads problem.kv_heads \
  problem.causal problem.window problem.sinks problem.dist problem.sigma problem.scale; do
  "$J" "$T/j1" "$k" >/dev/null 2>&1 || FAIL "tcli run --json: key $k missing"
done
for o in o dq dk dv; do
  for k in rel_l2 max_abs max_ulp mean_ulp nan inf pass fail_count fa_ratio fa_pass robust.ulp_p99 rules.torch.applied; do
    "$J" "$T/j1" "runs.0.outputs.$o.$k" >/dev/null 2>&1 || FAIL "tcli run --json: runs.0.outputs.$o.$k missing"
  done
done
[ "$("$J" "$T/j1" schema_version)" = 2 ] || FAIL "tcli run --json: schema_version is not 2"
[ "$("$J" "$T/j1" runs.0.variant)" = fa2 ] || FAIL "tcli run --json: variant is not fa2"
[ "$("$J" "$T/j1" seed)" = 1 ] || FAIL "tcli run --json: default seed is not 1"
[ "$("$J" "$T/j1" problem.n problem.n_k problem.d problem.heads problem.kv_heads | tr '\n' ' ')" = "64 64 16 1 1 " ] ||
  FAIL "tcli run --json: problem fields"
"$J" "$T/j1" runs.1 >/dev/null 2>&1 && FAIL "tcli run --json: one variant gives more than one run"
cmp -s "$T/j1" "$T/r1.json" || FAIL "tcli run --out: file differs from the printed JSON"
grep -Eq '": -?(nan|inf)' "$T/j1" && FAIL "tcli run --json: non-finite number printed"

# ---- determinism: same command twice, and --threads 1 vs 2 ----
"$A" run --variant fa2 --n 64 --d 16 --json >"$T/j2" 2>/dev/null || FAIL "tcli run again: exit status"
untimed "$T/j1" >"$T/u1"
untimed "$T/j2" >"$T/u2"
cmp -s "$T/u1" "$T/u2" || FAIL "tcli determinism: two identical runs differ: $(diff "$T/u1" "$T/u2" | head -5)"
"$A" run --variant fa2 --n 64 --d 16 --json --threads 1 >"$T/t1" 2>/dev/null || FAIL "tcli --threads 1: exit status"
"$A" run --variant fa2 --n 64 --d 16 --json --threads 2 >"$T/t2" 2>/dev/null || FAIL "tcli --threads 2: exit status"
untimed "$T/t1" >"$T/u1"
untimed "$T/t2" >"$T/u2"
cmp -s "$T/u1" "$T/u2" || FAIL "tcli threads: --threads 1 and 2 differ: $(diff "$T/u1" "$T/u2" | head -5)"
"$A" run --variant fa2 --n 64 --d 16 --json --seed 2 >"$T/j3" 2>/dev/null
untimed "$T/j3" >"$T/u3"
cmp -s "$T/u1" "$T/u3" && FAIL "tcli seed: --seed 2 gives the same JSON as --seed 1"

# ---- several variants: the same top level, one entry of "runs" each ----
"$A" run --variant fa2,naive-bf16 --n 32 --d 16 --json >"$T/jm" 2>"$T/em" || FAIL "tcli two variants: $(cat "$T/em")"
[ "$("$J" "$T/jm" runs.0.variant runs.1.variant | tr '\n' ' ')" = "fa2 naive-bf16 " ] ||
  FAIL "tcli two variants: runs are not fa2, naive-bf16"
"$J" "$T/jm" runs.2 >/dev/null 2>&1 && FAIL "tcli two variants: more than two runs"
for k in schema_version attnacc problem oracle seed; do
  "$J" "$T/jm" "$k" >/dev/null 2>&1 || FAIL "tcli two variants: top-level $k missing"
done
# naive-bf16 measured against itself: its fa ratio is exactly 1
[ "$("$J" "$T/jm" runs.1.outputs.dq.fa_ratio)" = 1 ] || FAIL "tcli two variants: naive-bf16's own fa_ratio is not 1"

# ---- recipe files: same as the preset when unchanged, named after the file when changed ----
printf '# fa2 unchanged\nbase = fa2\n' >"$T/same.rcp"
printf 'base = fa2\nfwd.p_fmt = fp32\n' >"$T/p32.rcp"
printf 'base = fa2\nno.such.key = 1\n' >"$T/bad.rcp"
"$A" run --recipe "$T/same.rcp" --n 64 --d 16 --json >"$T/jr" 2>"$T/e" || FAIL "tcli --recipe: $(cat "$T/e")"
untimed "$T/jr" | grep -v '"recipe":' >"$T/ur"
untimed "$T/j1" | grep -v '"recipe":' >"$T/u1"
cmp -s "$T/ur" "$T/u1" || FAIL "tcli --recipe base = fa2 differs from --variant fa2: $(diff "$T/ur" "$T/u1" | head -4)"
"$A" run --variant fa2 --recipe "$T/p32.rcp" --n 32 --d 16 --json >"$T/jr" 2>"$T/e" || FAIL "tcli --recipe p32: $(cat "$T/e")"
[ "$("$J" "$T/jr" runs.1.variant)" = p32 ] || FAIL "tcli --recipe: a changed fa2 is not named after its file"
"$J" "$T/jr" runs.1.recipe | grep -q 'fwd.p_fmt = fp32' || FAIL "tcli --recipe: the recipe text lacks the changed key"
expect_error "bad recipe key" "bad.rcp:2" run --recipe "$T/bad.rcp" --n 16

# ---- mixed io formats: exact-fp64 runs on the same bf16 inputs and agrees with the oracle ----
"$A" run --variant fa2,exact-fp64 --n 32 --d 16 --json >"$T/jx" 2>"$T/e" || FAIL "tcli fa2,exact-fp64: $(cat "$T/e")"
for o in o dq dk dv; do
  v=$("$J" "$T/jx" "runs.1.outputs.$o.rel_l2")
  awk -v v="$v" 'BEGIN { exit !(v != "" && v != "null" && v + 0 < 1e-12) }' ||
    FAIL "tcli exact-fp64: $o rel_l2 '$v' is not below 1e-12"
done

# ---- the table ----
"$A" run --variant fa2 --n 32 --d 16 --seed 9 >"$T/tab" 2>&1 || FAIL "tcli table: exit status"
for w in "^fa2 *o " "^fa2 *dq " "^fa2 *dk " "^fa2 *dv " "^oracle: fast, 128 bits" "^seconds: oracle" "^seed 9, attnacc "; do
  grep -q "$w" "$T/tab" || FAIL "tcli table: no line matching '$w'"
done

# ---- save, then score the saved files: the same metrics ----
# the metrics of one output: every key but the legacy fa rule's (fa_*) and the rules that need a naive reference
metrics() { "$J" "$1" "runs.0.outputs.$2" | sed 's/,"fa_factor".*//'; }
check_same() { # check_same WHAT RUNJSON SCOREJSON
  for o in o dq dk dv; do
    a=$(metrics "$2" $o)
    b=$(metrics "$3" $o)
    [ -n "$a" ] && [ "$a" = "$b" ] || FAIL "tcli $1: $o differs between run and score: run: $a score: $b"
  done
}
# run is given score's oracle target (2^-32, aa_score_oracle_target): the same oracle, so the same metrics
"$A" run --variant fa2 --n 48 --d 16 --seed 3 --oracle-target 2^-32 --save "$T/s1" --json >"$T/rs" 2>"$T/e" || FAIL "tcli --save: $(cat "$T/e")"
for f in q k v do o dq dk dv; do
  [ -f "$T/s1/$f.npy" ] || FAIL "tcli --save: $f.npy missing"
  head -c 80 "$T/s1/$f.npy" | grep -q "'descr': '<u2'" || FAIL "tcli --save: $f.npy is not '<u2'"
done
[ -z "$(ls "$T/s1" | grep tmp)" ] || FAIL "tcli --save: temporary files left"
"$A" score --inputs "$T/s1" --grads "$T/s1" --json >"$T/ss" 2>"$T/e" || FAIL "tcli score: $(cat "$T/e")"
[ "$("$J" "$T/ss" runs.0.variant)" = external ] || FAIL "tcli score: variant is not external"
check_same "save/score" "$T/rs" "$T/ss"
# with a causal mask, GQA and sinks
"$A" run --variant fa2 --n 40 --d 16 --heads 2 --kv-heads 1 --causal --seed 4 --oracle-target 2^-32 --save "$T/s2" --json >"$T/rs2" 2>"$T/e" ||
  FAIL "tcli --save causal GQA: $(cat "$T/e")"
"$A" score --inputs "$T/s2" --grads "$T/s2" --causal --json >"$T/ss2" 2>"$T/e" || FAIL "tcli score causal GQA: $(cat "$T/e")"
check_same "save/score causal GQA" "$T/rs2" "$T/ss2"
# score --fa reproduces run's flash-attention ratios
"$A" score --inputs "$T/s1" --grads "$T/s1" --fa --json >"$T/sf" 2>"$T/e" || FAIL "tcli score --fa: $(cat "$T/e")"
for o in o dq dk dv; do
  a=$("$J" "$T/rs" "runs.0.outputs.$o.fa_factor" "runs.0.outputs.$o.fa_ref_max_abs" "runs.0.outputs.$o.fa_ratio" "runs.0.outputs.$o.fa_pass")
  b=$("$J" "$T/sf" "runs.0.outputs.$o.fa_factor" "runs.0.outputs.$o.fa_ref_max_abs" "runs.0.outputs.$o.fa_ratio" "runs.0.outputs.$o.fa_pass")
  [ "$a" = "$b" ] || FAIL "tcli score --fa: $o fa fields differ: run: $a score: $b"
done
# run --inputs on the saved files reproduces the drawn run
"$A" run --variant fa2 --inputs "$T/s1" --oracle-target 2^-32 --json >"$T/ri" 2>"$T/e" || FAIL "tcli run --inputs: $(cat "$T/e")"
check_same "run --inputs" "$T/rs" "$T/ri"

# ---- bad files: malformed, mismatched shapes, NaN ----
mkdir "$T/bad"
cp "$T/s1/k.npy" "$T/s1/v.npy" "$T/s1/do.npy" "$T/bad/"
printf 'not a npy file at all' >"$T/bad/q.npy"
expect_error "malformed npy" "q.npy.*magic" run --variant fa2 --inputs "$T/bad"
expect_error "score malformed npy" "q.npy" score --inputs "$T/bad" --grads "$T/s1"
"$A" run --variant fa2 --n 48 --d 8 --save "$T/s3" >/dev/null 2>&1 || FAIL "tcli --save d=8"
cp "$T/s1/q.npy" "$T/bad/q.npy"
cp "$T/s3/k.npy" "$T/bad/k.npy"
expect_error "mismatched shapes" "k.npy: shape \[1, 48, 8\] does not match q.npy's d = 16" run --variant fa2 --inputs "$T/bad"
cp "$T/s1/k.npy" "$T/bad/k.npy"
cp "$T/s3/dq.npy" "$T/bad/dq.npy"
cp "$T/s1/dk.npy" "$T/s1/dv.npy" "$T/bad/"
expect_error "score mismatched grads" "dq.npy: shape" score --inputs "$T/bad" --grads "$T/bad"
expect_error "--n against inputs" "does not match" run --variant fa2 --inputs "$T/bad" --n 64
# a '<u2' [4, 4] file of BF16 NaN (0x7fc0) built by hand: 10-byte prefix + 118-byte header = 128
{
  printf '\223NUMPY\001\000v\000'
  printf "%-117s\n" "{'descr': '<u2', 'fortran_order': False, 'shape': (4, 4), }"
  i=0
  while [ $i -lt 16 ]; do printf '\300\177'; i=$((i + 1)); done
} >"$T/nan.npy"
mkdir "$T/nan"
"$A" run --variant fa2 --n 4 --d 4 --save "$T/nan" >/dev/null 2>&1 || FAIL "tcli --save n=4"
cp "$T/nan.npy" "$T/nan/q.npy"
expect_error "NaN input" "NaN" run --variant fa2 --inputs "$T/nan"
expect_error "score NaN input" "NaN" score --inputs "$T/nan" --grads "$T/nan"
# NaN in the gradients is measured, not refused: counted, statistics over no finite element are null, pass false.
mkdir "$T/nang"
"$A" run --variant fa2 --n 4 --d 4 --save "$T/nang" >/dev/null 2>&1 || FAIL "tcli --save n=4 (2)"
cp "$T/nan.npy" "$T/nang/dq.npy"
# The verdict (default rule expect) fails: exit status 1, the JSON still printed, stderr names the NaN count.
"$A" score --inputs "$T/nang" --grads "$T/nang" --json >"$T/jn" 2>"$T/e"
st=$?
[ $st -eq 1 ] || FAIL "tcli score NaN grads: exit status $st, want 1: $(cat "$T/e")"
grep -q "dq fails the expect rule: 16 NaN" "$T/e" || FAIL "tcli score NaN grads: stderr is $(cat "$T/e")"
"$A" score --inputs "$T/nang" --grads "$T/nang" --no-fail >/dev/null 2>&1 || FAIL "tcli score NaN grads --no-fail: exit status"
q=runs.0.outputs.dq
[ "$("$J" "$T/jn" $q.rel_l2 $q.max_abs $q.nan $q.inf $q.fail_count $q.pass | tr '\n' ' ')" = "null null 16 0 16 false " ] ||
  FAIL "tcli score NaN grads: dq is $("$J" "$T/jn" $q)"
[ "$("$J" "$T/jn" runs.0.outputs.dk.nan runs.0.outputs.dk.inf | tr '\n' ' ')" = "0 0 " ] || FAIL "tcli score NaN grads: dk affected"

if [ $fails -ne 0 ]; then
  echo "tcli: $fails failure(s)"
  exit 1
fi
echo "tcli: ok"
