#!/bin/sh
# attnacc: guard of the preset recipe: every preset file is listed in AA_PRESET_FILES, compiled in, and stored; every other recipe file ships and loads.
# SPDX-License-Identifier: LGPL-3.0-or-later
# A preset is a file lib/recipe/presets/NAME.recipe that the build turns into text (presets-gen.awk) only when
# lib/recipe/local.mk names it in AA_PRESET_FILES: a file left out of that list is silently not compiled, and
# tests/tpresets (which loops over the compiled presets) cannot see it. HACKING.md, "Add a preset".
#  1. the files in lib/recipe/presets/ are the files in AA_PRESET_FILES, no more and no fewer;
#  2. `attnacc list` shows each under its file's name, and `attnacc list --recipe NAME` is that file, byte for byte;
#  3. tests/data/presets (tpresets' stored canonical texts) holds no copy of a preset that is not compiled in;
#  4. every other recipe file (recipes/) is in the tarball (EXTRA_DIST) and is accepted by `attnacc run --recipe`.
set -u
A=${top_builddir:-.}/experiments/attnacc
S=${top_srcdir:-.}
[ -x "$A" ] || { echo "tpreset_files: $A not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tpreset_files.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }

# The words assigned to the make variable $1 in the automake inputs, one a line.
sh "$S/tests/mkwords.sh" "$S" >"$T/mk"
[ -s "$T/mk" ] || { echo "tpreset_files: cannot read the automake inputs under $S"; exit 1; }
mkvar() { awk -v v="$1" '$1 == v { print $2 }' "$T/mk"; }

mkvar AA_PRESET_FILES >"$T/listed"
[ -s "$T/listed" ] || FAIL "tpreset_files: no AA_PRESET_FILES in lib/recipe/local.mk"
"$A" list >"$T/list" 2>&1 || FAIL "tpreset_files: attnacc list failed: $(tail -n 1 "$T/list")"
# the names under "recipes (...):", up to the blank line
sed -n '/^recipes/,/^$/p' "$T/list" | awk 'NR > 1 && NF { print $1 }' >"$T/compiled"

# 1 and 2
for f in "$S"/lib/recipe/presets/*.recipe; do
  [ -f "$f" ] || continue
  rel=lib/recipe/presets/${f##*/}
  name=${f##*/}
  name=${name%.recipe}
  grep -qx "$rel" "$T/listed" ||
    FAIL "tpreset_files: $rel is not in AA_PRESET_FILES (lib/recipe/local.mk), so preset $name is silently not compiled"
  if grep -qx "$name" "$T/compiled"; then
    "$A" list --recipe "$name" >"$T/text" 2>&1 || FAIL "tpreset_files: attnacc list --recipe $name failed"
    cmp -s "$T/text" "$f" || FAIL "tpreset_files: attnacc list --recipe $name is not the text of $rel (rebuild?)"
  else
    FAIL "tpreset_files: attnacc list does not show preset $name ($rel)"
  fi
done
while read -r rel; do
  [ -f "$S/$rel" ] || FAIL "tpreset_files: AA_PRESET_FILES names $rel, which does not exist"
done <"$T/listed"
while read -r name; do
  [ -f "$S/lib/recipe/presets/$name.recipe" ] ||
    FAIL "tpreset_files: attnacc list shows preset $name, which has no file lib/recipe/presets/$name.recipe"
done <"$T/compiled"

# 3
for f in "$S"/tests/data/presets/*.recipe; do
  [ -f "$f" ] || continue
  name=${f##*/}
  name=${name%.recipe}
  grep -qx "$name" "$T/compiled" ||
    FAIL "tpreset_files: tests/data/presets/$name.recipe is the stored copy of a preset that is not compiled in"
done

# 4
mkvar EXTRA_DIST >"$T/dist"
find "$S/recipes" -name '*.recipe' 2>/dev/null | sort >"$T/others"
while read -r f; do
  rel=${f#"$S"/}
  grep -qx "$rel" "$T/dist" || FAIL "tpreset_files: $rel is not in EXTRA_DIST (lib/recipe/local.mk): not in the tarball"
  "$A" run --recipe "$f" --n 16 --d 16 --seed 1 >"$T/run" 2>&1 ||
    FAIL "tpreset_files: attnacc run --recipe $rel --n 16 --d 16 failed: $(tail -n 1 "$T/run")"
done <"$T/others"

n=$(wc -l <"$T/compiled")
[ $fails -eq 0 ] || { echo "tpreset_files: $fails failure(s)"; exit 1; }
echo "tpreset_files: ok ($n presets, $(wc -l <"$T/others") other recipe files)"
