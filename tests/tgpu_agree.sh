#!/bin/sh
# attnacc: external check against H200 outputs: the GPU's flash gradients score like our fa2 emulation, and fa2-h100 reproduces their bits.
# SPDX-License-Identifier: LGPL-3.0-or-later
# Fixtures: fixtures/h200-sdpa (MANIFEST; experiments/README-gpu.md says how they were made).
#  1. `attnacc score` of the H200 flash o/dq/dk/dv against the oracle: each rel_l2 within 10% of the rel_l2
#     of our fa2 emulation on the same inputs (an independent witness that the emulated error is the real one).
#  2. fa2-h100 (tensor-core products, split-KV forward) agrees bit for bit with the H200 on at least the
#     measured fraction minus a margin, and more often than fa2 does on o (the forward modelling it adds).
#  6. The LSE rows against the H200's softmax_lse (section 6 below).
#  5. A held-out case (fixtures/h200-fa2, README-gpu.md section 4): d = 64, n = 1024, dense, the seed-1
#     draw, which FA2 runs as a 4-way split of 256-key blocks and a 128 x 128 backward: the first 256 rows of the
#     H200's o, dq, dk, dv against fa2-h100, which was not tuned on it.
set -u
A=${top_builddir:-.}/experiments/attnacc
J=${top_builddir:-.}/tests/jget
F=${top_srcdir:-..}/fixtures/h200-sdpa
[ -x "$A" ] || { echo "tgpu_agree: $A not built"; exit 1; }
[ -f "$F/inputs/q.npy" ] || { echo "tgpu_agree: $F missing (skipped)"; exit 77; }
command -v od >/dev/null 2>&1 || { echo "tgpu_agree: od missing (skipped)"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tgpu_agree.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }

# rel_l2 of output $2 in JSON file $1
rel() { "$J" "$1" "runs.0.outputs.$2.rel_l2"; }
# fraction of bit-identical elements of two .npy files with 128-byte headers: '<u2' (BF16), or elements of
# $3 bytes ('<f4': 4); 0 when they are empty or their lengths differ
agree() {
  w=${3:-2}
  od -An -v -w$w -tu$w -j128 "$1" >"$T/a" && od -An -v -w$w -tu$w -j128 "$2" >"$T/b" &&
    paste -d' ' "$T/a" "$T/b" | awk '{ n++; if ($1 == $2 && NF == 2) s++ } END { if (n == 0) print 0; else printf "%.5f\n", s / n }'
}

# Floors: fa2-h100 agreement measured on these fixtures (README-gpu.md section 6: 1.00000 0.99992 0.99999
# 1.00000 dense, 1.00000 0.99902 1.00000 1.00000 causal; dq differs between GPU runs by its FP32 atomics) minus
# 0.0005 (dq 0.001). Section 4's model gave 0.9997 0.9991 0.9984 0.9990 and 0.9997 0.9981 0.9992 0.9993.
#            o      dq     dk     dv
floors_dense="0.9995 0.9989 0.9995 0.9995"
floors_causal="0.9995 0.9980 0.9995 0.9995"

for mask in dense causal; do
  c=""
  [ $mask = causal ] && c=--causal
  G=$F/flash-$mask
  "$A" score --inputs "$F/inputs" --grads "$G" $c --json >"$T/gpu.json" 2>"$T/e" || { FAIL "tgpu_agree score $mask: $(cat "$T/e")"; continue; }
  for v in fa2 fa2-h100; do
    "$A" run --variant $v --inputs "$F/inputs" $c --json --save "$T/$v-$mask" >"$T/$v.json" 2>"$T/e" ||
      { FAIL "tgpu_agree run $v $mask: $(cat "$T/e")"; continue 2; }
  done
  eval "floors=\$floors_$mask"
  i=0
  for o in o dq dk dv; do
    i=$((i + 1))
    g=$(rel "$T/gpu.json" $o)
    e=$(rel "$T/fa2.json" $o)
    awk -v g="$g" -v e="$e" 'BEGIN { exit !(g > 0 && e > 0 && g <= 1.1 * e && g >= e / 1.1) }' ||
      FAIL "tgpu_agree $mask $o: H200 flash rel_l2 $g is not within 10% of the fa2 emulation's $e (n 1024, d 128, seed-1 inputs)"
    floor=$(echo $floors | cut -d' ' -f$i)
    ah=$(agree "$T/fa2-h100-$mask/$o.npy" "$G/$o.npy")
    af=$(agree "$T/fa2-$mask/$o.npy" "$G/$o.npy")
    echo "tgpu_agree $mask $o: rel_l2 H200 $g fa2 $e; bitwise agreement with H200: fa2 $af, fa2-h100 $ah (floor $floor)"
    awk -v a="$ah" -v f="$floor" 'BEGIN { exit !(a >= f) }' ||
      FAIL "tgpu_agree $mask $o: fa2-h100 agrees with the H200 on $ah of the elements, below the floor $floor"
    if [ $o = o ]; then
      awk -v a="$ah" -v b="$af" 'BEGIN { exit !(a > b) }' ||
        FAIL "tgpu_agree $mask o: fa2-h100 ($ah) does not agree with the H200 more often than fa2 ($af)"
    fi
  done
