"""attnacc: the default verdict (the expect rule, no rule given) fails every planted precision bug of an FA2-style
torch kernel and passes the correct kernels (run by tests/tpython.sh; the realistic shapes with
ATTNACC_CHECK_EXPENSIVE=1, which writes the ratio table to $ATTNACC_VERDICT_TABLE when set)."""
# SPDX-License-Identifier: LGPL-3.0-or-later
import json
import math
import os
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import attnacc  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from verdict_kernels import BUGS, fp32_math_kernel, inputs, kernels  # noqa: E402

OUTS = ("o", "dq", "dk", "dv")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
SMALL = (1, 4, 2, 256, 64)  # B, H, H_kv, N, d
LARGE = ((2, 8, 2, 1024, 128), (1, 16, 4, 4096, 64))
SEED = 20261202
# Within the legitimate variation of FA2-class kernels (README "The default verdict"): D from BF16 products moves
# rel_l2 by 1.05-1.07x, and the GQA head sum of BF16-rounded heads is what FA2 itself does (mha_bwd's
# dk_expanded): measured and tabulated, not asserted.
NOT_ASSERTED = ("gqa_sum_bf16", "d_bf16_products")
EXPENSIVE = os.environ.get("ATTNACC_CHECK_EXPENSIVE", "") not in ("", "0")


def _deciding(res):
    """(ratio, statistic, output) of the expect rule's worst output."""
    name = max(res.outputs, key=lambda n: (math.isnan(res[n].rules["expect"].ratio), res[n].rules["expect"].ratio))
    x = res[name].rules["expect"]
    return x.ratio, x.statistic, name


def _sets(ks):
    return [dict(zip(OUTS, ks[n])) for n in ks]


def _fp32_stored(ins, ks, causal, kernel_dtype):
    """The fa2 kernel's inputs and outputs stored as float32: scored with kernel_dtype declared or not."""
    f = [t.float() for t in ins]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        res = attnacc.score(*f, **dict(zip(OUTS, (t.float() for t in ks["fa2"]))), layout="bhnd", is_causal=causal,
                            kernel_dtype=kernel_dtype)
    return res, [str(x.message) for x in w if "kernel_dtype" in str(x.message)]


def verdicts(shape, mask, dtype, stored=True):
    """name -> Score of every kernel on one configuration, the fp32-stored fa2 kernel with and without
    kernel_dtype (when stored), and the warnings of the latter."""
    b, h, hkv, n, d = shape
    causal = mask == "causal"
    ins = inputs(b, h, hkv, n, d, DTYPES[dtype], SEED)
    ks = kernels(ins, causal)
    if not causal:
        del ks["causal_off_by_one"]  # no mask, no off-by-one
    out = dict(zip(ks, attnacc.score_many(*ins, _sets(ks), layout="bhnd", is_causal=causal)))
    if not stored:
        return out, None
    out["fp32_stored_declared"], _ = _fp32_stored(ins, ks, causal, dtype)
    out["fp32_stored_inferred"], warned = _fp32_stored(ins, ks, causal, None)
    return out, warned


def check(shape, mask, dtype):
    # the fp32-stored kernels cost two more oracles: at the realistic shapes on one configuration each
    stored = shape == SMALL or (mask, dtype) == ("causal", "bf16")
    res, warned = verdicts(shape, mask, dtype, stored)
    bad = []
    for name, r in res.items():
        assert r.rules == ("expect",), (name, r.rules)  # the default verdict
        ratio, stat, out = _deciding(r)
        want_pass = name not in BUGS
        if name not in NOT_ASSERTED and r.passed != want_pass:
            bad.append(f"{name}: {'passes' if r.passed else 'fails'} ({out} {stat} {ratio:.3g})")
    assert not bad, f"{shape} {mask} {dtype}: " + "; ".join(bad)
    if stored:
        assert warned, "no warning for fp32-stored values that are all " + dtype
        assert res["fp32_stored_inferred"].problem["kernel_fmt"] == dtype
    _table(shape, mask, dtype, res)
    return res


