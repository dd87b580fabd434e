#!/bin/sh
# attnacc: lost or wrong signals of the command: failed stdout writes exit non-zero, score's --out and --save-oracle are one file set, no --allow-nan, messages escape file bytes.
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
A=${top_builddir:-.}/experiments/attnacc
[ -x "$A" ] || { echo "tsignals: $A not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tsignals.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_WAIT_POLICY
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }
ESC=$(printf '\033')

# one_line WHAT PATTERN: stderr is exactly one line, an "attnacc CMD: " message matching PATTERN
one_line() {
  [ "$(wc -l <"$T/e")" -eq 1 ] || FAIL "tsignals $1: not one line on stderr: $(cat -v "$T/e")"
  grep -q "^attnacc [a-z-]*: " "$T/e" || FAIL "tsignals $1: no 'attnacc CMD:' message: $(cat -v "$T/e")"
  grep -q -- "$2" "$T/e" || FAIL "tsignals $1: message does not say '$2': $(cat -v "$T/e")"
}

# ---- a failed write to stdout is an error (/dev/full: every write fails with ENOSPC) ----
"$A" run --variant fa2 --n 16 --d 8 --save "$T/in" >/dev/null 2>"$T/e" || FAIL "tsignals setup: run --save: $(cat -v "$T/e")"
if [ -c /dev/full ] && [ -w /dev/full ]; then
  for c in "run --variant fa2 --n 16 --d 8 --json" "run --variant fa2 --n 16 --d 8" \
    "score --inputs $T/in --grads $T/in --json" "score --inputs $T/in --grads $T/in" "list" "--help" "--version" \
    "run --help"; do
    # shellcheck disable=SC2086 # the words of c are the arguments
    "$A" $c >/dev/full 2>"$T/e"
    rc=$?
    [ $rc -ne 0 ] || FAIL "tsignals stdout: 'attnacc $c > /dev/full' exits 0"
    grep -q "standard output" "$T/e" || FAIL "tsignals stdout: 'attnacc $c > /dev/full' says nothing about it: $(cat -v "$T/e")"
  done
  # the documented statuses of a failed write: run 1, score 2
  "$A" run --variant fa2 --n 16 --d 8 --json >/dev/full 2>/dev/null
  rc=$?
  [ $rc -eq 1 ] || FAIL "tsignals stdout: run --json > /dev/full: exit status $rc, want 1"
  "$A" score --inputs "$T/in" --grads "$T/in" --json >/dev/full 2>/dev/null
  rc=$?
  [ $rc -eq 2 ] || FAIL "tsignals stdout: score --json > /dev/full: exit status $rc, want 2"
else
  echo "tsignals: no writable /dev/full: the stdout part is skipped"
fi

# ---- score --out and --save-oracle are one file set ----
# D/dv.npy is a folder: the oracle's dv cannot be put in place, and then the report must not appear either.
mkdir -p "$T/D/dv.npy/x"
"$A" score --inputs "$T/in" --grads "$T/in" --out "$T/F.json" --save-oracle "$T/D" >/dev/null 2>"$T/e"
rc=$?
[ $rc -eq 2 ] || FAIL "tsignals fileset: exit status $rc, want 2"
one_line "fileset" "dv.npy"
[ -e "$T/F.json" ] && FAIL "tsignals fileset: --out left $T/F.json although --save-oracle failed"
ls "$T/D" | grep -q '\.tmp\.' && FAIL "tsignals fileset: temporaries left in --save-oracle: $(ls "$T/D")"
# both given and writable: both appear
"$A" score --inputs "$T/in" --grads "$T/in" --out "$T/G.json" --save-oracle "$T/E" >/dev/null 2>"$T/e" ||
  FAIL "tsignals fileset: score --out --save-oracle: exit $? ($(cat -v "$T/e"))"
for f in G.json E/o.npy E/lse.npy E/dq.npy E/dk.npy E/dv.npy; do
  [ -s "$T/$f" ] || FAIL "tsignals fileset: $f not written"
done

