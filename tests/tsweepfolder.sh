#!/bin/sh
# attnacc: the sweep folder: no temporaries left after a kill and a resume, a refused shard creates nothing, a busy folder exits 2, a symlinked journal is refused and its target untouched.
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
A=${top_builddir:-.}/experiments/attnacc
[ -x "$A" ] || { echo "tsweepfolder: $A not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tsweepfolder.XXXXXX") || exit 1
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$T"' EXIT
fails=0
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_WAIT_POLICY
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }
# The hidden experiment `smoke` (12 cells; tsweepcmd.sh): small enough to run whole in a second.
V=fa2,naive-bf16
sweep() { "$A" sweep --experiment smoke --variants $V "$@"; }
# temporaries DIR: the aa_ofile_t temporaries (NAME.tmp.PID.N) in DIR
temporaries() { ls -A "$1" | grep '\.tmp\.[0-9]*\.[0-9]*$'; }
# start_slow DIR: a sweep into DIR in the background (0.4 s per cell), returned once it has finished a cell
start_slow() {
  ATTNACC_SWEEP_CELL_DELAY_MS=400 "$A" sweep --experiment smoke --variants $V --out "$1" >/dev/null 2>&1 &
  pid=$!
  i=0
  while [ $i -lt 300 ] && ! grep -q '^#done' "$1/journal-0-of-1.txt" 2>/dev/null; do
    sleep 0.1
    i=$((i + 1))
  done
  grep -q '^#done' "$1/journal-0-of-1.txt" 2>/dev/null || FAIL "tsweepfolder: no finished cell in $1 after 30 s"
}
stop_slow() {
  kill -9 $pid 2>/dev/null
  wait $pid 2>/dev/null
  pid=
}

# ---- a second run on a busy folder exits 2, and leaves nothing of its own ----
start_slow "$T/b"
sweep --out "$T/b" --resume >/dev/null 2>"$T/e"
rc=$?
[ $rc -eq 2 ] || FAIL "tsweepfolder busy: exit status $rc, want 2 ($(cat "$T/e"))"
grep -q "in use by another sweep run" "$T/e" || FAIL "tsweepfolder busy: message: $(cat "$T/e")"
grep -q -- "add --resume" "$T/e" && FAIL "tsweepfolder busy: suggests --resume, which was given: $(cat "$T/e")"
# without --resume too: the busy folder is what it says first, not its finished cells
sweep --out "$T/b" >/dev/null 2>"$T/e"
rc=$?
[ $rc -eq 2 ] || FAIL "tsweepfolder busy, no --resume: exit status $rc, want 2 ($(cat "$T/e"))"
grep -q "in use by another sweep run" "$T/e" || FAIL "tsweepfolder busy, no --resume: message: $(cat "$T/e")"

# ---- SIGKILL leaves a temporary (meta.json is staged while the cells run); the next run removes it ----
stop_slow
[ -n "$(temporaries "$T/b")" ] || echo "tsweepfolder: the killed run left no temporary (nothing to clean)"
# a run refused for the folder's finished cells still cleans, and creates nothing
sweep --out "$T/b" >/dev/null 2>&1
[ $? -eq 2 ] || FAIL "tsweepfolder kill: a second run without --resume must exit 2"
t=$(temporaries "$T/b")
[ -z "$t" ] || FAIL "tsweepfolder kill: a run after the kill left temporaries: $t"
sweep --out "$T/b" --resume >"$T/o" 2>&1 || FAIL "tsweepfolder resume: exit $? ($(cat "$T/o"))"
t=$(temporaries "$T/b")
[ -z "$t" ] || FAIL "tsweepfolder resume: temporaries left after --resume: $t"
[ -s "$T/b/results.canon.csv" ] || FAIL "tsweepfolder resume: no results.canon.csv"
# a killed run's temporary planted by hand (a pid that is no process) goes too
: >"$T/b/results.csv.tmp.999999999.0"
: >"$T/b/oracle-cache/0123456789abcdef0123456789abcdef.aaoc.tmp.999999999.0"
sweep --out "$T/b" --resume >/dev/null 2>&1 || FAIL "tsweepfolder resume of a complete folder: exit $?"
t=$(temporaries "$T/b")$(temporaries "$T/b/oracle-cache")
[ -z "$t" ] || FAIL "tsweepfolder resume: a planted temporary stays: $t"

# ---- a refused shard creates nothing ----
ls -A "$T/b" >"$T/before"
sweep --out "$T/b" --shard 0/2 >/dev/null 2>"$T/e"
[ $? -eq 2 ] || FAIL "tsweepfolder shard: --shard 0/2 into a folder with its finished cells, no --resume: want exit 2"
"$A" sweep --experiment smoke --variants fa2 --out "$T/b" --shard 0/2 --resume >/dev/null 2>>"$T/e"
[ $? -eq 2 ] || FAIL "tsweepfolder shard: --shard 0/2 of another grid: want exit 2"
ls -A "$T/b" >"$T/after"
cmp -s "$T/before" "$T/after" || FAIL "tsweepfolder shard: refused runs changed the folder: $(diff "$T/before" "$T/after" | tr '\n' ' ')"
[ -e "$T/b/journal-0-of-2.txt" ] && FAIL "tsweepfolder shard: a refused --shard 0/2 created journal-0-of-2.txt"

# ---- a journal that is a symbolic link is refused; its target is not written ----
mkdir "$T/l"
cp "$T/b/journal-0-of-1.txt" "$T/target"
head -c 200 "$T/b/journal-0-of-1.txt" >"$T/target" # a header and a torn start: resume would append
cp "$T/target" "$T/target.orig"
ln -s "$T/target" "$T/l/journal-0-of-1.txt"
sweep --out "$T/l" --resume >/dev/null 2>"$T/e"
rc=$?
[ $rc -eq 2 ] || FAIL "tsweepfolder symlink: exit status $rc, want 2 ($(cat "$T/e"))"
grep -q "symbolic link" "$T/e" || FAIL "tsweepfolder symlink: the message does not say so: $(cat "$T/e")"
cmp -s "$T/target" "$T/target.orig" || FAIL "tsweepfolder symlink: the link's target was written"

[ $fails -eq 0 ] && echo "tsweepfolder: ok"
[ $fails -eq 0 ]
