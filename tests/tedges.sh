#!/bin/sh
# attnacc: edges under bad input: duplicate recipe keys, exit status 2 for unusable output places, what a resumed journal discarded, memory and MPFR-time limits.
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
A=${top_builddir:-.}/experiments/attnacc
[ -x "$A" ] || { echo "tedges: $A not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tedges.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_WAIT_POLICY
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }

# refused WHAT STATUS PATTERN COMMAND...: exit status STATUS, exactly one "attnacc CMD: " line on stderr matching
# PATTERN, nothing on stdout.
refused() {
  what=$1
  want=$2
  pat=$3
  shift 3
  # (a timeout so that a limit that failed to refuse does not run for hours)
  timeout 300 "$A" "$@" >"$T/stdout" 2>"$T/stderr"
  rc=$?
  [ $rc -eq "$want" ] || FAIL "tedges $what: exit status $rc, want $want (args: $*): $(cat "$T/stderr")"
  [ "$(grep -c '^attnacc [a-z-]*: ' "$T/stderr")" -eq 1 ] || FAIL "tedges $what: not one message: $(cat "$T/stderr")"
  grep -q -- "$pat" "$T/stderr" || FAIL "tedges $what: message does not say '$pat': $(cat "$T/stderr")"
  [ -s "$T/stdout" ] && FAIL "tedges $what: printed on stdout: $(head -c 200 "$T/stdout")"
  return 0
}

# ---- a key given twice names both lines ----
printf 'base = fa2\nbwd.ds_fmt = fp32   # first\n\n# a comment\nbwd.ds_fmt = bf16\n' >"$T/dup.rcp"
refused "duplicate key" 2 "dup.rcp:5: key 'bwd.ds_fmt' given twice (first at .*dup.rcp:2)" \
  run --recipe "$T/dup.rcp" --n 16 --d 8
printf 'base = fa2\ndq_reduce = fp32-atomic\ndq_reduce_kind = fp32-ordered\n' >"$T/dup2.rcp"
refused "duplicate key (alias)" 2 "dup2.rcp:3: key 'dq_reduce_kind' given twice (first at .*dup2.rcp:2)" \
  run --recipe "$T/dup2.rcp" --n 16 --d 8
printf 'base = fa2\nbwd.ds_fmt = fp32\nbwd.dq_acc_fmt = fp32\n' >"$T/nodup.rcp"
"$A" run --recipe "$T/nodup.rcp" --n 16 --d 8 >/dev/null 2>"$T/e" || FAIL "tedges distinct keys refused: $(cat "$T/e")"

# ---- exit status 2 for output places that cannot work ----
mkdir "$T/folder"
refused "--recipe a folder" 2 "folder: is a folder" run --recipe "$T/folder" --n 16 --d 8
printf 'x' >"$T/plain"
refused "sweep --out a file" 2 "plain exists and is not a folder" sweep --experiment smoke --variants fa2 --out "$T/plain"
refused "sweep --out under a file" 2 "plain exists and is not a folder" \
  sweep --experiment smoke --variants fa2 --out "$T/plain/sub"
refused "merge --out a file" 2 "plain exists and is not a folder" sweep --merge --out "$T/plain" "$T/folder"
[ "$(cat "$T/plain")" = x ] || FAIL "tedges sweep --out a file: the file was changed"
if [ -d /proc/self ]; then
  refused "sweep --out /proc/x" 2 "/proc" sweep --experiment smoke --variants fa2 --out /proc/attnacc-x
  refused "run --out /proc/x" 2 "/proc/attnacc-x" run --variant fa2 --n 16 --d 8 --out /proc/attnacc-x
  refused "run --save /proc/x" 2 "/proc" run --variant fa2 --n 16 --d 8 --save /proc/attnacc-x
  refused "main --out /proc/x" 2 "/proc" main --out /proc/attnacc-x
