#!/bin/sh
# attnacc: `attnacc score` verdicts on torch's own math attention as the kernel: exit 0 when correct, 1 with dq * 1.008, 2 on bad input; layouts, .npz, .safetensors, '<i2' BF16 bits.
# SPDX-License-Identifier: LGPL-3.0-or-later
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
A="$top_builddir/experiments/attnacc"
J="$top_builddir/tests/jget"
py=
for cand in "${PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$cand" ] || continue
  if "$cand" -c 'import numpy, torch' >/dev/null 2>&1; then
    py=$cand
    break
  fi
done
[ -n "$py" ] || { echo "SKIP: no python3 with numpy and torch (apt-get install python3-numpy python3-torch)"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tscore.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }

# The kernel: torch's FP32 (and BF16) math attention with autograd, [B, H, N, d] = [2, 4, 32, 16], GQA with 2 kv
# heads. Written: in/ and good/ (.npy), bad/ (dq * 1.008), the same transposed to [B, N, H, d], .npz archives
# (np.savez and np.savez_compressed), a .safetensors file written by hand from its specification, BF16 bits as
# '<i2', and ref.txt: the index of the largest |dq * 1.008 - dq_exact| by torch's own FP64 computation.
"$py" - "$T" <<'PY' || { echo "FAIL tscore: could not write the kernel's files"; exit 1; }
import json, os, struct, sys
import numpy as np, torch
T = sys.argv[1]
g = torch.Generator().manual_seed(13)
B, H, HKV, N, D = 2, 4, 2, 32, 16
def attn(q, k, v, do):
    q, k, v = (t.clone().requires_grad_(True) for t in (q, k, v))
    kr, vr = k.repeat_interleave(H // HKV, 1), v.repeat_interleave(H // HKV, 1)
    o = torch.softmax((q @ kr.transpose(-1, -2)) * D ** -0.5, -1) @ vr
    o.backward(do)
    return [o.detach(), q.grad, k.grad, v.grad]
ins = [torch.randn(B, h, N, D, generator=g) for h in (H, HKV, HKV, H)]
outs = attn(*ins)
ref = attn(*(t.double() for t in ins))
bad = list(outs)
bad[1] = outs[1] * 1.008
def save(d, names, ts, tr=False):
    os.makedirs(d, exist_ok=True)
    for n, t in zip(names, ts):
        t = t.transpose(1, 2).contiguous() if tr else t
        np.save(os.path.join(d, n + ".npy"), t.numpy())
IN, OUT = ("q", "k", "v", "do"), ("o", "dq", "dk", "dv")
save(T + "/in", IN, ins); save(T + "/good", OUT, outs); save(T + "/bad", OUT, bad)
save(T + "/in_t", IN, ins, True); save(T + "/bad_t", OUT, bad, True)
# batch 0 alone as flash-attn's [N, H, d] (batch axis squeezed)
for d, names, ts in ((T + "/in_nhd", IN, ins), (T + "/good_nhd", OUT, outs)):
    os.makedirs(d, exist_ok=True)
    for n, t in zip(names, ts):
        np.save(os.path.join(d, n + ".npy"), t[0].transpose(0, 1).contiguous().numpy())
err = (bad[1].double() - ref[1]).abs()
idx = np.unravel_index(int(err.argmax()), err.shape)
open(T + "/ref.txt", "w").write("(" + ", ".join(str(int(i)) for i in idx) + ")\n")
np.savez(T + "/in.npz", **{n: t.numpy() for n, t in zip(IN, ins)})
np.savez_compressed(T + "/bad.npz", **{n: t.numpy() for n, t in zip(OUT, bad)})
def safetensors(path, named):
    hdr, blob = {"__metadata__": {"format": "pt"}}, b""
    for n, t in named:
        raw = t.numpy().astype("<f4").tobytes()
        hdr[n] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    h = json.dumps(hdr).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + blob)
safetensors(T + "/all.safetensors", list(zip(IN, ins)) + list(zip(OUT, outs)))
bins = [t.to(torch.bfloat16) for t in ins]
bouts = attn(*bins)
os.makedirs(T + "/bf", exist_ok=True)
for n, t in list(zip(IN, bins)) + list(zip(OUT, bouts)):
    np.save(T + "/bf/" + n + ".npy", t.view(torch.int16).numpy())