done
# 3. tiling = fa2 (aa_fa2_dispatch) for one head, n = 1024, d = 16 (FA2's 32 kernel): 16 work units on 2 * 132,
#    the splitkv kernel's 256-key blocks give 4 blocks; efficiency 16 s / 264 grows with s, s = 3 is not eligible
#    (ceil(4/3) = ceil(4/2)), so 4 splits of one 64 x 256 block; backward 128 x 128. The same bits as those tiles
#    written out with tiling = fixed; other bits than 8 splits of 128-key blocks (the old fixed preset).
printf 'base = fa2-h100\ntiling = fixed\nfwd.split_sms = 0\nfwd.splits = 4\nfwd.tile_q = 64\nfwd.tile_k = 256\nbwd.tile_q = 128\nbwd.tile_k = 128\n' >"$T/s4.rcp"
printf 'base = fa2-h100\ntiling = fixed\nfwd.split_sms = 0\nfwd.splits = 8\nfwd.tile_k = 128\nbwd.tile_q = 64\n' >"$T/s8.rcp"
for v in h100 s4 s8; do
  if [ $v = h100 ]; then set -- --variant fa2-h100; else set -- --recipe "$T/$v.rcp"; fi
  "$A" run "$@" --n 1024 --d 16 --seed 3 --save "$T/$v" >"$T/$v.txt" 2>&1 || FAIL "tgpu_agree split run $v: $(tail -1 "$T/$v.txt")"
done
for o in o dq dk dv; do
  cmp -s "$T/h100/$o.npy" "$T/s4/$o.npy" || FAIL "tgpu_agree tiling = fa2: fa2-h100 $o (n 1024, d 16, seed 3) differs from the tiles written out"
done
cmp -s "$T/h100/o.npy" "$T/s8/o.npy" && FAIL "tgpu_agree tiling = fa2: fa2-h100 o (n 1024, seed 3) equals 8 splits of 128 keys"
grep -q "fwd.split_sms = 132" "$T/h100.txt" 2>/dev/null || "$A" run --variant fa2-h100 --n 64 --d 16 --json 2>/dev/null |
  grep -q 'fwd.split_sms = 132' || FAIL "tgpu_agree: the recipe text of fa2-h100 does not record fwd.split_sms = 132"

# 4. The split-KV algebra itself: in binary64 (exact-fp64, 64-key blocks) 200 keys in 3 splits of 2 blocks
#    (the last split empty), blocks last to first, must still give the oracle's O and gradients (rel_l2 < 1e-13).
printf 'base = exact-fp64\nfwd.splits = 3\nfwd.k_order = desc\nbwd.q_order = desc\n' >"$T/x64.rcp"
for c in "" --causal; do
  "$A" run --recipe "$T/x64.rcp" --n 200 --d 16 --seed 5 $c --json >"$T/x64.json" 2>"$T/e" ||
    { FAIL "tgpu_agree split fp64 $c: $(cat "$T/e")"; continue; }
  for o in o dq dk dv; do
    v=$(rel "$T/x64.json" $o)
    awk -v v="$v" 'BEGIN { exit !(v != "null" && v + 0 < 1e-13) }' ||
      FAIL "tgpu_agree split fp64 $c $o: rel_l2 $v is not below 1e-13 (n 200, d 16, seed 5)"
  done