def _table(shape, mask, dtype, res):
    """Append one column of the ratio table (kernel -> deciding ratio, statistic, output) to
    $ATTNACC_VERDICT_TABLE as tab-separated lines."""
    path = os.environ.get("ATTNACC_VERDICT_TABLE")
    if not path:
        return
    b, h, hkv, n, d = shape
    with open(path, "a") as f:
        for name, r in res.items():
            ratio, stat, out = _deciding(r)
            # fa and sdpa only when their naive reference ran (not by default: the expect rule does not read it)
            other = "\t".join(f"{max(r[o].rules[x].ratio for o in r.outputs):.3g}"
                               if all(r[o].rules[x].applied for o in r.outputs) else "-" for x in ("fa", "sdpa", "abs-rel"))
            f.write(f"[{b}, {h} (kv {hkv}), {n}, {d}] {mask} {dtype}\t{name}\t{ratio:.3g}\t{stat}\t{out}\t"
                    f"{'pass' if r.passed else 'FAIL'}\t{other}\n")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mask", ["dense", "causal"])
def test_default_verdict_small(mask, dtype):
    check(SMALL, mask, dtype)


@pytest.mark.skipif(not EXPENSIVE, reason="realistic shapes: set ATTNACC_CHECK_EXPENSIVE=1 (minutes each)")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mask", ["dense", "causal"])
@pytest.mark.parametrize("shape", LARGE, ids=["2x8x1024x128", "1x16x4096x64"])
def test_default_verdict_large(shape, mask, dtype):
    check(shape, mask, dtype)


def test_statistics_against_numpy():
    """The systematic statistics and the expect rule's parts, recomputed here from the oracle's values (a second
    computation of the formulas of lib/score.h), on the dq x 1.008 bug and the correct kernel."""
    b, h, hkv, n, d = SMALL
    ins = inputs(b, h, hkv, n, d, torch.bfloat16, SEED)
    ks = kernels(ins, True)
    ref = attnacc.oracle(*ins, layout="bhnd", is_causal=True)
    res = attnacc.score_many(*ins, [dict(zip(OUTS, ks["fa2"])), dict(zip(OUTS, ks["dq_x1.008"]))], layout="bhnd",
                             is_causal=True)
    for r, name in zip(res, ("fa2", "dq_x1.008")):
        for o, t in zip(OUTS, ks[name]):
            a = t.to(torch.float64).numpy()
            bb = ref[o]
            e = a - bb
            s = (e * bb).sum() / (bb * bb).sum()
            rows_e = e.reshape(-1, d)
            rows_b = bb.reshape(-1, d)
            resid = (rows_e * rows_b).sum(1) - s * (rows_b * rows_b).sum(1)
            sigma = math.sqrt((resid ** 2).sum()) / (bb * bb).sum()
            heads = np.sqrt((e.reshape(b * e.shape[1], -1) ** 2).sum(1) / (bb.reshape(b * e.shape[1], -1) ** 2).sum(1))
            x = r[o]
            assert x.ls_scale == pytest.approx(s, rel=1e-9, abs=1e-15), (name, o)
            assert x.scale_sigma == pytest.approx(sigma, rel=1e-9), (name, o)
            assert x.row_err_max == pytest.approx(np.sqrt((rows_e ** 2).sum(1)).max(), rel=1e-12), (name, o)
            assert x.head_rel_l2_max == pytest.approx(heads.max(), rel=1e-12), (name, o)
            assert x.abs_q99 == pytest.approx(np.sort(np.abs(e).ravel())[math.ceil(0.99 * e.size) - 1], rel=1e-15)
            assert x.err_corr == pytest.approx((e * bb).sum() / math.sqrt((e * e).sum() * (bb * bb).sum()), rel=1e-9)
    # the planted 0.8 % scale, seen by the least-squares scale to within its own error
    assert res[1]["dq"].ls_scale == pytest.approx(0.008, abs=5e-4)
    assert abs(res[0]["dq"].ls_scale) < 8 * res[0]["dq"].scale_sigma
    st = res[1]["dq"].rules["expect"]
    assert st.statistic == "scale" and not st.passed and st.ratio == pytest.approx(
        abs(res[1]["dq"].ls_scale) / st.statistics["scale"]["limit"], rel=1e-12)


def test_score_equals_score_many():
    """score() is score_many() with one set: the same statistics and verdict."""
    b, h, hkv, n, d = 1, 2, 1, 64, 32
    ins = inputs(b, h, hkv, n, d, torch.bfloat16, SEED)
    ks = kernels(ins, False)
    one = attnacc.score(*ins, **dict(zip(OUTS, ks["lse_bf16"])), layout="bhnd")
    many = attnacc.score_many(*ins, [dict(zip(OUTS, ks["fa2"])), dict(zip(OUTS, ks["lse_bf16"]))], layout="bhnd")
    assert one.passed == many[1].passed
    for o in OUTS:
        assert one[o].rules["expect"].ratio == many[1][o].rules["expect"].ratio
        assert one[o].ls_scale == many[1][o].ls_scale