fi
if [ -d /sys/kernel ]; then
  refused "sweep --out /sys/x" 2 "/sys" sweep --experiment smoke --variants fa2 --out /sys/attnacc-x
  refused "run --out /sys/x" 2 "/sys/attnacc-x" run --variant fa2 --n 16 --d 8 --out /sys/attnacc-x
fi
# a read-only folder (root ignores permissions: there only the pseudo file systems above apply)
mkdir "$T/ro"
chmod 555 "$T/ro"
if [ "$(id -u)" != 0 ]; then
  refused "sweep --out read-only" 2 "not writable" sweep --experiment smoke --variants fa2 --out "$T/ro/s"
  refused "run --out read-only" 2 "not writable" run --variant fa2 --n 16 --d 8 --out "$T/ro/r.json"
fi
chmod 755 "$T/ro"

# ---- a resumed journal says what it discarded ----
"$A" sweep --experiment smoke --variants fa2 --out "$T/ref" >/dev/null 2>"$T/e" || FAIL "tedges ref sweep: $(cat "$T/e")"
[ -d /proc/self ] && refused "report --out /proc/x" 2 "--out: /proc/attnacc-x: cannot create" report --in "$T/ref" --out /proc/attnacc-x
J=journal-0-of-1.txt
size=$(wc -c <"$T/ref/$J")
# a record torn 50 bytes before its end (as by SIGKILL inside the write)
mkdir "$T/torn"
head -c $((size - 50)) "$T/ref/$J" >"$T/torn/$J"
"$A" sweep --experiment smoke --variants fa2 --out "$T/torn" --resume >"$T/o" 2>"$T/e" || FAIL "tedges torn resume: exit $?"
grep -q "torn/$J: discarded a torn or junk tail of [0-9]* bytes" "$T/e" ||
  FAIL "tedges torn resume: no message naming the journal: $(cat "$T/e")"
cmp -s "$T/ref/results.canon.csv" "$T/torn/results.canon.csv" || FAIL "tedges torn resume: results differ from the reference"
# the byte count is the distance from the last complete record to the torn end, counted here independently
want=$(awk -v s=$((size - 50)) '/^#done/ { end = pos + length($0) + 1; if (end <= s) keep = end } { pos += length($0) + 1 } END { print s - keep }' "$T/ref/$J")
grep -q "tail of $want bytes" "$T/e" || FAIL "tedges torn resume: want $want bytes discarded: $(cat "$T/e")"
# junk appended to a complete journal: 2 lines, 21 bytes
mkdir "$T/junk"
cp "$T/ref/$J" "$T/junk/$J"
printf 'sjunk\tline\n#done 9 zz' >>"$T/junk/$J"
"$A" sweep --experiment smoke --variants fa2 --out "$T/junk" --resume >"$T/o" 2>"$T/e" || FAIL "tedges junk resume: exit $?"
grep -q "junk/$J: discarded a torn or junk tail of 21 bytes (2 lines)" "$T/e" ||
  FAIL "tedges junk resume: want 21 bytes, 2 lines: $(cat "$T/e")"
cmp -s "$T/ref/$J" "$T/junk/$J" || FAIL "tedges junk resume: the journal is not the complete one again"
# a clean resume says nothing of the kind
"$A" sweep --experiment smoke --variants fa2 --out "$T/junk" --resume >"$T/o" 2>"$T/e" || FAIL "tedges clean resume: exit $?"
[ -s "$T/e" ] && FAIL "tedges clean resume: wrote on stderr: $(cat "$T/e")"

