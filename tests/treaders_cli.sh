#!/bin/sh
# attnacc: `attnacc score` on each crafted file of tests/treaders --write: exit 2, one line naming the file, no --out file.
# SPDX-License-Identifier: LGPL-3.0-or-later
top_builddir=${top_builddir:-.}
A="$top_builddir/experiments/attnacc"
T=$(mktemp -d "${TMPDIR:-/tmp}/treaders_cli.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }
mkdir "$T/in" && "$top_builddir/tests/treaders" --write "$T/in" || { echo "FAIL treaders_cli: cannot write the files"; exit 1; }
n=0
for f in "$T"/in/*.safetensors "$T"/in/*.npz; do
  [ -e "$f" ] || continue
  case $f in */ok-*) continue ;; esac
  n=$((n + 1))
  "$A" score --inputs "$f" --grads "$f" --layout nd --out "$T/out.json" >"$T/out" 2>"$T/err"
  rc=$?
  [ $rc -eq 2 ] || FAIL "treaders_cli $(basename "$f"): exit $rc (want 2): $(cat "$T/err")"
  [ "$(wc -l <"$T/err")" -eq 1 ] || FAIL "treaders_cli $(basename "$f"): not one line: $(cat "$T/err")"
  grep -qF "$f" "$T/err" || FAIL "treaders_cli $(basename "$f"): the file is not named: $(cat "$T/err")"
  [ ! -e "$T/out.json" ] || FAIL "treaders_cli $(basename "$f"): --out was written"
  [ -z "$(ls "$T" | grep -v '^in$\|^out$\|^err$')" ] || FAIL "treaders_cli $(basename "$f"): left $(ls "$T")"
done
[ $n -ge 20 ] || FAIL "treaders_cli: only $n crafted files"
[ $fails -eq 0 ] || { echo "treaders_cli: $fails failure(s)"; exit 1; }
echo "treaders_cli: ok ($n files)"
