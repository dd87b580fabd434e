#!/bin/sh
# attnacc: `attnacc determinism` (the determinism experiment of the sweep engine): ordered and fixed-point dQ give one bit pattern over runs, fp32-atomic gives spread at n = 1024.
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
A=${top_builddir:-.}/experiments/attnacc
[ -x "$A" ] || { echo "tdeterminism: $A not built"; exit 1; }
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }
# value of a top-level JSON number/string field
field() { "${top_builddir:-.}/tests/jget" "$1" "$2"; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tdeterminism.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
for v in fa2 fa2-fixed fa2-atomic; do
  "$A" determinism --variant $v --n 1024 --d 32 --heads 1 --runs 6 --order-seed-base 1 --seed 1 --json --out "$T/$v" >"$T/$v.json" 2>"$T/$v.err" ||
    { FAIL "tdeterminism $v: exit status $? ($(cat "$T/$v.err"))"; continue; }
  p=$(field "$T/$v.json" distinct_patterns)
  s=$(field "$T/$v.json" spread_max_ulp)
  echo "tdeterminism: $v: distinct_patterns $p, spread_max_ulp $s"
  case $v in
  fa2-atomic)
    [ "${p:-0}" -gt 1 ] || FAIL "tdeterminism $v: $p distinct dQ bit patterns over 6 order seeds, want > 1 (n 1024, d 32, seed 1)"
    [ "$s" != 0 ] || FAIL "tdeterminism $v: spread_max_ulp is 0, want > 0" ;;
  *)
    [ "$p" = 1 ] || FAIL "tdeterminism $v: $p distinct dQ bit patterns, want 1 (n 1024, d 32, seed 1)"
    [ "$s" = 0 ] || FAIL "tdeterminism $v: spread_max_ulp $s, want 0" ;;
  esac
done
# Bad usage is refused with status 2.
"$A" determinism --variant fa2 --runs 0 --out "$T/bad" >/dev/null 2>&1
[ $? -eq 2 ] || FAIL "tdeterminism: --runs 0 not refused with status 2"
"$A" determinism --variant fa2 --set dq_reduce=bogus --out "$T/bad" >/dev/null 2>&1
[ $? -eq 2 ] || FAIL "tdeterminism: --set dq_reduce=bogus not refused with status 2"
[ $fails -eq 0 ] && echo "tdeterminism: ok"
[ $fails -eq 0 ]
