#!/bin/sh
# attnacc: `attnacc score` expresses run's problems: the same oracle bits for softcap, ALiBi, bottom-right, windows and sinks, one shared --cache entry (naive reference and expect recipe included), the kernel's keep mask and lse, and --rows K (its drawn rows and its kv head group) against the full score.
# SPDX-License-Identifier: LGPL-3.0-or-later
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
A="$top_builddir/experiments/attnacc"
py=
for cand in "${PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$cand" ] || continue
  if "$cand" -c 'import numpy, torch' >/dev/null 2>&1; then
    py=$cand
    break
  fi
done
[ -n "$py" ] || { echo "SKIP: no python3 with numpy and torch (apt-get install python3-numpy python3-torch)"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/tparity.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
FAIL() { echo "FAIL $*"; fails=$((fails + 1)); }
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# run --save writes BF16 arrays as '<u2' bit patterns: load() gives their values as float64.
export PYTHONPATH="$T${PYTHONPATH:+:$PYTHONPATH}"
cat >"$T/bf.py" <<'PY'
import numpy as np
def load(path):
    a = np.load(path)
    if a.dtype == np.uint16:
        a = (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float64)
PY

# 1. Same oracle bits: run draws and saves the inputs, its fa2 outputs and its oracle; score reads them back with
# the same problem options (run's options that give shapes, --n-q and --sinks K, come from the arrays in score).
# Every oracle file must be identical byte for byte, and score --cache must hit the entry run --cache stored (one
# key for both commands). score certifies its oracle to 2^-32 unless told otherwise (aa_score_oracle_target), run
# to 2^-48: run is given score's target, so the two ask for one oracle.
ST="--oracle-target 2^-32"
parity() { # NAME "RUN OPTIONS" "SCORE OPTIONS"
  name=$1
  "$A" run --variant fa2 --n 48 --d 16 --heads 2 $2 $ST --save "$T/r_$name" --save-oracle "$T/ro_$name" \
    --cache "$T/cache_$name" >/dev/null 2>"$T/err" || { FAIL "$name: run failed: $(cat "$T/err")"; return; }
  "$A" score --inputs "$T/r_$name" --grads "$T/r_$name" $3 --save-oracle "$T/so_$name" --no-fail \
    --cache "$T/cache_$name" >"$T/out" 2>"$T/err" || { FAIL "$name: score failed: $(cat "$T/err")"; return; }
  grep -q "oracle read from the cache" "$T/err" || FAIL "$name: score did not find run's oracle in the cache"
  for x in o lse dq dk dv dsinks; do
    [ -f "$T/ro_$name/$x.npy" ] || continue
    cmp -s "$T/ro_$name/$x.npy" "$T/so_$name/$x.npy" || FAIL "$name: oracle $x differs between run and score"
  done
  grep -q "^external *lse" "$T/out" || FAIL "$name: score did not score run's lse.npy"
}
printf '0.25 -0.125\n' >"$T/slopes"
parity softcap "--softcap 5" "--softcap 5"
parity alibi "--alibi" "--alibi"
parity alibi_torch "--alibi-slopes $T/slopes --alibi-form torch --causal" \
  "--alibi-slopes $T/slopes --alibi-form torch --causal"
parity bottom_right "--n-q 64 --causal --causal-align bottom-right" "--causal --causal-align bottom-right"
parity window_lr "--window 8,4" "--window 8,4"
parity window_causal "--window 6 --causal" "--window 6 --causal"
parity sinks "--sinks 2 --causal" "--causal"

# 2. ALiBi with a batch: run's 4 heads read as [B=2, H=2, N, d] take score's 2 slopes for every batch, which is
# run's 4 slopes a b a b (the folded heads); without --alibi-form both are flash's.
printf '0.25 -0.125 0.25 -0.125\n' >"$T/slopes4"
"$A" run --variant fa2 --n 32 --d 8 --heads 4 --alibi-slopes "$T/slopes4" $ST --save "$T/r_b" --save-oracle "$T/ro_b" \
  >/dev/null 2>&1 || FAIL "alibi batch: run failed"
"$py" - "$T" <<'PY' || FAIL "alibi batch: could not reshape the arrays"
import sys, numpy as np, os
T = sys.argv[1]
os.makedirs(T + "/b", exist_ok=True)
for n in ("q", "k", "v", "do", "o", "dq", "dk", "dv"):
    a = np.load(f"{T}/r_b/{n}.npy")
    np.save(f"{T}/b/{n}.npy", a.reshape(2, 2, *a.shape[1:]))
PY
"$A" score --inputs "$T/b" --grads "$T/b" --layout bhnd --alibi-slopes "$T/slopes" --save-oracle "$T/so_b" \
  --no-fail >/dev/null 2>"$T/err" || FAIL "alibi batch: score failed: $(cat "$T/err")"
for x in o dq dk dv; do
  cmp -s "$T/ro_b/$x.npy" "$T/so_b/$x.npy" || FAIL "alibi batch: oracle $x differs (slopes not repeated per batch)"
done

# 3. lse where a row sees no key (bottom-right, n_q > n_k): run saves -Inf there; flash-attn's +Inf is accepted
# too, a finite value there fails (exit 1), and a wrongly shaped lse is bad input (exit 2).
"$py" - "$T" <<'PY' || FAIL "lse: could not write the variants"
import sys, shutil, numpy as np
T = sys.argv[1]
lse = np.load(T + "/r_bottom_right/lse.npy")
assert np.isneginf(lse[:, :16]).all() and np.isfinite(lse[:, 16:]).all(), "run's lse of rows without keys"
for name, edit in (("plus", lambda l: np.where(np.isneginf(l), np.inf, l)), ("finite", None), ("shape", None)):
    shutil.copytree(T + "/r_bottom_right", f"{T}/lse_{name}")
    l = lse.copy()
    if name == "plus":
        l = edit(l)
    elif name == "finite":
        l[1, 3] = 0.5
    else:
        l = l[:, :10]
    np.save(f"{T}/lse_{name}/lse.npy", l)
PY
st() { "$A" score --inputs "$T/lse_$1" --grads "$T/lse_$1" --causal --causal-align bottom-right >"$T/out" 2>"$T/err"; echo $?; }
[ "$(st plus)" = 0 ] || FAIL "lse: flash-attn's +Inf for rows without keys was not accepted: $(cat "$T/err")"
[ "$(st finite)" = 1 ] || FAIL "lse: a finite lse where the row sees no key passed"
grep -q "lse fails .* first at index (1, 3)" "$T/err" || FAIL "lse: the failure does not name (1, 3): $(cat "$T/err")"
[ "$(st shape)" = 2 ] || FAIL "lse: a [2, 10] lse was not refused as bad input"

# 4. Dropout with the kernel's keep mask: the oracle's o equals torch's FP64 attention with that mask and the
# 1/(1-p) rescale (within 1e-13 relative); a keep mask without --dropout, or values other than 0/1, are refused.
"$py" - "$T" <<'PY' || FAIL "dropout: could not write the reference"
import sys, shutil, numpy as np, torch
T = sys.argv[1]
shutil.copytree(T + "/r_softcap", T + "/drop")
from bf import load
q, k, v = (torch.from_numpy(load(f"{T}/drop/{n}.npy")) for n in ("q", "k", "v"))
g = np.random.default_rng(7)
keep = (g.random((2, 48, 48)) >= 0.25).astype(np.float32)
np.save(T + "/drop/keep.npy", keep)
p = torch.softmax(5 * torch.tanh((q @ k.transpose(1, 2)) * 0.25 / 5), -1)
np.save(T + "/drop_ref.npy", ((p * torch.from_numpy(keep).double() / 0.75) @ v).numpy())
shutil.copytree(T + "/drop", T + "/drop_bad")
keep[0, 0, 0] = 0.5
np.save(T + "/drop_bad/keep.npy", keep)
PY
"$A" score --inputs "$T/drop" --grads "$T/drop" --softcap 5 --dropout 0.25 --save-oracle "$T/so_drop" --no-fail \
  >/dev/null 2>"$T/err" || FAIL "dropout: score failed: $(cat "$T/err")"
"$py" -c "
import sys, numpy as np
a, b = np.load('$T/so_drop/o.npy'), np.load('$T/drop_ref.npy')
e = np.abs(a - b).max() / np.abs(b).max()
sys.exit(0 if e < 1e-13 else print('relative difference', e) or 1)" || FAIL "dropout: the oracle's o is not torch's"
"$A" score --inputs "$T/drop" --grads "$T/drop" --softcap 5 >/dev/null 2>&1
[ $? = 2 ] || FAIL "dropout: a keep mask without --dropout was not refused"
"$A" score --inputs "$T/drop_bad" --grads "$T/drop_bad" --softcap 5 --dropout 0.25 >/dev/null 2>&1
[ $? = 2 ] || FAIL "dropout: a keep mask holding 0.5 was not refused"

# 5. --rows K: the measures of o and dq over the drawn rows are those numpy computes from the full oracle on
# exactly those rows (indices in the caller's rows); planted bugs (o * 1.02, dq * 1.05, dk * 1.05) fail the default
# rule in both the full and the subsampled score, the kernel's own outputs pass both; ALiBi is refused.
"$A" run --variant fa2 --n 256 --d 16 --heads 2 --causal $ST --save "$T/big" --save-oracle "$T/big_or" >/dev/null 2>&1 ||
  FAIL "rows: run failed"
"$A" score --inputs "$T/big" --grads "$T/big" --causal --rows 24 --rows-seed 5 --json >"$T/rows.json" 2>"$T/err" ||
  FAIL "rows: score --rows failed: $(cat "$T/err")"
"$py" - "$T" <<'PY' || FAIL "rows: the subsample's measures are not the full oracle's on those rows"
import sys, json, numpy as np
from bf import load
T = sys.argv[1]
d = json.load(open(T + "/rows.json"))
rows = d["rows"]["rows"]
assert d["rows"]["k"] == 24 and len(set(rows)) == 24 and rows == sorted(rows) and max(rows) < 256, d["rows"]
assert d["rows"]["scored"] == ["o", "dq", "dk", "dv", "lse"], d["rows"]["scored"]
out = d["runs"][0]["outputs"]
for n in ("o", "dq"):
    got = load(f"{T}/big/{n}.npy")[:, rows]
    ref = np.load(f"{T}/big_or/{n}.npy")[:, rows]
    err = np.abs(got - ref)
    assert out[n]["max_abs"] == err.max(), (n, out[n]["max_abs"], err.max())
    idx = list(np.unravel_index(err.argmax(), err.shape))
    idx[1] = rows[idx[1]]
    assert out[n]["robust"]["worst_abs"]["index"] == idx, (n, out[n]["robust"]["worst_abs"]["index"], idx)
PY
"$py" - "$T" <<'PY' || FAIL "rows: could not plant the bugs"
import sys, shutil, numpy as np
from bf import load
T = sys.argv[1]
for name, out, f in (("bad_o", "o", 1.02), ("bad_dq", "dq", 1.05), ("bad_dk", "dk", 1.05)):
    shutil.copytree(T + "/big", f"{T}/{name}")
    np.save(f"{T}/{name}/{out}.npy", (load(f"{T}/big/{out}.npy") * f).astype(np.float32))
PY
for c in big:0 bad_o:1 bad_dq:1 bad_dk:1; do
  dir=${c%%:*}
  want=${c#*:}
  "$A" score --inputs "$T/$dir" --grads "$T/$dir" --causal --kernel-fmt bf16 >/dev/null 2>&1
  full=$?
  "$A" score --inputs "$T/$dir" --grads "$T/$dir" --causal --kernel-fmt bf16 --rows 32 >/dev/null 2>&1
  sub=$?
  [ "$full" = "$want" ] || FAIL "rows: $dir: the full score exits $full, expected $want"
  [ "$sub" = "$full" ] || FAIL "rows: $dir: --rows 32 exits $sub, the full score $full"
done
"$A" score --inputs "$T/r_alibi" --grads "$T/r_alibi" --alibi --rows 8 >/dev/null 2>"$T/err"
[ $? = 2 ] && grep -q "ALiBi" "$T/err" || FAIL "rows: --rows with ALiBi was not refused naming it"

# --rows scores dk and dv on one kv head group: GQA with a batch ([2, 4, 64, 16] queries, 2 kv heads per batch;
# --rows-seed 5 draws the folded kv head 3, batch 1 kv head 1, so every index is moved). Its dk and dv statistics
# and rules must be those of a full score (no --rows) of that group's arrays alone, sliced here with numpy, their
# indices moved to the caller's (batch, kv head); and its max_abs that of numpy against run's oracle of the whole
# problem on that kv head.
"$A" run --variant fa2 --n 64 --d 16 --heads 8 --kv-heads 4 --causal $ST --save "$T/gqa" --save-oracle "$T/gqa_or" \
  >/dev/null 2>&1 || FAIL "rows kv group: run failed"
"$py" - "$T" <<'PY' || FAIL "rows kv group: could not write the batched arrays"
import sys, os, numpy as np
T = sys.argv[1]
os.makedirs(T + "/gb")
for n in ("q", "k", "v", "do", "o", "dq", "dk", "dv", "lse"):
    a = np.load(f"{T}/gqa/{n}.npy")  # folded [B*H, ...]: batch-major, as bhnd folds it
    np.save(f"{T}/gb/{n}.npy", a.reshape(2, a.shape[0] // 2, *a.shape[1:]))
PY
"$A" score --inputs "$T/gb" --grads "$T/gb" --layout bhnd --causal --rows 16 --rows-seed 5 --rule all --no-fail \
  --json >"$T/grows.json" 2>"$T/err" || FAIL "rows kv group: score --rows failed: $(cat "$T/err")"
grep -q "not scored" "$T/err" && FAIL "rows kv group: a note still says something is not scored: $(cat "$T/err")"
"$py" - "$T" <<'PY' || FAIL "rows kv group: could not slice the group"
import sys, os, json, numpy as np
T = sys.argv[1]
g = json.load(open(T + "/grows.json"))["rows"]
assert g["scored"] == ["o", "dq", "dk", "dv", "lse"], g["scored"]
kv = g["kv_group"]
assert (kv["index"], kv["batch"], kv["kv_head"], kv["query_heads"]) == (3, 1, 1, [6, 7]), kv  # else pick a seed
b, hk = kv["batch"], kv["kv_head"]
os.makedirs(T + "/gs")
for n in ("q", "do", "o", "dq", "lse"):
    np.save(f"{T}/gs/{n}.npy", np.load(f"{T}/gb/{n}.npy")[b:b + 1, 2 * hk:2 * hk + 2])
for n in ("k", "v", "dk", "dv"):
    np.save(f"{T}/gs/{n}.npy", np.load(f"{T}/gb/{n}.npy")[b:b + 1, hk:hk + 1])
PY
"$A" score --inputs "$T/gs" --grads "$T/gs" --layout bhnd --causal --rule all --no-fail --json >"$T/gfull.json" \
  2>"$T/err" || FAIL "rows kv group: the full score of the group failed: $(cat "$T/err")"
"$py" - "$T" <<'PY' || FAIL "rows kv group: dk, dv of --rows are not the full score's of the group"
import sys, json, numpy as np
from bf import load
T = sys.argv[1]
rows, full = (json.load(open(f"{T}/{f}.json")) for f in ("grows", "gfull"))
kv = rows["rows"]["kv_group"]
gk, b, hk = kv["index"], kv["batch"], kv["kv_head"]
n_k = 64

def moved(x, key=None):
    """The group score's document with its indices moved to the caller's [B, H_kv] (bhnd: [b, h, n, d])."""
    if isinstance(x, dict):
        return {k: moved(v, k) for k, v in x.items()}
    if key in ("index", "worst_index"):
        return [x[0] + b, x[1] + hk] + x[2:]
    return {"row_worst": lambda: x + gk * n_k, "head_worst": lambda: x + gk}.get(key, lambda: x)()

for n in ("dk", "dv"):
    got, want = rows["runs"][0]["outputs"][n], moved(full["runs"][0]["outputs"][n])
    assert got == want, (n, [k for k in want if got.get(k) != want[k]])
    err = np.abs(load(f"{T}/gqa/{n}.npy")[gk] - np.load(f"{T}/gqa_or/{n}.npy")[gk])
    assert got["max_abs"] == err.max(), (n, got["max_abs"], err.max())
    idx = [b, hk] + [int(i) for i in np.unravel_index(err.argmax(), err.shape)]
    assert got["robust"]["worst_abs"]["index"] == idx, (n, got["robust"]["worst_abs"]["index"], idx)
PY

# 6. The naive reference runs only for the rules that read it: with --rule abs-rel the fa and sdpa rules are not
# applied (and --rule fa applies them).
"$A" score --inputs "$T/big" --grads "$T/big" --causal --rule abs-rel --json >"$T/nf.json" 2>/dev/null ||
  FAIL "naive: score --rule abs-rel failed"
"$py" -c "
import json, sys
r = json.load(open('$T/nf.json'))['runs'][0]['outputs']['dq']['rules']
sys.exit(0 if not r['fa']['applied'] and not r['sdpa']['applied'] and r['abs-rel']['applied'] else 1)" ||
  FAIL "naive: --rule abs-rel still ran the naive reference"
# Nor by default: the expect rule reads nothing of it (fa and sdpa not applied, expect applied).
"$A" score --inputs "$T/big" --grads "$T/big" --causal --json >"$T/nd.json" 2>/dev/null ||
  FAIL "naive: score (default rule) failed"
"$py" -c "
import json, sys
r = json.load(open('$T/nd.json'))['runs'][0]['outputs']['dq']['rules']
sys.exit(0 if not r['fa']['applied'] and not r['sdpa']['applied'] and r['expect']['applied'] else 1)" ||
  FAIL "naive: the default rule ran the naive reference"

# 7. --cache keeps the naive reference's errors and the expect recipe's statistics too: a second score of the same
# inputs reads the three entries, emulates nothing and prints the same document (but the timings); --rule all runs
# both references.
for i in 1 2; do
  "$A" score --inputs "$T/big" --grads "$T/big" --causal --cache "$T/nc" --rule all --no-fail --json \
    >"$T/nc$i.json" 2>"$T/nc$i.err" ||
    FAIL "naive cache: score $i failed"
done
grep -q "naive reference's errors read from the cache" "$T/nc2.err" || FAIL "naive cache: the second score emulated"
grep -q "naive reference's errors read" "$T/nc1.err" && FAIL "naive cache: the first score found an entry"
grep -q "expect recipe's statistics read from the cache" "$T/nc2.err" || FAIL "expect cache: the second score emulated"
grep -q "expect recipe's statistics read" "$T/nc1.err" && FAIL "expect cache: the first score found an entry"
"$py" -c "
import json, sys
a, b = (json.load(open('$T/nc%d.json' % i)) for i in (1, 2))
for d in (a, b):
    d['oracle'].pop('seconds')
    d['runs'][0].pop('emulation_seconds')
r = a['runs'][0]['outputs']['dq']['rules']
sys.exit(0 if a == b and r['fa']['applied'] and r['expect']['applied'] else 1)" ||
  FAIL "naive cache: the warm document differs from the cold one"

[ "$fails" = 0 ] || exit 1
echo "tscore_parity: all checks passed"