done

# 5. Held-out case (see the header): the seed-1 draw of d = 64, n = 1024 is the H200 run's input (sha256 checked
#    on both machines, README-gpu.md section 4), so it is drawn again here; the first 256 rows are compared.
#    Floors: measured on these rows (o 1.00000, dq 0.99969, dk 1.00000, dv 1.00000; section 4's model 0.99945,
#    0.99786, 0.99854, 0.99829; the old fixed-tiling preset 0.636, 0.806, 0.792, 0.996) minus 0.0005 (dq 0.001).
H=${top_srcdir:-..}/fixtures/h200-fa2/d64n1024-dense
if [ -f "$H/o.npy" ]; then
  "$A" run --variant fa2-h100 --n 1024 --d 64 --seed 1 --save "$T/held" >"$T/held.txt" 2>&1 || FAIL "tgpu_agree held-out run: $(tail -1 "$T/held.txt")"
  i=0
  for o in o dq dk dv; do
    i=$((i + 1))
    floor=$(echo "0.9995 0.9986 0.9995 0.9995" | cut -d' ' -f$i)
    od -An -v -w2 -tu2 -j128 -N32768 "$T/held/$o.npy" >"$T/a" && od -An -v -w2 -tu2 -j128 "$H/$o.npy" >"$T/b" || FAIL "tgpu_agree held-out $o: od failed"
    ah=$(paste -d' ' "$T/a" "$T/b" | awk '{ n++; if ($1 == $2) s++ } END { if (n != 16384) print 0; else printf "%.5f\n", s / n }')
    echo "tgpu_agree held-out d64 n1024 dense $o (first 256 rows): fa2-h100 agrees on $ah (floor $floor)"
    awk -v a="$ah" -v f="$floor" 'BEGIN { exit !(a >= f) }' ||
      FAIL "tgpu_agree held-out $o: fa2-h100 agrees with the H200 on $ah of the first 256 rows, below the floor $floor"
  done
else
  echo "tgpu_agree: $H missing, held-out case skipped"
fi

# 6. The LSE the backward reads (README-gpu.md section 6): the H200's softmax_lse ('<f4', read by the aten flash
#    op on the same inputs) against fa2-h100's lse.npy, row for row. Measured: 1.00000 dense and causal
#    (0.888 / 0.872 with a correctly rounded log2 inside MUFU.LG2), 0.830 / 0.806 with the row sum in one
#    sequential order (fwd.rowsum_split = none), which must stay below the preset's. Floor 0.999.
for mask in dense causal; do
  c=""
  [ $mask = causal ] && c=--causal
  G=$F/flash-$mask
  [ -f "$G/lse.npy" ] || { FAIL "tgpu_agree lse: $G/lse.npy missing"; continue; }
  "$A" run --variant "fa2-h100:fwd.rowsum_split=none" --inputs "$F/inputs" $c --save "$T/seq-$mask" >/dev/null 2>"$T/e" ||
    { FAIL "tgpu_agree lse run $mask: $(cat "$T/e")"; continue; }
  lh=$(agree "$T/fa2-h100-$mask/lse.npy" "$G/lse.npy" 4)
  [ "$(wc -l <"$T/a")" -eq 1024 ] && [ "$(wc -l <"$T/b")" -eq 1024 ] || FAIL "tgpu_agree $mask lse: not 1024 rows on both sides"
  ls=$(agree "$T/seq-$mask/lse.npy" "$G/lse.npy" 4)
  floor=0.999
  echo "tgpu_agree $mask lse: fa2-h100 agrees with the H200 on $lh of the rows (floor $floor), one sequential row sum on $ls"
  awk -v a="$lh" -v f="$floor" -v q="$ls" 'BEGIN { exit !(a >= f && q < a) }' ||
    FAIL "tgpu_agree $mask lse: fa2-h100 $lh (floor $floor), sequential row sum $ls"
done

[ $fails -eq 0 ] || { echo "tgpu_agree: $fails failure(s)"; exit 1; }
echo "tgpu_agree: ok"
