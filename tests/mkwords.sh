#!/bin/sh
# attnacc: helper of the guard tests: every word assigned (= or +=) to a make variable in the automake inputs, as "VAR WORD" lines.
# SPDX-License-Identifier: LGPL-3.0-or-later
# usage: sh tests/mkwords.sh TOP_SRCDIR. Reads Makefile.am and every local.mk / tables.mk it includes; joins
# continuation lines and drops comments. Conditionals (if/endif) are ignored: a word assigned under any
# condition counts.
S=${1:-.}
cat "$S/Makefile.am" "$S"/lib/*/local.mk "$S"/experiments/*.mk "$S"/python/local.mk "$S"/bench/local.mk \
  "$S"/fuzz/local.mk 2>/dev/null |
  awk '{ sub(/#.*/, "") }
    cont { line = line " " $0 } !cont { line = $0 }
    { cont = sub(/\\$/, "", line) } cont { next }
    { n = split(line, w, /[ \t]+/); i = 1; while (i <= n && w[i] == "") i++ }
    i + 1 <= n && (w[i + 1] == "=" || w[i + 1] == "+=") { for (j = i + 2; j <= n; j++) if (w[j] != "") print w[i], w[j] }'
