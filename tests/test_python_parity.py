# attnacc: the Python package expresses run's problems (softcap, ALiBi, bottom-right, two-sided windows, sinks,
# dropout keep mask, lse), reuses an oracle in memory (oracle=) and on disk (cache=, shared with the command), and
# runs the naive reference only for the rules that read it.
# SPDX-License-Identifier: LGPL-3.0-or-later
import math
import os
import subprocess

import numpy as np
import pytest
import torch

import attnacc

B, H, N, D = 1, 2, 48, 16


def draw(seed, nq=N, nk=N, b=B, h=H):
    g = torch.Generator().manual_seed(seed)
    q, do = (torch.randn(b, h, nq, D, generator=g).bfloat16() for _ in range(2))
    k, v = (torch.randn(b, h, nk, D, generator=g).bfloat16() for _ in range(2))
    return q, k, v, do


def reference(q, k, v, causal=False, align="top-left", window=None, softcap=0.0, slopes=None, form="flash",
              keep=None, p=0.0, sinks=None):
    """Attention's o and lse in float64 written from lib/problem.h's definitions (a second algorithm: dense
    torch, masks as boolean matrices), independent of the oracle's code."""
    q, k, v = (t.double() for t in (q, k, v))
    nq, nk = q.shape[-2], k.shape[-2]
    s = (q @ k.transpose(-1, -2)) * D ** -0.5
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(nq)[:, None]
    j = torch.arange(nk)[None, :]
    if slopes is not None:
        dist = -(i + nk - nq - j).abs() if form == "flash" else (j - i)
        s = s + torch.as_tensor(slopes, dtype=torch.float64)[..., None, None] * dist
    c = i + (nk - nq if align == "bottom-right" else 0)
    vis = torch.ones(nq, nk, dtype=torch.bool)
    if causal:
        vis &= j <= c
    if window is not None:
        left, right = window
        if left >= 0:
            vis &= j >= c - left
        if right >= 0:
            vis &= j <= c + right
    s = s.masked_fill(~vis, -math.inf)
    if sinks is not None:  # one extra logit per sink, in the normaliser only
        sk = torch.as_tensor(sinks, dtype=torch.float64)[None, :, None, :].expand(*s.shape[:-1], sinks.shape[-1])
        full = torch.cat([s, sk], -1)
    else:
        full = s
    lse = torch.logsumexp(full, -1)
    w = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    if keep is not None:
        w = w * torch.as_tensor(keep, dtype=torch.float64) / (1 - p)
    return (w @ v).numpy(), lse.numpy()


def close(a, b, tol=1e-13):
    scale = max(np.abs(b).max(), 1e-300)
    return np.abs(a - b).max() / scale < tol


@pytest.mark.parametrize("feat", [
    dict(softcap=5.0),
    dict(alibi_slopes=[0.25, -0.125]),
    dict(alibi_slopes=[0.25, -0.125], alibi_form="torch", is_causal=True),
    dict(window_size=(6, 3)),
    dict(is_causal=True, causal_align="bottom-right", nq=64, nk=40),
    dict(is_causal=True, window_size=(5, 0), softcap=3.0),
])
def test_features_match_a_second_algorithm(feat):
    feat = dict(feat)
    nq, nk = feat.pop("nq", N), feat.pop("nk", N)
    q, k, v, do = draw(1, nq, nk)
    orc = attnacc.oracle(q, k, v, do, layout="bhnd", **feat)
    win = feat.get("window_size")
    align = feat.get("causal_align", "bottom-right" if win else "top-left")
    o, lse = reference(q, k, v, causal=feat.get("is_causal", False), align=align, window=win,
                       softcap=feat.get("softcap", 0.0), slopes=feat.get("alibi_slopes"),
                       form=feat.get("alibi_form", "flash"))
    assert close(orc["o"], o)
    fin = np.isfinite(lse)
    assert (np.isneginf(orc["lse"]) == ~fin).all()
    assert np.abs(orc["lse"][fin] - lse[fin]).max() < 1e-12