def test_expect_named_recipe_and_rule_choice():
    """--expect names the recipe (here fa2-h100); rule='fa' alone runs no recipe (expect not applied); fp64
    kernels keep torch as the default."""
    b, h, hkv, n, d = 1, 2, 1, 64, 32
    ins = inputs(b, h, hkv, n, d, torch.bfloat16, SEED)
    ks = kernels(ins, True)
    r = attnacc.score(*ins, **dict(zip(OUTS, ks["fa2"])), layout="bhnd", is_causal=True, expect="fa2-h100")
    assert r.problem["expect"] == "fa2-h100" and r.passed
    r = attnacc.score(*ins, **dict(zip(OUTS, ks["fa2"])), layout="bhnd", is_causal=True, rule="fa")
    assert r.rules == ("fa",) and not r["dq"].rules["expect"].applied and r.problem["expect"] is None
    gen = torch.Generator().manual_seed(SEED)
    d64 = [torch.randn(t.shape, generator=gen, dtype=torch.float64) for t in ins]
    r = attnacc.score(*d64, **dict(zip(OUTS, fp32_math_kernel(*d64, True))), layout="bhnd", is_causal=True)
    assert r.rules == ("torch",) and r.problem["kernel_fmt"] == "fp64"


# --rows K scores o and dq of K drawn query rows, and dk and dv of one kv head group drawn with them (every row of
# its query heads: exact, as each kv head's dk and dv sum over those rows only). What it cannot see: a bug in one
# row (dq_row_zero: row 129 of query head 0) unless that row is drawn; in one kv head's dk or dv, unless that kv
# head is drawn (none of these bugs: the dk and dv bugs span every head).
ROWS_K = 64
ROWS_BLIND = ("dq_row_zero",)


def test_rows_matches_full_verdict(tmp_path):
    """`attnacc score --rows 64` (a quarter of the small shape's 256 rows, and one of its 2 kv heads) gives the full
    default verdict's pass or fail on every kernel whose bug lives in o or dq across rows (the scale bugs dq x 1.002
    and x 1.008 included: the scale statistic's sigma is measured on the rows scored) or in dk and dv (dk x 1.005,
    dv_acc_bf16), and its document says o, dq, dk and dv were scored."""
    import subprocess
    cli = os.environ.get("ATTNACC_CLI")
    if not cli:
        pytest.skip("ATTNACC_CLI (the built experiments/attnacc) is not set")
    b, h, hkv, n, d = SMALL
    ins = inputs(b, h, hkv, n, d, torch.bfloat16, SEED)
    ks = kernels(ins, True)
    full = dict(zip(ks, attnacc.score_many(*ins, _sets(ks), layout="bhnd", is_causal=True)))

    def save(folder, names, ts):
        folder.mkdir()
        for name, t in zip(names, ts):
            np.save(folder / f"{name}.npy", t.contiguous().view(torch.int16).numpy().view("<u2"))  # BF16 bits

    save(tmp_path / "in", ("q", "k", "v", "do"), ins)
    bad = []
    for name, outs in ks.items():
        save(tmp_path / name, OUTS, outs)
        r = subprocess.run([cli, "score", "--inputs", str(tmp_path / "in"), "--grads", str(tmp_path / name),
                            "--layout", "bhnd", "--causal", "--rows", str(ROWS_K), "--json"],
                           capture_output=True, text=True)
        assert r.returncode in (0, 1), (name, r.stderr)
        doc = json.loads(r.stdout)
        assert doc["rows"]["k"] == ROWS_K and doc["rows"]["scored"] == ["o", "dq", "dk", "dv"], (name, doc["rows"])
        rows_pass = r.returncode == 0
        if name in ROWS_BLIND:
            assert rows_pass and not full[name].passed, (name, "a blind spot of --rows changed: update ROWS_BLIND")
        elif name not in NOT_ASSERTED and rows_pass != full[name].passed:
            bad.append(f"{name}: --rows {ROWS_K} {'passes' if rows_pass else 'fails'}, the full run "
                       f"{'passes' if full[name].passed else 'fails'}")
    assert not bad, "; ".join(bad)