PY

run() { # run WANT-STATUS WHAT ARGS...: run score, check its exit status; output in $T/out, stderr in $T/err
  want=$1
  what=$2
  shift 2
  "$A" score "$@" >"$T/out" 2>"$T/err"
  st=$?
  [ "$st" -eq "$want" ] || FAIL "tscore $what: exit status $st, want $want: $(head -c 600 "$T/err")"
}

# Correct kernel: every rule passes, exit 0.
run 0 "correct kernel, torch rule" --inputs "$T/in" --grads "$T/good" --layout bhnd --rule torch
grep -q "^verdict: external PASS by torch" "$T/out" || FAIL "tscore correct: no PASS verdict line"
run 0 "correct kernel, all rules" --inputs "$T/in" --grads "$T/good" --layout bhnd --rule all
# dq * 1.008: the fp32 torch rule and the fa rule fail, exit 1, stderr names dq, the rule and the worst index.
for rule in torch fa; do
  run 1 "dq*1.008 $rule" --inputs "$T/in" --grads "$T/bad" --layout bhnd --rule $rule
  grep -q "FAIL: dq fails the $rule rule" "$T/err" || FAIL "tscore dq*1.008 $rule: stderr is $(cat "$T/err")"
done
# the fa rule's worst element is the largest |a - b| (the torch rule's the largest |a - b| / (atol + rtol |b|))
run 1 "dq*1.008 fa (index)" --inputs "$T/in" --grads "$T/bad" --layout bhnd --rule fa
grep -qF "at index $(cat "$T/ref.txt")" "$T/err" || FAIL "tscore dq*1.008 fa: worst index is not torch's $(cat "$T/ref.txt"): $(cat "$T/err")"
grep -q "^FAIL external dq fails the fa rule" "$T/out" || FAIL "tscore dq*1.008 fa: no FAIL line in the table"
run 0 "dq*1.008 --no-fail" --inputs "$T/in" --grads "$T/bad" --layout bhnd --rule fa --no-fail
run 0 "dq*1.008 abs-rel 0.01 0.01" --inputs "$T/in" --grads "$T/bad" --layout bhnd --rule abs-rel 0.01 0.01
run 1 "dq*1.008 abs-rel 0 0.001" --inputs "$T/in" --grads "$T/bad" --layout bhnd --rule abs-rel 0 0.001
# The same files in [B, N, H, d] with --layout bnhd: the same verdict and worst index, transposed.
run 1 "bnhd dq*1.008" --inputs "$T/in_t" --grads "$T/bad_t" --layout bnhd --rule fa
ti=$(sed 's/(\([0-9]*\), \([0-9]*\), \([0-9]*\), \([0-9]*\))/(\1, \3, \2, \4)/' "$T/ref.txt")
grep -qF "at index $ti" "$T/err" || FAIL "tscore bnhd: worst index is not $ti: $(cat "$T/err")"
# Wrong layout: the [B, H, N, d] tensors read as bnhd fail, and the message names the layout.
run 1 "wrong layout" --inputs "$T/in" --grads "$T/good" --layout bnhd --rule fa
grep -q "^layout: bnhd \[B, N, H, d\]" "$T/out" || FAIL "tscore wrong layout: layout line missing"
# flash-attn's [N, H, d] without the batch axis: scored with --layout nhd; without it read as [H, N, d]: the
# verdict fails and stderr says which layout was used and how to name the other.
run 0 "nhd" --inputs "$T/in_nhd" --grads "$T/good_nhd" --layout nhd --rule all
run 1 "nhd read as hnd" --inputs "$T/in_nhd" --grads "$T/good_nhd" --rule fa
grep -q "read as hnd \[H, N, d\].*--layout nhd" "$T/err" || FAIL "tscore nhd read as hnd: no hint: $(cat "$T/err")"
# No --layout: [2, 4, 32, 16] / [2, 2, 32, 16] fit both 4-axis layouts: refused, naming both.
run 2 "ambiguous layout" --inputs "$T/in" --grads "$T/good"
grep -q "bhnd.*bnhd" "$T/err" || FAIL "tscore ambiguous layout: message is $(cat "$T/err")"
run 2 "bad --rule" --inputs "$T/in" --grads "$T/good" --layout bhnd --rule fast
run 2 "bad --layout" --inputs "$T/in" --grads "$T/good" --layout bnd
# .npz (np.savez inputs, np.savez_compressed gradients) and .safetensors: the same numbers as the .npy folders.
"$A" score --inputs "$T/in" --grads "$T/bad" --layout bhnd --json --no-fail >"$T/j1" 2>/dev/null
run 0 "npz" --inputs "$T/in.npz" --grads "$T/bad.npz" --layout bhnd --json --no-fail
for o in o dq dk dv; do
  a=$("$J" "$T/j1" "runs.0.outputs.$o" | sed 's/,"fa_factor".*//')
  b=$("$J" "$T/out" "runs.0.outputs.$o" | sed 's/,"fa_factor".*//')
  [ -n "$a" ] && [ "$a" = "$b" ] || FAIL "tscore npz: $o differs from the .npy folder: $a / $b"
