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
# Run-to-run dQ differences of the H200's FP32 atomics (fixtures/h200-fa2/dq_pairs.txt: the range over pairs of
# five SDPA flash backward runs) against fa2-h100 with a uniformly random arrival order per dQ tile (fp32-atomic,
# no parameter): the mean count over four runs against the first must lie in the H200's range. Two small cases
# here (one looked at while the model was chosen, one held out); all 17 with ATTNACC_CHECK_EXPENSIVE=1
# (fixtures/h200-fa2/dq_atomic.sh, about an hour on 2 cores; its stored run is fixtures/h200-fa2/dq_atomic.csv).
S=${top_srcdir:-.}
if [ -n "${ATTNACC_CHECK_EXPENSIVE:-}" ]; then
  cases=$S/fixtures/h200-fa2/dq_pairs.txt
else
  grep -E '^#|^d128n1024 |^d64n1024c ' "$S/fixtures/h200-fa2/dq_pairs.txt" >"$T/cases"
  cases=$T/cases
fi
sh "$S/fixtures/h200-fa2/dq_atomic.sh" "$A" "$T/dq" "$cases" 5 >"$T/dq.out" 2>&1 || FAIL "tdeterminism dq_atomic.sh: $(tail -n 1 "$T/dq.out")"
want=$(grep -vc '^#' "$cases")
got=$(awk -F, 'NR > 1' "$T/dq/dq_atomic.csv" 2>/dev/null | wc -l)
[ "$got" -eq "$want" ] || FAIL "tdeterminism dq_atomic.sh: $got of $want cases ran ($(tail -n 1 "$T/dq.out"))"
awk -F, 'NR > 1 && $14 != "yes" { print "FAIL tdeterminism: " $1 ": predicted " $9 " differing dQ elements between two runs, the H200 " $12 "-" $13 }' \
  "$T/dq/dq_atomic.csv" >"$T/dqfail"
[ -s "$T/dqfail" ] && { cat "$T/dqfail"; fails=$((fails + 1)); }
awk -F, 'NR > 1 { print "tdeterminism: " $1 " (" $2 "): predicted " $9 " (" $10 "-" $11 "), H200 " $12 "-" $13 }' "$T/dq/dq_atomic.csv"
# Bad usage is refused with status 2.
"$A" determinism --variant fa2 --runs 0 --out "$T/bad" >/dev/null 2>&1
[ $? -eq 2 ] || FAIL "tdeterminism: --runs 0 not refused with status 2"
"$A" determinism --variant fa2 --set dq_reduce=bogus --out "$T/bad" >/dev/null 2>&1
[ $? -eq 2 ] || FAIL "tdeterminism: --set dq_reduce=bogus not refused with status 2"
[ $fails -eq 0 ] && echo "tdeterminism: ok"
[ $fails -eq 0 ]
