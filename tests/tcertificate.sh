#!/bin/sh
# attnacc: the oracle's certificate at huge logits, its range refusal, and score's refusal of non-finite exact values.
# SPDX-License-Identifier: LGPL-3.0-or-later
# Expected values are independent of the oracle: exact-fp64 is a plain FP64
# attention (agreeing with a NumPy float64 one to ~1e-16 on these problems),
# so an oracle whose o or dv is right gives it rel_l2 far below 1e-6, and
# an input of 1e300 makes q.k overflow FP64 whatever the code does.
set -u
A=${top_builddir:-.}/experiments/attnacc
[ -x "$A" ] || { echo "tcertificate: $A not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tcertificate.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }

# npy DIR DTYPE SEED "NAMES" "SCALES": one [1, 1, 8, 4] .npy per name in DIR, Gaussian draws (Python's random,
# seeded) times the name's scale, in DTYPE '<f8' or '<f4' (plain Python: no NumPy needed)
npy() {
  python3 - "$@" <<'PY'
import struct, sys, random
d, dtype, seed, names, scales = sys.argv[1:6]
random.seed(int(seed))
hdr = "{'descr': '%s', 'fortran_order': False, 'shape': (1, 1, 8, 4), }" % dtype
hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
for name, scale in zip(names.split(), scales.split()):
    with open(d + "/" + name + ".npy", "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack("<32" + {"<f8": "d", "<f4": "f"}[dtype], *[random.gauss(0, 1) * float(scale) for _ in range(32)]))
PY
}

# rel_l2 of OUT in the run table (4th column of the row "exact-fp64 OUT")
rel() { awk -v o="$2" '$1 == "exact-fp64" && $2 == o { print $4 }' "$1"; }
small() { awk -v x="$1" 'BEGIN { exit !(x != "" && x != "inf" && x != "nan" && x + 0 < 1e-6) }'; }

# Logits of |s| ~ 1e14 (sigma 1e7) overflowed the MPFR engine's exp: O and dV came back 0 with bound 0; sigma 3e6
# gave dV off by 20 % with "0 uncertified". Both oracle paths, both sizes.
for sg in 3e6 1e7; do
  for path in fast mpfr; do
    "$A" run --variant exact-fp64 --n 64 --d 16 --sigma "$sg" --threads 1 --oracle "$path" >"$T/run" 2>&1 ||
      FAIL "tcertificate: run at sigma $sg ($path) failed: $(tail -n 2 "$T/run")"
    for out in o dv; do
      r=$(rel "$T/run" "$out")
      small "$r" || FAIL "tcertificate: sigma $sg, $path oracle: exact-fp64 $out rel_l2 '$r' (the oracle's $out is wrong)"
    done
    grep -q "certified relative error bound 0.000e+00" "$T/run" &&
      FAIL "tcertificate: sigma $sg, $path oracle: a zero bound for non-zero outputs"
  done
done

# FP64 inputs of 1e300: the oracle refuses with exit 2, no verdict against NaN
mkdir "$T/in" || exit 1
npy "$T/in" '<f8' 1 "q k v do dq dk dv" "1e300 1e300 1e300 1e300 1e300 1e300 1e300" ||
  FAIL "tcertificate: cannot write the .npy inputs"
"$A" score --layout bhnd --inputs "$T/in" --grads "$T/in" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 2 ] || FAIL "tcertificate: score on 1e300 inputs: exit $rc, want 2: $(tail -n 3 "$T/err")"
grep -q "beyond the oracle's range" "$T/err" || FAIL "tcertificate: score on 1e300 inputs: no range message: $(cat "$T/err")"
grep -qi "verdict" "$T/out" && FAIL "tcertificate: score on 1e300 inputs printed a verdict"

# FP32 data whose exact dq and dk overflow FP32 (v, dO ~ 1e20: dP ~ 1e40): a correctly rounded kernel holds Inf
# there, which no rule can judge; score refuses with exit 2 instead of a verdict against Inf
mkdir "$T/ovf" || exit 1
npy "$T/ovf" '<f4' 2 "q k v do dq dk dv" "1 1 1e20 1e20 1 1 1" || FAIL "tcertificate: cannot write the .npy inputs"
"$A" score --layout bhnd --inputs "$T/ovf" --grads "$T/ovf" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 2 ] || FAIL "tcertificate: score on FP32-overflowing gradients: exit $rc, want 2: $(tail -n 3 "$T/err")"
grep -q "is not finite in fp32" "$T/err" || FAIL "tcertificate: score on FP32-overflowing gradients: $(cat "$T/err")"

[ $fails -eq 0 ] && echo "tcertificate: ok"
[ $fails -eq 0 ]