# ---- memory and mpfr time are checked before any work ----
# A meminfo file of a machine with plenty of memory in total but little available (the test hook ATTNACC_MEMINFO).
printf 'MemTotal:       1073741824 kB\nMemFree:           1024 kB\nMemAvailable:   16777216 kB\n' >"$T/meminfo16g"
printf 'MemTotal:       1073741824 kB\nMemFree:           1024 kB\nMemAvailable:    1048576 kB\n' >"$T/meminfo1g"
printf 'MemTotal:       1073741824 kB\nMemFree:           1024 kB\nMemAvailable:       1024 kB\n' >"$T/meminfo1m"
ATTNACC_MEMINFO=$T/meminfo16g
export ATTNACC_MEMINFO
# n = 2^20, d = 128: q, k, v, dO alone are 4 GiB of doubles, the oracle's three copies of four outputs 12 GiB more
refused "sweep cell beyond memory" 2 "cell 0 (n = 1048576, d = 128) needs about [0-9.]* GiB (estimate), limit 16 GiB (MemAvailable)" \
  sweep --experiment table4 --variants fa2 --n 1048576 --out "$T/big"
[ -e "$T/big" ] && FAIL "tedges sweep cell beyond memory: created the folder"
# one smoke cell at n = 2^18 (d = 8) holds 4 * 2^21 doubles of inputs (64 MiB), so 1 GiB does not hold four at once
ATTNACC_MEMINFO=$T/meminfo1g
refused "sweep --jobs beyond memory" 2 "--jobs 4: 4 cells at once need up to .* GiB, 1 GiB available (MemAvailable): use fewer --jobs" \
  sweep --experiment smoke --variants fa2 --n 262144 --jobs 4 --out "$T/big"
[ -e "$T/big" ] && FAIL "tedges sweep --jobs beyond memory: created the folder"
# run compares with MemAvailable (1 MiB here), not MemTotal (1 TiB): n = 1024, d = 128 needs more than 1 MiB of inputs
ATTNACC_MEMINFO=$T/meminfo1m
refused "run beyond available memory" 2 "needs about .* MiB (estimate), limit 1 MiB (MemAvailable)" \
  run --variant fa2 --n 1024 --d 128
unset ATTNACC_MEMINFO
# the mpfr oracle: n = 16384, d = 128 is heads * n^2 * d = 2^35 exact products per pass: hours on any machine
refused "run mpfr beyond the limit" 2 "the mpfr oracle would take about .* (estimate; limit 60 minutes): use --oracle fast, a smaller problem, or --force" \
  run --variant fa2 --n 16384 --oracle mpfr --out "$T/mp.json"
[ -e "$T/mp.json" ] && FAIL "tedges run mpfr beyond the limit: wrote --out"
# score the same size: zero BF16 tensors [16384, 128] written by hand (10-byte prefix + 118-byte header)
mkdir "$T/big16k"
for f in q k v do o dq dk dv; do
  {
    printf '\223NUMPY\001\000v\000'
    printf "%-117s\n" "{'descr': '<u2', 'fortran_order': False, 'shape': (16384, 128), }"
    head -c $((16384 * 128 * 2)) /dev/zero
  } >"$T/big16k/$f.npy"
done
refused "score mpfr beyond the limit" 2 "the mpfr oracle would take about" \
  score --inputs "$T/big16k" --grads "$T/big16k" --oracle mpfr
refused "sweep mpfr beyond the limit" 2 "the mpfr oracle of 6 cells .* would take about .*: use --oracle fast, fewer or smaller cells, or --force" \
  sweep --experiment table4 --quick --variants fa2 --oracle mpfr --out "$T/mps"
[ -e "$T/mps" ] && FAIL "tedges sweep mpfr beyond the limit: created the folder"
# below the limit the estimate is printed and the run goes ahead
"$A" run --variant fa2 --n 32 --d 8 --oracle mpfr >/dev/null 2>"$T/e" || FAIL "tedges small mpfr run: exit $?: $(cat "$T/e")"
grep -q "^attnacc run: note: the mpfr oracle should take about .* (estimate)$" "$T/e" ||
  FAIL "tedges small mpfr run: no estimate on stderr: $(cat "$T/e")"

if [ $fails -ne 0 ]; then
  echo "tedges: $fails failure(s)"
  exit 1
fi
echo "tedges: ok"
