#!/bin/sh
# attnacc: out of space: the message names the file, run --save writes all of its files or none, a sweep's final write leaves no half set of result files (a small tmpfs as root; /dev/full).
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
A=${top_builddir:-.}/experiments/attnacc
[ -x "$A" ] || { echo "tnospace: $A not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tnospace.XXXXXX") || exit 1
FS=$T/fs
mounted=0
trap '[ $mounted -eq 1 ] && umount "$FS"; rm -rf "$T"' EXIT
fails=0
tested=0
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_WAIT_POLICY
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }

# one_message WHAT PATTERN: exactly one "attnacc CMD: " line on stderr, matching PATTERN
one_message() {
  [ "$(grep -c '^attnacc [a-z]*: ' "$T/e")" -eq 1 ] || FAIL "tnospace $1: not one message: $(cat "$T/e")"
  grep -q -- "$2" "$T/e" || FAIL "tnospace $1: message does not say '$2': $(cat "$T/e")"
}

# ---- a single file: /dev/full (written in place: a device is never replaced by a renamed temporary) ----
if [ -c /dev/full ] && [ -w /dev/full ]; then
  tested=1
  "$A" run --variant fa2 --n 16 --d 8 --out /dev/full >/dev/null 2>"$T/e"
  rc=$?
  [ $rc -eq 1 ] || FAIL "tnospace /dev/full: exit status $rc, want 1"
  one_message "/dev/full" "/dev/full: cannot write: No space left on device"
  [ -c /dev/full ] || FAIL "tnospace /dev/full: /dev/full is no longer a character device"
fi

# ---- a small tmpfs (root only) ----
if [ "$(id -u)" != 0 ] || ! mkdir "$FS" || ! mount -t tmpfs -o size=1m tmpfs "$FS" 2>/dev/null; then
  echo "tnospace: cannot mount a tmpfs (needs root): the out-of-space part is skipped"
  [ $tested -eq 1 ] || exit 77
  [ $fails -eq 0 ] && echo "tnospace: ok"
  [ $fails -eq 0 ]
  exit
fi
mounted=1
BS=$(stat -f -c '%S' "$FS")
pages() { echo $((($(wc -c <"$1") + BS - 1) / BS)); }
# fill the tmpfs so that ROOM blocks stay free
fill() {
  rm -f "$FS/fill"
  avail=$(stat -f -c '%a' "$FS")
  dd if=/dev/zero of="$FS/fill" bs="$BS" count=$((avail - $1)) 2>/dev/null
  [ "$(stat -f -c '%a' "$FS")" -eq "$1" ] || FAIL "tnospace fill: $(stat -f -c '%a' "$FS") blocks free, want $1"
}

# run --save: n = 256, d = 64 in BF16 makes every .npy 128 + 256*64*2 bytes; room for the four inputs, o and 4
# blocks more, so the second output cannot be written.
npy=$(((128 + 256 * 64 * 2 + BS - 1) / BS))
fill $((5 * npy + 4))
"$A" run --variant fa2 --n 256 --d 64 --save "$FS/save" >/dev/null 2>"$T/e"
rc=$?
[ $rc -eq 1 ] || FAIL "tnospace run --save: exit status $rc, want 1"
one_message "run --save" "$FS/save/d[qkv]\.npy: cannot write: No space left on device"
[ -e "$FS/save" ] && FAIL "tnospace run --save: left $(ls -A "$FS/save" | tr '\n' ' ')"
[ "$(ls -A "$FS")" = fill ] || FAIL "tnospace run --save: left in the file system: $(ls -A "$FS" | tr '\n' ' ')"
# into a folder that exists: it keeps what it had and nothing else
mkdir "$FS/keep"
echo mine >"$FS/keep/notes.txt"
fill $((5 * npy + 4))
"$A" run --variant fa2 --n 256 --d 64 --save "$FS/keep" --save-oracle "$FS/keep/oracle" >/dev/null 2>"$T/e"
[ $? -eq 1 ] || FAIL "tnospace run --save into a folder: exit status, want 1"
[ "$(ls -A "$FS/keep")" = notes.txt ] || FAIL "tnospace run --save into a folder: it holds $(ls -A "$FS/keep" | tr '\n' ' ')"
rm -rf "$FS/keep"