def test_alibi_geometric_and_per_batch_slopes():
    q, k, v, do = draw(2, b=2)
    # alibi=True: the standard slopes of H = 2 heads, 2^-4 and 2^-8, the same for both batches
    geo = attnacc.oracle(q, k, v, do, layout="bhnd", alibi=True)
    o, _ = reference(q, k, v, slopes=[2.0 ** -4, 2.0 ** -8])
    assert close(geo["o"], o)
    per_b = attnacc.oracle(q, k, v, do, layout="bhnd", alibi_slopes=[[2.0 ** -4, 2.0 ** -8]] * 2)
    assert np.array_equal(per_b["o"], geo["o"])
    with pytest.raises(ValueError, match="alibi_slopes: 3 slopes"):
        attnacc.oracle(q, k, v, do, layout="bhnd", alibi_slopes=[1.0, 2.0, 3.0])


def test_sinks_and_dropout_keep_mask():
    q, k, v, do = draw(3)
    sinks = np.array([[0.5, -1.0], [2.0, 0.0]])
    orc = attnacc.oracle(q, k, v, do, layout="bhnd", sinks=sinks, is_causal=True)
    assert close(orc["o"], reference(q, k, v, causal=True, sinks=sinks)[0])
    keep = np.random.default_rng(4).random((B, H, N, N)) >= 0.3
    orc = attnacc.oracle(q, k, v, do, layout="bhnd", keep=keep, dropout_p=0.3)
    assert close(orc["o"], reference(q, k, v, keep=keep, p=0.3)[0])
    with pytest.raises(ValueError, match="keep holds 2304 values"):
        attnacc.oracle(q, k, v, do, layout="bhnd", keep=keep[:, :1], dropout_p=0.3)
    with pytest.raises(ValueError, match="both keep"):
        attnacc.oracle(q, k, v, do, layout="bhnd", keep=keep)


def test_lse_conventions():
    # bottom-right with n_q > n_k: the first 16 rows see no key; flash-attn writes +inf there, the oracle -inf
    q, k, v, do = draw(5, nq=64, nk=48)
    kw = dict(layout="bhnd", is_causal=True, causal_align="bottom-right", rule="abs-rel")
    orc = attnacc.oracle(q, k, v, do, layout="bhnd", is_causal=True, causal_align="bottom-right")
    lse = orc["lse"].astype(np.float32)
    assert np.isneginf(lse[..., :16]).all() and np.isfinite(lse[..., 16:]).all()
    flash = np.where(np.isneginf(lse), np.inf, lse)
    res = attnacc.score(q, k, v, do, lse=flash, **kw)
    assert res.passed and res["lse"].count == B * H * 64 and res["lse"].max_abs == np.abs(
        lse[..., 16:].astype(np.float64) - orc["lse"][..., 16:]).max()
    bad = flash.copy()
    bad[0, 1, 3] = 0.0  # a finite LSE where the row sees no key
    res = attnacc.score(q, k, v, do, lse=bad, **kw)
    assert not res.passed and res["lse"].nan == 1
    with pytest.raises(ValueError, match="lse"):
        attnacc.score(q, k, v, do, lse=flash[..., :10], **kw)


def test_oracle_reused_in_memory():
    q, k, v, do = draw(6)
    kw = dict(layout="bhnd", is_causal=True, softcap=4.0)
    orc = attnacc.oracle(q, k, v, do, **kw)
    o = torch.from_numpy(orc["o"]).bfloat16()
    dq = torch.from_numpy(orc["dq"] * 1.01).bfloat16()
    fresh = attnacc.score(q, k, v, do, o=o, dq=dq, **kw)
    reused = attnacc.score(q, k, v, do, o=o, dq=dq, oracle=orc, **kw)
    assert fresh.to_dict()["runs"] == reused.to_dict()["runs"]
    # another problem (no softcap), other inputs or another oracle path: refused, never silently wrong
    with pytest.raises(ValueError, match="computed for other inputs"):
        attnacc.score(q, k, v, do, o=o, layout="bhnd", is_causal=True, oracle=orc)
    with pytest.raises(ValueError, match="computed for other inputs"):
        attnacc.score(q, k, v, do * 2, o=o, oracle=orc, **kw)
    orc.release()
    with pytest.raises(ValueError, match="released"):
        attnacc.score(q, k, v, do, o=o, oracle=orc, **kw)


