#!/bin/sh
# attnacc: guard of the contributors' recipes (HACKING.md): what a step writes is also registered where the build, the command or the tarball looks.
# SPDX-License-Identifier: LGPL-3.0-or-later
# Checks 1-5 are steps of HACKING.md that, when forgotten, break nothing at build time; 6 is a rule of its map:
#  1. a command declared in experiments/commands.h is a row of aa_commands[] (experiments/attnacc.c) and answers
#     `attnacc NAME --help`;
#  2. an experiment defined in experiments/xp/ (const xp_experiment_t xp_X) is in xp_experiments[]
#     (experiments/xp/registry.c) and answers `attnacc sweep --experiment NAME --help`;
#  3. every source of the command (experiments/{cli,cmd,xp,report}) and of the library (lib/) is named in an
#     automake input (else it is not built, or not in the tarball);
#  4. every shell test tests/t*.sh is in TESTS and EXTRA_DIST, and every test program (a tests/t*.c or .cpp with
#     main) is built as one (check_PROGRAMS or EXTRA_PROGRAMS);
#  5. every file that fixtures/MANIFEST lists exists and is in EXTRA_DIST;
#  6. the oracle includes no header of the emulation, directly or through other headers;
#  7. every data file and script of the GPU runs (fixtures/h200-*/) is in EXTRA_DIST, itself or a folder above it:
#     the readings a model or a test was built from ship with it.
set -u
A=${top_builddir:-.}/experiments/attnacc
S=${top_srcdir:-.}
[ -x "$A" ] || { echo "tregistered: $A not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tregistered.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }

# "VAR WORD" for every word assigned to a make variable in the automake inputs.
sh "$S/tests/mkwords.sh" "$S" >"$T/mk"
[ -s "$T/mk" ] || { echo "tregistered: cannot read the automake inputs under $S"; exit 1; }
inmk() { awk -v v="$1" -v w="$2" '($1 == v || v == "*") && $2 == w { f = 1 } END { exit !f }' "$T/mk"; }

# 1
"$A" --help >"$T/help" 2>&1 || FAIL "tregistered: attnacc --help failed"
for c in $(sed -n 's/^int aa_cmd_\([a-z0-9_]*\)(int argc, char \*\*argv);.*/\1/p' "$S/experiments/commands.h"); do
  name=$(sed -n "s/^ *{\"\\([a-z0-9-]*\\)\", aa_cmd_$c,.*/\\1/p" "$S/experiments/attnacc.c")
  if [ -z "$name" ]; then
    FAIL "tregistered: aa_cmd_$c (experiments/commands.h) has no row in aa_commands[] (experiments/attnacc.c)"
    continue
  fi
  grep -q "^  $name " "$T/help" || FAIL "tregistered: attnacc --help does not list command $name"
  "$A" "$name" --help >"$T/out" 2>&1 || FAIL "tregistered: attnacc $name --help failed: $(tail -n 1 "$T/out")"
done

# 2
sed -n '/^const xp_experiment_t \*const xp_experiments\[\] = {/,/};/p' "$S/experiments/xp/registry.c" >"$T/reg"
for f in "$S"/experiments/xp/*.c; do
  for x in $(sed -n 's/^const xp_experiment_t \(xp_[a-z0-9_]*\) = {.*/\1/p' "$f"); do
    grep -q "&$x\\b" "$T/reg" ||
      FAIL "tregistered: $x (${f#"$S"/}) is not in xp_experiments[] (experiments/xp/registry.c)"
    name=$(awk -v x="$x" '$0 ~ "^const xp_experiment_t " x " = {" { on = 1 }
      on && /\.name = "/ { sub(/.*\.name = "/, ""); sub(/".*/, ""); print; exit }' "$f")
    [ -n "$name" ] || { FAIL "tregistered: $x (${f#"$S"/}) has no .name"; continue; }
    "$A" sweep --experiment "$name" --help >"$T/out" 2>&1 ||
      FAIL "tregistered: attnacc sweep --experiment $name --help failed: $(tail -n 1 "$T/out")"
  done
done

# 3
for f in "$S"/experiments/cli/* "$S"/experiments/cmd/* "$S"/experiments/xp/* "$S"/experiments/report/* \
  "$S"/lib/*.h "$S"/lib/*/*.c "$S"/lib/*/*.h; do
  rel=${f#"$S"/}
  case $rel in lib/recipe/presets-text.c) continue ;; esac # generated from the preset files (nodist)
  case $rel in *.c | *.h) inmk '*' "$rel" || FAIL "tregistered: $rel is named in no automake input (sources or EXTRA_DIST)" ;; esac
done

# 4
for f in "$S"/tests/t*.sh; do
  rel=${f#"$S"/}
  inmk TESTS "$rel" || FAIL "tregistered: $rel is not in TESTS: make check never runs it"
  inmk EXTRA_DIST "$rel" || FAIL "tregistered: $rel is not in EXTRA_DIST: not in the tarball"
done
for f in "$S"/tests/t*.c "$S"/tests/t*.cpp; do
  [ -f "$f" ] || continue
  grep -q '^int main(' "$f" || continue # a helper included or linked by a test
  rel=${f#"$S"/}
  p=${rel%.*}
  inmk check_PROGRAMS "$p" || inmk EXTRA_PROGRAMS "$p" ||
    FAIL "tregistered: $rel has a main but $p is in no check_PROGRAMS or EXTRA_PROGRAMS: never built"
done

# 5
awk '!/^#/ && NF { print $1 }' "$S/fixtures/MANIFEST" >"$T/manifest"
while read -r f; do
  [ -f "$S/fixtures/$f" ] || FAIL "tregistered: fixtures/MANIFEST lists fixtures/$f, which does not exist"
  inmk EXTRA_DIST "fixtures/$f" || FAIL "tregistered: fixtures/$f (in fixtures/MANIFEST) is not in EXTRA_DIST"
done <"$T/manifest"

# 6. The oracle stays an independent witness (HACKING.md, "The arrows"): no header that lib/oracle.h or
#    lib/oracle/ includes, directly or through other headers, is a header of the emulation (recipe, attn, gemm,
#    exp, reduce, dropout). Quoted includes are looked up beside the including file, then in lib/.
printf '%s\n' "$S"/lib/oracle.h "$S"/lib/oracle/*.c "$S"/lib/oracle/*.h >"$T/todo"
: >"$T/seen"
while [ -s "$T/todo" ]; do
  f=$(head -n 1 "$T/todo")
  tail -n +2 "$T/todo" >"$T/todo2" && mv "$T/todo2" "$T/todo"
  grep -qx "$f" "$T/seen" && continue
  echo "$f" >>"$T/seen"
  for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
    case ${inc##*/} in
    recipe.h | recipe-impl.h | attn.h | attn-impl.h | gemm.h | gemm-impl.h | tc-impl.h | exp.h | exp-impl.h | \
      reduce.h | reduce-impl.h | dropout.h | dropout-impl.h)
      FAIL "tregistered: the oracle reaches emulation code: ${f#"$S"/} includes \"$inc\"" ;;
    esac
    for cand in "${f%/*}/$inc" "$S/lib/$inc"; do
      [ -f "$cand" ] && { echo "$cand" >>"$T/todo"; break; }
    done
  done
done

# 7
for f in "$S"/fixtures/h200-*/* "$S"/fixtures/h200-*/*/*; do
  [ -f "$f" ] || continue
  rel=${f#"$S"/}
  case $rel in *.c | *.cu | *.h | *.py | *.sh | *.json | *.npz | *.npy | *.tsv | *.txt | *.csv | *.recipe) ;; *) continue ;; esac
  d=$rel
  while ! inmk '*' "$d"; do
    d=${d%/*}
    [ "$d" = fixtures ] && { FAIL "tregistered: $rel is not in EXTRA_DIST: not in the tarball"; break; }
  done
done

[ $fails -eq 0 ] || { echo "tregistered: $fails failure(s)"; exit 1; }
echo "tregistered: ok"
