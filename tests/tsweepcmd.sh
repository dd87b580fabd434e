#!/bin/sh
# attnacc: tests of `attnacc sweep`: --jobs and --shard/--merge give the same canonical CSV, SIGKILL + --resume loses nothing, rows agree with `attnacc run`, bad options exit 2.
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
A=${top_builddir:-.}/experiments/attnacc
[ -x "$A" ] || { echo "tsweepcmd: $A not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tsweepcmd.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
# idle OpenMP threads sleep instead of spinning: the machine is shared with other tests
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_WAIT_POLICY
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }
# The hidden experiment `smoke`: n = 16, 32, 48, d = 8, dense and causal, seeds 1..2 (12 cells).
V=fa2,naive-bf16
sweep() { "$A" sweep --experiment smoke --variants $V "$@"; }

# ---- reference: one thread ----
sweep --out "$T/ref" --jobs 1 >"$T/ref.out" 2>"$T/ref.err" || FAIL "tsweepcmd ref: exit $? ($(cat "$T/ref.err"))"
for f in results.csv results.canon.csv results.jsonl meta.json; do
  [ -s "$T/ref/$f" ] || FAIL "tsweepcmd ref: $f missing"
done
# 12 cells x 2 recipes x 4 outputs, plus the header: counted from the grid, not from the program
rows=$(wc -l <"$T/ref/results.canon.csv")
[ "$rows" -eq 97 ] || FAIL "tsweepcmd ref: results.canon.csv has $rows lines, want 1 + 12*2*4 = 97"
jrows=$(wc -l <"$T/ref/results.jsonl")
[ "$jrows" -eq 96 ] || FAIL "tsweepcmd ref: results.jsonl has $jrows lines, want 96"
head -1 "$T/ref/results.csv" | grep -q 'seconds_oracle,seconds_emul$' ||
  FAIL "tsweepcmd ref: results.csv does not end with the timing columns: $(head -1 "$T/ref/results.csv")"
head -1 "$T/ref/results.canon.csv" | grep -q 'seconds' && FAIL "tsweepcmd ref: canonical CSV keeps a timing column"
for k in '"version"' '"git"' '"recipes"' '"grid_hash"'; do
  grep -q "$k" "$T/ref/meta.json" || FAIL "tsweepcmd ref: meta.json has no $k"
done
grep -q "results: $T/ref/results.csv" "$T/ref.out" || FAIL "tsweepcmd ref: no 'results:' line: $(cat "$T/ref.out")"
[ -s "$T/ref.err" ] && FAIL "tsweepcmd ref: wrote on stderr (not a terminal): $(head -c 300 "$T/ref.err")"

# Inputs depend on the cell, not on the recipe: both recipes of a cell share input_seed, distinct cells do not.
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
  { key = $h["n"] "/" $h["mask"] "/" $h["seed"]; s = $h["input_seed"]
    if ((key in seen) && seen[key] != s) { print "FAIL tsweepcmd seeds: cell " key " has two input seeds"; bad = 1 }
    seen[key] = s; if (!(s in owner)) owner[s] = key
    else if (owner[s] != key) { print "FAIL tsweepcmd seeds: cells " key " and " owner[s] " share input seed " s; bad = 1 } }
  END { exit bad }' "$T/ref/results.csv" || fails=$((fails + 1))

# A second code path: `attnacc run` on the cell's input seed must give the same metrics bit for bit.
line=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
  $h["recipe"] == "fa2" && $h["tensor"] == "dq" && $h["n"] == 32 && $h["mask"] == "causal" && $h["seed"] == 2 {
    print $h["input_seed"], $h["rel_l2"], $h["max_abs"]; exit }' "$T/ref/results.csv")
