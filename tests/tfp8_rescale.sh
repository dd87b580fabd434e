#!/bin/sh
# attnacc: the fp8-rescale experiment's quick grid: FA4 FP8 with threshold 4 saturates P above 448 and fails the regression test's rule at logit std 2.5; every fixed setting keeps P under its closed-form bound.
# SPDX-License-Identifier: LGPL-3.0-or-later
set -u
A=${top_builddir:-.}/experiments/attnacc
[ -x "$A" ] || { echo "tfp8_rescale: $A not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tfp8_rescale.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_WAIT_POLICY
"$A" sweep --experiment fp8-rescale --quick --threads 2 --out "$T/q" >"$T/out" 2>&1 ||
  { cat "$T/out"; echo "FAIL tfp8_rescale: the sweep exited $?"; exit 1; }
# One line per (logit_std, recipe) with the checks' verdicts. The bounds on p_max (P x 2^offset before the
# cast) follow from the threshold alone: the running max lags the true one by at most t log2 units, so P x 2^o
# <= 2^(o + t) (up to the error of the exp2: fa4-poly's polynomial is about 1e-4 relative, allowed 5e-4): fix-0.75 2^8.75 = 430.5,
# offset4-4 2^8, head-0 2^8; stock-4 may reach 2^12 and, at logit std 2.5, must pass 448.
awk -F, '
NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
{
  s = $c["logit_std"]; r = $c["recipe"]; pm = $c["p_max"] + 0; ov = $c["p_over"] + 0; ps = $c["pass"] + 0
  bound = r == "fix-0.75" ? 430.54 : (r == "stock-4" ? 4096 : 256)
  if (pm > bound * 1.0005) printf "FAIL tfp8_rescale: %s at logit std %s: p_max %s above 2^(offset + threshold) = %s\n", r, s, pm, bound
  if (r != "stock-4" && (ov != 0 || ps != 1)) printf "FAIL tfp8_rescale: %s at logit std %s: p_over %d pass %d, want 0 and 1\n", r, s, ov, ps
  if (r == "stock-4" && s + 0 == 2.5 && (ov == 0 || ps != 0 || pm <= 448)) printf "FAIL tfp8_rescale: stock-4 at logit std 2.5: p_max %s p_over %d pass %d, want > 448, > 0, 0\n", pm, ov, ps
  rows++
}
END { if (rows != 8) printf "FAIL tfp8_rescale: %d rows, want 8 (2 logit stds x 4 recipes)\n", rows }
' "$T/q/results.csv" >"$T/fails"
cat "$T/fails"
[ -s "$T/fails" ] && exit 1
echo "tfp8_rescale: ok"
