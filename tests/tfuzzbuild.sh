#!/bin/sh
# attnacc: the README's fuzzing build works as written: CC=clang-14 ./configure --enable-fuzzing builds the C++ test and the harnesses, and each harness runs (expensive: ATTNACC_CHECK_EXPENSIVE=1).
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
S=${top_srcdir:-.}
[ -n "${ATTNACC_CHECK_EXPENSIVE:-}" ] || { echo "tfuzzbuild: set ATTNACC_CHECK_EXPENSIVE=1 (a second build, minutes)"; exit 77; }
for p in clang-14 clang++-14 autoreconf git; do
  command -v $p >/dev/null 2>&1 || { echo "tfuzzbuild: $p not found"; exit 77; }
done
git -C "$S" rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "tfuzzbuild: $S is not a git checkout"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tfuzzbuild.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }

# A clean copy of the tracked files as they are now (a configured source
# tree refuses a second build folder).
mkdir "$T/src"
git -C "$S" ls-files -z | tar -C "$S" --null -T - -cf - | tar -C "$T/src" -xf - || FAIL "tfuzzbuild: copy"
cd "$T/src" || exit 1
autoreconf -fi >"$T/autoreconf.log" 2>&1 || FAIL "tfuzzbuild: autoreconf: $(tail -5 "$T/autoreconf.log")"
# exactly the README's words: CC alone, no CXX
env -u CXX CC=clang-14 ./configure --enable-fuzzing >"$T/configure.log" 2>&1 ||
  FAIL "tfuzzbuild: CC=clang-14 ./configure --enable-fuzzing: $(tail -5 "$T/configure.log")"
grep -q '^CXX = clang++-14$' Makefile || FAIL "tfuzzbuild: configure chose $(grep '^CXX =' Makefile) for CC=clang-14"
# `make fuzz` right after configure (generated headers first), each harness for 3 s
make fuzz FUZZ_SECONDS=3 >"$T/fuzz.log" 2>&1 || FAIL "tfuzzbuild: make fuzz: $(grep -m 5 -i 'error' "$T/fuzz.log")"
grep -q "fuzz: 5 passed, 0 failed" "$T/fuzz.log" || FAIL "tfuzzbuild: make fuzz: $(tail -3 "$T/fuzz.log")"
# make check's build of every test program, and the C++ test (g++ refused -fsanitize=fuzzer-no-link there)
make -j2 check TESTS=tests/tpcg_cross >"$T/check.log" 2>&1 ||
  FAIL "tfuzzbuild: make check: $(grep -m 5 -i 'error' "$T/check.log")"
grep -q "^PASS: tests/tpcg_cross" "$T/check.log" || FAIL "tfuzzbuild: tests/tpcg_cross did not pass under the sanitizers"

[ $fails -eq 0 ] && echo "tfuzzbuild: ok"
[ $fails -eq 0 ]