done
run 0 "safetensors" --inputs "$T/all.safetensors" --grads "$T/all.safetensors" --layout bhnd --rule all
run 2 "npz missing array" --inputs "$T/bad.npz" --grads "$T/bad.npz" --layout bhnd
grep -q "no array 'q' (members: o.npy, dq.npy, dk.npy, dv.npy)" "$T/err" || FAIL "tscore npz missing: $(cat "$T/err")"
# BF16 bits stored as '<i2' (torch's t.view(torch.int16)): refused without --bf16-bits, scored with it.
run 2 "'<i2' without --bf16-bits" --inputs "$T/bf" --grads "$T/bf" --layout bhnd
grep -q "'<i2'" "$T/err" || FAIL "tscore '<i2': message is $(cat "$T/err")"
run 0 "'<i2' --bf16-bits" --inputs "$T/bf" --grads "$T/bf" --layout bhnd --bf16-bits --rule fa,sdpa,abs-rel
grep -q "inputs bf16" "$T/out" || FAIL "tscore '<i2': inputs not read as bf16"
# An archive whose directory claims a 4 GiB member in 300 bytes (found by
# fuzz/fuzz_npz): refused with exit 2 and the member named. That the reader
# no longer allocates the claim is checked by the fuzz leg, which runs this
# file as a seed under a 2 GiB malloc limit.
big="${top_srcdir:-.}/fuzz/corpus/npz/declares-4gib.npz"
run 2 "npz with a false member size" --inputs "$big" --grads "$big" --layout bhnd
grep -q "declares-4gib.npz\[q.npy\]" "$T/err" || FAIL "tscore npz false size: $(cat "$T/err")"

# NaN in a kernel's output: counted, the first index named, no ratio against the oracle; the verdict line names
# only the rules that failed. dq gets NaN at [1, 2, 3, 4] (bhnd) and a later one.
mkdir -p "$T/nan" && cp "$T/good/"*.npy "$T/nan/"
"$py" - "$T/nan/dq.npy" <<'PY' || FAIL "tscore NaN: could not write dq"
import sys, numpy as np
a = np.load(sys.argv[1]); a[1, 2, 3, 4] = np.nan; a[1, 3, 0, 0] = np.nan; np.save(sys.argv[1], a)
PY
run 1 "NaN in dq" --inputs "$T/in" --grads "$T/nan" --layout bhnd --rule fa,sdpa
grep -q "dq fails the fa rule: 2 NaN and 0 Inf elements of 4096, the first at index (1, 2, 3, 4)" "$T/out" ||
  FAIL "tscore NaN: no count and first index: $(grep FAIL "$T/out" | head -2)"
grep -q "2 NaN FAIL" "$T/out" || FAIL "tscore NaN: the table shows a ratio, not the count"
grep -q "^verdict: external FAIL by fa, sdpa$" "$T/out" || FAIL "tscore NaN: verdict line $(grep verdict "$T/out")"
run 1 "dq * 1.008 with fa,torch,abs-rel" --inputs "$T/in" --grads "$T/bad" --layout bhnd --rule fa,torch,abs-rel
grep "^verdict:" "$T/out" | grep -q "abs-rel" && FAIL "tscore verdict names a rule that passed: $(grep verdict "$T/out")"