def test_cache_shared_with_the_command(tmp_path):
    q, k, v, do = draw(7)
    kw = dict(layout="bhnd", window_size=(8, 2), alibi=True)
    cache = tmp_path / "cache"
    orc = attnacc.oracle(q, k, v, do, cache=cache, **kw)
    files = os.listdir(cache)
    assert len(files) == 1 and files[0].endswith(".aaoc")
    again = attnacc.oracle(q, k, v, do, cache=cache, **kw)
    assert np.array_equal(again["dq"], orc["dq"]) and os.listdir(cache) == files
    cli = os.environ.get("ATTNACC_CLI")
    if not cli:
        pytest.skip("ATTNACC_CLI is not set (tests/tpython.sh sets it)")
    d = tmp_path / "in"
    d.mkdir()
    for n, t in zip(("q", "k", "v", "do", "o", "dq", "dk", "dv"),
                    (q, k, v, do, *(torch.from_numpy(orc[x]).bfloat16() for x in ("o", "dq", "dk", "dv")))):
        np.save(d / f"{n}.npy", t.view(torch.int16).numpy().astype(np.uint16))
    r = subprocess.run([cli, "score", "--inputs", str(d), "--grads", str(d), "--layout", "bhnd", "--window", "8,2",
                        "--alibi", "--cache", str(cache), "--rule", "abs-rel"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "oracle read from the cache" in r.stderr and os.listdir(cache) == files


def test_naive_reference_only_for_its_rules():
    q, k, v, do = draw(8)
    orc = attnacc.oracle(q, k, v, do, layout="bhnd")
    o = torch.from_numpy(orc["o"]).bfloat16()
    res = attnacc.score(q, k, v, do, o=o, layout="bhnd", rule="abs-rel", oracle=orc)
    assert not res["o"].rules["fa"].applied and not res["o"].rules["sdpa"].applied
    res = attnacc.score(q, k, v, do, o=o, layout="bhnd", rule=["abs-rel", "sdpa"], oracle=orc)
    assert res["o"].rules["fa"].applied and res["o"].rules["sdpa"].applied


@pytest.mark.parametrize("kw, err, match", [
    (dict(causal_align="diagonal"), ValueError, "causal_align"),
    (dict(softcap=-1.0), ValueError, "softcap"),
    (dict(softcap="5"), TypeError, "softcap"),
    (dict(alibi=True, alibi_form="linear"), ValueError, "alibi_form"),
    (dict(window_size=(4,)), TypeError, "window_size"),
    (dict(window_size=(-2, 0)), ValueError, "window_size"),
    (dict(keep=np.ones((B, H, N, N)), dropout_p=1.0), ValueError, "dropout_p"),
    (dict(keep=np.full((B, H, N, N), 2.0), dropout_p=0.1), ValueError, "keep holds values"),
    (dict(sinks=np.zeros((1, 2, 3))), ValueError, "sinks"),
    (dict(oracle=3), TypeError, "attnacc.Oracle"),
])
def test_new_arguments_refused_before_c(kw, err, match):
    q, k, v, do = draw(9)
    with pytest.raises(err, match=match):
        attnacc.oracle(q, k, v, do, layout="bhnd", **kw)


def test_expect_rule_requires_a_finite_lse_only():
    """The default rule (expect) has no band for the lse: an lse off by a constant passes it while torch's
    tolerance fails it, and a NaN in the lse fails it (lib/score.h, aa_score_apply_expect_finite)."""
    q, k, v, do = draw(9)
    orc = attnacc.oracle(q, k, v, do, layout="bhnd")
    o = torch.from_numpy(orc["o"]).bfloat16()
    off = (orc["lse"] + 0.5).astype(np.float32)
    res = attnacc.score(q, k, v, do, o=o, lse=off, layout="bhnd", oracle=orc)
    x = res["lse"].rules["expect"]
    assert res.rules == ("expect",) and x.applied and x.passed and x.ratio == 0
    assert not res["lse"].rules["torch"].passed
    bad = off.copy()
    bad[0, 0, 0] = np.nan
    res = attnacc.score(q, k, v, do, o=o, lse=bad, layout="bhnd", oracle=orc)
    assert not res.passed and not res["lse"].rules["expect"].passed