# sweep: a complete journal, resumed into a folder with room for meta.json, results.csv and results.canon.csv
# but not results.jsonl: the final write fails and none of the four appears.
"$A" sweep --experiment smoke --variants fa2 --out "$T/ref" --cache none >/dev/null 2>"$T/e" ||
  FAIL "tnospace ref sweep: $(cat "$T/e")"
mkdir "$FS/s"
cp "$T/ref/journal-0-of-1.txt" "$FS/s/"
fill $(($(pages "$T/ref/meta.json") + $(pages "$T/ref/results.csv") + $(pages "$T/ref/results.canon.csv")))
"$A" sweep --experiment smoke --variants fa2 --out "$FS/s" --cache none --resume >/dev/null 2>"$T/e"
rc=$?
[ $rc -eq 1 ] || FAIL "tnospace sweep final write: exit status $rc, want 1"
one_message "sweep final write" "$FS/s/results\.jsonl: cannot write: No space left on device"
[ "$(ls -A "$FS/s")" = journal-0-of-1.txt ] || FAIL "tnospace sweep final write: the folder holds $(ls -A "$FS/s" | tr '\n' ' ')"
# with room again, the same command completes the folder
rm -f "$FS/fill"
"$A" sweep --experiment smoke --variants fa2 --out "$FS/s" --cache none --resume >/dev/null 2>"$T/e" ||
  FAIL "tnospace sweep after freeing space: $(cat "$T/e")"
cmp -s "$T/ref/results.canon.csv" "$FS/s/results.canon.csv" || FAIL "tnospace sweep after freeing space: results differ"
rm -rf "$FS/s"

# the journal: three cells in it, no block free (meta.json is written only after the cells), and less room than a
# record left in the journal's last block, so appending the fourth cell fails
mkdir "$FS/j"
"$A" sweep --experiment smoke --variants fa2 --out "$FS/j" --cache none --max-cells 3 >/dev/null 2>"$T/e" ||
  FAIL "tnospace journal: first three cells: $(cat "$T/e")"
cp "$FS/j/journal-0-of-1.txt" "$T/j3"
rm -f "$FS/j/meta.json"
jsize=$(wc -c <"$T/j3")
if [ $((BS - jsize % BS)) -lt $((jsize / 4)) ]; then # a record is about a third of three cells' journal
  fill 0
  "$A" sweep --experiment smoke --variants fa2 --out "$FS/j" --cache none --resume >/dev/null 2>"$T/e"
  rc=$?
  [ $rc -eq 1 ] || FAIL "tnospace journal: exit status $rc, want 1"
  one_message "journal append" "$FS/j/journal-0-of-1.txt: cannot append a finished cell: No space left on device"
  cmp -s "$T/j3" "$FS/j/journal-0-of-1.txt" || FAIL "tnospace journal: the partial record was not cut off again"
  [ "$(ls -A "$FS/j")" = journal-0-of-1.txt ] || FAIL "tnospace journal: the folder holds $(ls -A "$FS/j" | tr '\n' ' ')"
  rm -f "$FS/fill"
  "$A" sweep --experiment smoke --variants fa2 --out "$FS/j" --cache none --resume >/dev/null 2>"$T/e" ||
    FAIL "tnospace journal after freeing space: $(cat "$T/e")"
  [ -s "$T/e" ] && FAIL "tnospace journal after freeing space: a message: $(cat "$T/e")"
  cmp -s "$T/ref/results.canon.csv" "$FS/j/results.canon.csv" || FAIL "tnospace journal after freeing space: results differ"
else
  echo "tnospace: the journal's last block has room for another record: journal part skipped"
fi
rm -rf "$FS/j"

# merge: room for results.csv and results.canon.csv only
fill $(($(pages "$T/ref/results.csv") + $(pages "$T/ref/results.canon.csv")))
"$A" sweep --merge --out "$FS/m" "$T/ref" >/dev/null 2>"$T/e"
rc=$?
[ $rc -eq 1 ] || FAIL "tnospace merge final write: exit status $rc, want 1"
one_message "merge final write" "$FS/m/results\.jsonl: cannot write: No space left on device"
[ -z "$(ls -A "$FS/m" 2>/dev/null)" ] || FAIL "tnospace merge final write: the folder holds $(ls -A "$FS/m" | tr '\n' ' ')"

if [ $fails -ne 0 ]; then
  echo "tnospace: $fails failure(s)"
  exit 1
fi
echo "tnospace: ok"