# A BF16 kernel whose tensors were saved as fp32: judged against an fp32 naive reference it fails fa by orders of
# magnitude, with a note saying so; --kernel-fmt bf16 judges it as the BF16 kernel it is; --kernel-fmt fp16 is
# refused (its values are not all fp16).
"$py" - "$T" <<'PY' || FAIL "tscore kernel-fmt: could not write the files"
import os, sys, numpy as np, torch
T = sys.argv[1]
g = torch.Generator().manual_seed(5)
q, k, v, do = (torch.randn(1, 2, 48, 16, generator=g).bfloat16().float() for i in range(4))
q[0, 0, 0, 0] = 2.0 ** -30  # a BF16 value that FP16 cannot hold
qb, kb, vb = (t.detach().bfloat16().requires_grad_() for t in (q, k, v))
o = torch.softmax((qb @ kb.transpose(-1, -2)) * 16 ** -0.5, dim=-1) @ vb  # math attention in BF16
o.backward(do.bfloat16())
for d, names, ts in ((T + "/f32in", ("q", "k", "v", "do"), (q, k, v, do)),
                     (T + "/f32out", ("o", "dq", "dk", "dv"), (o, qb.grad, kb.grad, vb.grad))):
    os.makedirs(d, exist_ok=True)
    for n, t in zip(names, ts):
        np.save(os.path.join(d, n + ".npy"), t.detach().float().numpy())
PY
run 1 "bf16 kernel saved as fp32" --inputs "$T/f32in" --grads "$T/f32out" --layout bhnd --rule fa
grep -q "every value is bf16" "$T/err" || FAIL "tscore kernel-fmt: no note about fp32-stored BF16 values: $(cat "$T/err")"
run 0 "bf16 kernel saved as fp32, --kernel-fmt bf16" --inputs "$T/f32in" --grads "$T/f32out" --layout bhnd --kernel-fmt bf16 \
  --rule fa
grep -q "^verdict: external PASS by fa" "$T/out" || FAIL "tscore kernel-fmt bf16: $(grep verdict "$T/out")"
# The default verdict (expect) judges the kernel's format from the values, with a warning; this kernel is torch's
# BF16 math attention, the naive-bf16 design, which fa2 (the default recipe) is more accurate than; named with
# --expect it passes.
run 1 "bf16 math kernel saved as fp32, expect fa2" --inputs "$T/f32in" --grads "$T/f32out" --layout bhnd
grep -q "warning: every input and output value is bf16" "$T/err" || FAIL "tscore expect: no warning: $(cat "$T/err")"
grep -q "^verdict: external FAIL by expect" "$T/out" || FAIL "tscore expect fa2: $(grep verdict "$T/out")"
run 0 "bf16 math kernel saved as fp32, expect naive-bf16" --inputs "$T/f32in" --grads "$T/f32out" --layout bhnd \
  --expect naive-bf16
grep -q "^expect: against naive-bf16" "$T/out" || FAIL "tscore expect naive-bf16: $(grep expect: "$T/out")"
run 2 "--kernel-fmt fp16 on bf16 values" --inputs "$T/f32in" --grads "$T/f32out" --layout bhnd --kernel-fmt fp16
grep -q "are not fp16" "$T/err" || FAIL "tscore kernel-fmt fp16: $(cat "$T/err")"

# --cache DIR: the second score of the same inputs reads the oracle from the cache (a note says so) and gives the
# same document but for the timings.
run 0 "cache, first" --inputs "$T/in" --grads "$T/good" --layout bhnd --cache "$T/oc" --json
grep -v '"seconds\|"oracle_seconds\|"emulation_seconds' "$T/out" >"$T/j1"
run 0 "cache, second" --inputs "$T/in" --grads "$T/good" --layout bhnd --cache "$T/oc" --json
grep -q "oracle read from the cache" "$T/err" || FAIL "tscore cache: the second run did not read the cache: $(cat "$T/err")"
grep -v '"seconds\|"oracle_seconds\|"emulation_seconds' "$T/out" | cmp -s - "$T/j1" || FAIL "tscore cache: the documents differ"

[ $fails -eq 0 ] || { echo "tscore_verdict: $fails failure(s)"; exit 1; }
echo "tscore_verdict: ok"
