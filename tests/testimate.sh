#!/bin/sh
# attnacc: the command's up-front resource estimate: run, score and sweep refuse problems over --max-memory / --max-seconds (defaults included) at once, with a message naming the estimate and the limit.
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
A=${top_builddir:-.}/experiments/attnacc
[ -x "$A" ] || { echo "testimate: $A not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/testimate.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }

# refused WHAT PATTERN ARGS...: exit status 2 within seconds (timeout: the problem was started instead of
# refused), a message naming the estimate, the limit and PATTERN.
refused() {
  what=$1
  pat=$2
  shift 2
  timeout 60 "$A" "$@" >"$T/stdout" 2>"$T/stderr"
  rc=$?
  [ $rc -eq 2 ] || FAIL "testimate $what: exit status $rc, want 2 (args: $*): $(head -c 300 "$T/stderr")"
  for w in estimate limit "$pat"; do
    grep -q -- "$w" "$T/stderr" || FAIL "testimate $what: message does not say '$w': $(cat "$T/stderr")"
  done
}

# The issue's case: d = 100000 at the default n = 1024 is about 27 GiB and half an hour of one core, and
# with n = 65536 over a terabyte: the default memory limit (3/4 of physical memory) refuses it.
refused "run d 100000, default memory limit" "GiB" run --variant fa2 --n 65536 --d 100000
# Explicit limits, both ways.
refused "run --max-memory" "--max-memory" run --variant fa2 --n 4096 --max-memory 1M
refused "run --max-seconds" "--max-seconds" run --variant fa2 --n 4096 --threads 1 --max-seconds 1
# The default time limit (an hour) with no option given: n = 262144, d = 32 holds about 2.4 GB but is
# heads * n^2 = 2^36 (query, key) pairs for the oracle and each of two pipelines, about 4.8 hours on one thread
# (lib/problem/estimate.c: some 250 ns per pair in all at d = 32).
refused "run default time limit" "hours" run --variant fa2 --n 262144 --d 32 --threads 1
timeout 60 "$A" run --variant fa2 --max-memory 12Q >/dev/null 2>"$T/e"
rc=$?
[ $rc -eq 2 ] && grep -q -- "--max-memory: '12Q'" "$T/e" || FAIL "testimate --max-memory 12Q: exit $rc: $(cat "$T/e")"
# score: the sizes of the given files, before they are converted.
timeout 60 "$A" run --variant fa2 --n 48 --d 16 --save "$T/s" >/dev/null 2>"$T/e" || FAIL "testimate --save: $(cat "$T/e")"
refused "score --max-memory" "--max-memory" score --inputs "$T/s" --grads "$T/s" --max-memory 4K
timeout 60 "$A" score --inputs "$T/s" --grads "$T/s" --max-memory 1G --max-seconds 600 >/dev/null 2>"$T/e" ||
  FAIL "testimate score within the limits: $(cat "$T/e")"
timeout 60 "$A" run --variant fa2 --n 64 --d 16 --max-memory 64M --max-seconds 60 >/dev/null 2>"$T/e" ||
  FAIL "testimate run within the limits: $(cat "$T/e")"
# sweep: the largest and the slowest cell, before the result folder is made.
refused "sweep --max-memory" "--max-memory" sweep --experiment table4 --quick --out "$T/sw" --max-memory 1K
refused "sweep --max-seconds" "--max-seconds" sweep --experiment table4 --quick --out "$T/sw" --threads 1 --max-seconds 1
[ -e "$T/sw" ] && FAIL "testimate sweep: made the folder of a refused sweep"
for c in run score sweep; do
  "$A" $c --help >"$T/h" 2>&1
  for o in --max-memory --max-seconds; do grep -q -- "$o" "$T/h" || FAIL "testimate $c --help: no $o"; done
done

[ $fails -eq 0 ] || exit 1
echo "testimate: ok"
