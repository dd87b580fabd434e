#!/bin/sh
# attnacc: `attnacc closest` names the preset a real kernel's outputs come from: the H200 flash gradients are fa2-h100's.
# SPDX-License-Identifier: LGPL-3.0-or-later
# Fixture: fixtures/h200-sdpa (PyTorch 2.11 SDPA FLASH_ATTENTION on an H200, experiments/README-gpu.md). Its o is
# 3.5 % more accurate than a one-pass online softmax (split-KV forward), which fa2-h100 models and fa2 does not; its
# dq/dk are 22 % more accurate than the efficient backend's. So closest must rank fa2-h100 first with a distance
# below 0.5 %, fa2 behind it, efficient-h100 last, also from an .npz and a .safetensors in another layout; bad
# usage exits 2.
set -u
A=${top_builddir:-.}/experiments/attnacc
F=${top_srcdir:-..}/fixtures/h200-sdpa
[ -x "$A" ] || { echo "tclosest: $A not built"; exit 1; }
[ -f "$F/inputs/q.npy" ] || { echo "tclosest: $F missing (skipped)"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tclosest.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }
"$A" closest --inputs "$F/inputs" --grads "$F/flash-dense" --variants fa2,efficient-h100,fa2-h100 --threads 2 >"$T/out" ||
  FAIL "closest exited $?"
grep -q '^closest: fa2-h100 (0\.[0-4][0-9]%)' "$T/out" || FAIL "closest is not fa2-h100 below 0.5 %: $(grep '^closest' "$T/out")"
order=$(awk '/^preset/ { on = 1; next } on && NF == 6 { printf "%s ", $1 }' "$T/out")
[ "$order" = "fa2-h100 fa2 efficient-h100 " ] || FAIL "ranking '$order'"
# the same arrays as score reads them: an .npz of [B, N, H, d] inputs and a .safetensors of the outputs, int16 BF16
# bits (--bf16-bits), --layout bnhd: the same table, line for line
py=
for cand in "${PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$cand" ] && "$cand" -c 'import numpy' >/dev/null 2>&1 && { py=$cand; break; }
done
if [ -n "$py" ]; then
  "$py" - "$F" "$T" <<'PY' || FAIL "could not write the .npz and .safetensors"
import json, struct, sys
import numpy as np
F, T = sys.argv[1], sys.argv[2]
bnhd = lambda a: a.reshape(1, *a.shape).transpose(0, 2, 1, 3).copy()  # [1, N, d] -> [1, N, 1, d]
np.savez(T + "/in.npz", **{n: bnhd(np.load(f"{F}/inputs/{n}.npy")) for n in ("q", "k", "v", "do")})
ts = {n: bnhd(np.load(f"{F}/flash-dense/{n}.npy")).view(np.int16) for n in ("o", "dq", "dk", "dv")}
head, off, blob = {}, 0, b""
for n, a in ts.items():
    head[n] = {"dtype": "I16", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
    off += a.nbytes
    blob += a.tobytes()
h = json.dumps(head).encode()
open(T + "/g.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + blob)
PY
  "$A" closest --inputs "$T/in.npz" --grads "$T/g.safetensors" --layout bnhd --bf16-bits \
    --variants fa2,efficient-h100,fa2-h100 --threads 2 >"$T/out2" 2>"$T/err2" || FAIL "closest .npz/.safetensors exited $?: $(cat "$T/err2")"
  diff "$(awk '/^preset/,0' "$T/out" >"$T/t1"; echo "$T/t1")" "$(awk '/^preset/,0' "$T/out2" >"$T/t2"; echo "$T/t2")" >/dev/null ||
    FAIL "closest on .npz/.safetensors, bnhd, differs from the .npy folders: $(cat "$T/out2")"
  grep -q '^layout: bnhd' "$T/out2" || FAIL "closest does not name the layout bnhd: $(cat "$T/out2")"
else
  echo "tclosest: no python3 with numpy: the .npz/.safetensors case is skipped"
fi
"$A" closest --inputs "$F/inputs" >/dev/null 2>&1; [ $? -eq 2 ] || FAIL "no --grads: want exit 2"
"$A" closest --inputs "$F/inputs" --grads "$F/flash-dense" --json >/dev/null 2>&1; [ $? -eq 2 ] || FAIL "--json: want exit 2"
"$A" closest --inputs "$F/inputs" --grads "$T/none" --variants fa2 >/dev/null 2>&1; [ $? -eq 2 ] || FAIL "missing grads: want exit 2"
[ "$fails" -eq 0 ] && echo "tclosest: ok"
exit $((fails > 0))