set -- $line
if [ $# -ne 3 ]; then
  FAIL "tsweepcmd run: no fa2 dq row for n = 32, causal, seed 2"
else
  "$A" run --variant fa2 --n 32 --d 8 --causal --seed "$1" --json >"$T/run.json" || FAIL "tsweepcmd run: exit $?"
  got=$("${top_builddir:-.}/tests/jget" "$T/run.json" runs.0.outputs.dq.rel_l2 runs.0.outputs.dq.max_abs | tr '\n' ' ')
  awk -v a="$2 $3" -v b="$got" 'BEGIN { split(a, x, " "); split(b, y, " ")
    if (x[1] + 0 != y[1] + 0 || x[2] + 0 != y[2] + 0) exit 1 }' ||
    FAIL "tsweepcmd run: sweep row (seed $1) rel_l2, max_abs = $2 $3 but attnacc run gives $got"
fi

# ---- threads ----
sweep --out "$T/j2" --jobs 2 >/dev/null 2>"$T/j2.err" || FAIL "tsweepcmd jobs 2: exit $? ($(cat "$T/j2.err"))"
cmp -s "$T/ref/results.canon.csv" "$T/j2/results.canon.csv" || FAIL "tsweepcmd jobs: --jobs 2 canonical CSV differs from --jobs 1"
# --device cpu: the same bits as the default (auto; build-aux/device-check compares cuda on a GPU machine)
sweep --out "$T/dcpu" --device cpu >/dev/null 2>"$T/dcpu.err" || FAIL "tsweepcmd device cpu: exit $? ($(cat "$T/dcpu.err"))"
cmp -s "$T/ref/results.canon.csv" "$T/dcpu/results.canon.csv" || FAIL "tsweepcmd device: --device cpu canonical CSV differs"

# ---- shards and merge (no oracle cache, so the shards recompute everything) ----
sweep --out "$T/s0" --shard 0/2 --cache none >"$T/s0.out" 2>&1 || FAIL "tsweepcmd shard 0/2: exit $? ($(tail -n 5 "$T/s0.out"))"
sweep --out "$T/s1" --shard 1/2 --cache none >/dev/null 2>"$T/s1.err" || FAIL "tsweepcmd shard 1/2: exit $? ($(tail -n 5 "$T/s1.err"))"
[ -e "$T/s0/results.csv" ] && FAIL "tsweepcmd shard: a half shard wrote results.csv"
grep -q -- "--merge" "$T/s0.out" || FAIL "tsweepcmd shard: no hint to merge: $(cat "$T/s0.out")"
"$A" sweep --merge --out "$T/m" "$T/s0" "$T/s1" >/dev/null 2>"$T/m.err" || FAIL "tsweepcmd merge: exit $? ($(cat "$T/m.err"))"
cmp -s "$T/ref/results.canon.csv" "$T/m/results.canon.csv" || FAIL "tsweepcmd merge: merged shards differ from the unsharded run"
[ -s "$T/m/meta.json" ] || FAIL "tsweepcmd merge: meta.json not carried over"
"$A" sweep --merge --out "$T/m1" "$T/s0" >/dev/null 2>&1
[ $? -eq 2 ] || FAIL "tsweepcmd merge: merging one shard of two must fail with status 2"

# ---- SIGKILL in the middle, then --resume ----
# (run the program itself in the background, not a shell function, so that $! is its pid)
ATTNACC_SWEEP_CELL_DELAY_MS=400 "$A" sweep --experiment smoke --variants $V --out "$T/k" >/dev/null 2>&1 &
pid=$!
i=0
while [ $i -lt 300 ]; do
  n=$(grep -c '^#done' "$T/k/journal-0-of-1.txt" 2>/dev/null || true)
  [ "${n:-0}" -ge 3 ] && break
  sleep 0.1
  i=$((i + 1))
done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
n=$(grep -c '^#done' "$T/k/journal-0-of-1.txt" 2>/dev/null || true)
if [ "${n:-0}" -ge 12 ] || [ -e "$T/k/results.csv" ]; then
  FAIL "tsweepcmd kill: the sweep finished before the kill ($n cells): the test proves nothing"
elif [ "${n:-0}" -lt 1 ]; then
  FAIL "tsweepcmd kill: no finished cell in the journal after 30 s"