# ---- --allow-nan: offered nowhere (the oracle refuses non-finite inputs) ----
mkdir -p "$T/nan"
cp "$T/in/q.npy" "$T/in/k.npy" "$T/in/v.npy" "$T/in/do.npy" "$T/nan/"
# the first BF16 value of q becomes a quiet NaN (0x7fc0, little endian); the v1.0 header is 128 bytes here
hl=$(od -An -tu2 -j8 -N2 "$T/in/q.npy" | tr -d ' ')
printf '\300\177' | dd of="$T/nan/q.npy" bs=1 seek=$((10 + hl)) conv=notrunc 2>/dev/null
for c in run score; do
  "$A" $c --help >"$T/h" 2>&1
  grep -q -- "allow-nan" "$T/h" && FAIL "tsignals allow-nan: $c --help offers --allow-nan"
done
"$A" run --variant fa2 --inputs "$T/nan" >/dev/null 2>"$T/e"
rc=$?
[ $rc -eq 2 ] || FAIL "tsignals allow-nan: run on a NaN input: exit status $rc, want 2"
one_line "allow-nan run" "q holds 1 NaN"
grep -q -- "allow-nan" "$T/e" && FAIL "tsignals allow-nan: the message offers --allow-nan: $(cat -v "$T/e")"
"$A" score --inputs "$T/nan" --grads "$T/in" >/dev/null 2>"$T/e"
[ $? -eq 2 ] || FAIL "tsignals allow-nan: score on a NaN input: want exit 2"
grep -q -- "allow-nan" "$T/e" && FAIL "tsignals allow-nan: score's message offers --allow-nan: $(cat -v "$T/e")"
for c in "run --variant fa2" "score --grads $T/in"; do
  # shellcheck disable=SC2086
  "$A" $c --inputs "$T/nan" --allow-nan >/dev/null 2>"$T/e"
  [ $? -eq 2 ] || FAIL "tsignals allow-nan: '$c --allow-nan' on a NaN input: want exit 2"
  grep -q "oracle: oracle:" "$T/e" && FAIL "tsignals allow-nan: doubled prefix: $(cat -v "$T/e")"
done

# ---- messages escape the bytes they quote from files ----
printf '0 8 x\n' >"$T/cu.txt"
"$A" run --variant fa2 --cu-seqlens "$T/cu.txt" --d 8 >/dev/null 2>"$T/e"
[ $? -eq 2 ] || FAIL "tsignals cu-seqlens: want exit 2"
one_line "cu-seqlens" "'x' is not an integer"
printf '0 8\033[31m 16\n' >"$T/cu2.txt"
"$A" run --variant fa2 --cu-seqlens "$T/cu2.txt" --d 8 >/dev/null 2>"$T/e"
one_line "cu-seqlens escape" "'8\\\\x1b\[31m' is not an integer"
grep -q "$ESC" "$T/e" && FAIL "tsignals cu-seqlens escape: a raw ESC byte reached stderr"
# a recipe key (lib/recipe's message) and an .npy dtype (lib/tensor's) with an ESC byte and a byte >= 0x80
printf 'bad\033[2Jkey\377 = 1\n' >"$T/r.txt"
"$A" run --recipe "$T/r.txt" --n 16 --d 8 >/dev/null 2>"$T/e"
[ $? -eq 2 ] || FAIL "tsignals recipe: want exit 2"
one_line "recipe key" "bad\\\\x1b\[2Jkey\\\\xff"
grep -q "$ESC" "$T/e" && FAIL "tsignals recipe: a raw ESC byte reached stderr"
mkdir -p "$T/esc"
cp "$T/in/k.npy" "$T/in/v.npy" "$T/in/do.npy" "$T/esc/"
{
  printf '\223NUMPY\001\000v\000'
  printf "{'descr': '<\033]0;x\007', 'fortran_order': False, 'shape': (1, 16, 8), }" >"$T/hdr"
  cat "$T/hdr"
  head -c $((117 - $(wc -c <"$T/hdr"))) /dev/zero | tr '\0' ' '
  printf '\n'
  head -c 256 /dev/zero
} >"$T/esc/q.npy"
"$A" run --variant fa2 --inputs "$T/esc" >/dev/null 2>"$T/e"
[ $? -eq 2 ] || FAIL "tsignals npy: want exit 2"
one_line "npy dtype" "<\\\\x1b]0;x\\\\x07"
grep -q "$ESC" "$T/e" && FAIL "tsignals npy: a raw ESC byte reached stderr"

[ $fails -eq 0 ] && echo "tsignals: ok"
[ $fails -eq 0 ]
