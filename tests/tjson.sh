#!/bin/sh
# attnacc: the command's JSON is valid whatever bytes a path holds: a quote, DEL (0x7f), a control character and invalid UTF-8 in --inputs and --out paths.
# SPDX-License-Identifier: LGPL-3.0-or-later
# The expectations come from RFC 8259 (quotes and control characters escaped,
# DEL allowed as itself) and RFC 3629 (0xff never occurs in UTF-8), checked by
# jansson's own parser (tests/jget) and, when it is there, by Python's.
set -u
A=${top_builddir:-.}/experiments/attnacc
J=${top_builddir:-.}/tests/jget
[ -x "$A" ] && [ -x "$J" ] || { echo "tjson: $A or $J not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tjson.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }
py=$(command -v python3 || true)
valid() { # valid WHAT FILE: jansson and (when present) Python parse FILE as one JSON text
  "$J" "$2" >/dev/null || FAIL "tjson $1: jansson rejects $2: $(head -c 300 "$2")"
  if [ -n "$py" ]; then
    "$py" -m json.tool "$2" >/dev/null 2>"$T/pyerr" || FAIL "tjson $1: python3 -m json.tool rejects it: $(cat "$T/pyerr")"
  fi
}

# A folder name with '"', DEL, SOH (0x01), a tab, the invalid byte 0xff and a backslash.
odd=$(printf 'in"\177\001\t\377\\x')
D="$T/$odd"
"$A" run --variant fa2 --n 16 --d 8 --save "$D" >/dev/null 2>"$T/e" || FAIL "tjson save into the odd folder: $(cat "$T/e")"
"$A" run --variant fa2 --inputs "$D" --json >"$T/run.json" 2>"$T/e" || FAIL "tjson run --inputs: $(cat "$T/e")"
valid "run --inputs" "$T/run.json"
# The value read back: the same bytes, except 0xff, which became U+FFFD (ef bf bd).
"$J" "$T/run.json" inputs | od -An -v -tx1 | tr -s ' \n' ' ' >"$T/got"
printf '%s/in"\177\001\t\357\277\275\\x\n' "$T" | od -An -v -tx1 | tr -s ' \n' ' ' >"$T/want"
cmp -s "$T/got" "$T/want" || FAIL "tjson run --inputs: inputs reads back as $(cat "$T/got"), want $(cat "$T/want")"
# The escapes themselves: the quote, SOH and tab escaped; 0x7f left as itself (RFC 8259 allows it); no 0xff byte.
grep -q 'in\\"' "$T/run.json" || FAIL "tjson run --inputs: the quote is not escaped"
grep -q '\\u0001\\t' "$T/run.json" || FAIL "tjson run --inputs: SOH and tab are not escaped as \\u0001\\t"
LC_ALL=C grep -q "$(printf '\377')" "$T/run.json" && FAIL "tjson run --inputs: a raw 0xff byte in the JSON"
"$A" score --inputs "$D" --grads "$D" --json >"$T/score.json" 2>"$T/e" || FAIL "tjson score: $(cat "$T/e")"
valid "score --inputs" "$T/score.json"

# The sweep's meta.json holds the command line: an --out folder with the same name.
"$A" sweep --experiment smoke --variants fa2 --quick --seeds 1 --n 16 --masks dense --out "$T/sw$odd" >/dev/null 2>"$T/e" ||
  FAIL "tjson sweep: $(cat "$T/e")"
valid "sweep meta.json" "$T/sw$odd/meta.json"
"$J" "$T/sw$odd/meta.json" command | grep -q 'sw' || FAIL "tjson sweep: meta.json's command lacks the --out folder"

[ $fails -eq 0 ] && echo "tjson: ok"
[ $fails -eq 0 ]