fi
sweep --out "$T/k" >/dev/null 2>&1
[ $? -eq 2 ] || FAIL "tsweepcmd kill: a second run without --resume into a started folder must exit 2"
sweep --out "$T/k" --resume >"$T/k.out" 2>&1 || FAIL "tsweepcmd resume: exit $? ($(cat "$T/k.out"))"
grep -q "($n resumed" "$T/k.out" || FAIL "tsweepcmd resume: want $n cells resumed: $(cat "$T/k.out")"
cmp -s "$T/ref/results.canon.csv" "$T/k/results.canon.csv" || FAIL "tsweepcmd resume: killed + resumed CSV differs from an uninterrupted run"
# resuming a complete folder changes nothing
sweep --out "$T/k" --resume >/dev/null 2>&1 || FAIL "tsweepcmd resume: a complete folder: exit $?"
cmp -s "$T/ref/results.canon.csv" "$T/k/results.canon.csv" || FAIL "tsweepcmd resume: second resume changed the CSV"

# ---- MPI (only with an MPI build and mpirun) ----
if [ -n "${MPIRUN:-}" ] && command -v "$MPIRUN" >/dev/null 2>&1 && grep -q 'define AA_HAVE_MPI 1' "${top_builddir:-.}/config.h" 2>/dev/null; then
  # Under AddressSanitizer, Open MPI's leaks are suppressed by name
  # (build-aux/lsan-openmpi.supp), which needs full stacks: its plugins are
  # unloaded at MPI_Finalize, where the fast unwinder loses their frames.
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
  export ASAN_OPTIONS
  extra=
  [ "$(id -u)" = 0 ] && extra=--allow-run-as-root
  if "$MPIRUN" $extra --oversubscribe -np 2 "$A" sweep --experiment smoke --variants $V --out "$T/mpi" >"$T/mpi.out" 2>&1; then
    cmp -s "$T/ref/results.canon.csv" "$T/mpi/results.canon.csv" || FAIL "tsweepcmd mpi: 2 ranks differ from 1 process"
  else
    FAIL "tsweepcmd mpi: mpirun -np 2 failed: $(tail -5 "$T/mpi.out")"
  fi
else
  echo "tsweepcmd: no MPI build or mpirun: MPI part skipped"
fi

# ---- bad usage: exit 2 and one message ----
bad() {
  what=$1
  shift
  "$A" sweep "$@" >"$T/bad.out" 2>"$T/bad.err"
  rc=$?
  [ $rc -eq 2 ] || FAIL "tsweepcmd bad $what: exit $rc, want 2 (args: $*)"
  grep -q '^attnacc sweep: ' "$T/bad.err" || FAIL "tsweepcmd bad $what: no message: $(cat "$T/bad.err")"
}
bad "no experiment" --out "$T/b"
bad "unknown experiment" --experiment nosuch --out "$T/b"
bad "unknown variant" --experiment smoke --variants fa2,nosuch --out "$T/b"
bad "repeated variant" --experiment smoke --variants fa2,fa2 --out "$T/b"
bad "jobs 0" --experiment smoke --jobs 0 --out "$T/b"
bad "shard I >= N" --experiment smoke --shard 2/2 --out "$T/b"
bad "shard syntax" --experiment smoke --shard 1 --out "$T/b"
bad "n list" --experiment smoke --n 16,x --out "$T/b"
bad "masks" --experiment smoke --masks both --out "$T/b"
bad "stray argument" --experiment smoke --out "$T/b" extra
bad "unknown option" --experiment smoke --bogus
bad "device name" --experiment smoke --device gpu --out "$T/b"
bad "merge without folders" --merge --out "$T/b"
bad "another grid in the folder" --experiment smoke --variants $V --quick --out "$T/ref" --resume
cmp -s "$T/ref/results.canon.csv" "$T/j2/results.canon.csv" || FAIL "tsweepcmd bad: a refused run touched the results"

[ $fails -eq 0 ] && echo "tsweepcmd: ok"
[ $fails -eq 0 ]
