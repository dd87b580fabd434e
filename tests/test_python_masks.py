"""attnacc: tests of attn_mask, key_len and logit_offset in the Python package against a float64 numpy reference
written here, torch's math attention with a mask, and the causal problem (run by tests/tpython.sh)."""
# SPDX-License-Identifier: LGPL-3.0-or-later
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import attnacc  # noqa: E402

B, H, HKV, NQ, NK, D = 2, 2, 1, 7, 11, 8
SEED = 20261202


def inputs(dtype=np.float64):
    rng = np.random.default_rng(SEED)
    bf = lambda *s: torch.tensor(rng.standard_normal(s)).to(torch.bfloat16).to(torch.float64).numpy()  # noqa: E731
    return bf(B, H, NQ, D), bf(B, HKV, NK, D), bf(B, HKV, NK, D), bf(B, H, NQ, D)


def reference(q, k, v, do, bias4, offset=0.0):
    """SDPA's definition in float64 with an additive mask [B|1, H|1, NQ, NK] (-inf masks); rows with no key give
    O = 0, LSE = -inf and no gradient (lib/problem.h)."""
    g = H // HKV
    kr, vr = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = q @ kr.transpose(0, 1, 3, 2) / np.sqrt(D) + np.broadcast_to(bias4, (B, H, NQ, NK)) + offset
    vis = np.isfinite(s)
    mx = np.where(vis.any(-1, keepdims=True), np.max(np.where(vis, s, -np.inf), -1, keepdims=True), 0)
    e = np.where(vis, np.exp(np.where(vis, s - mx, 0)), 0)
    z = e.sum(-1, keepdims=True)
    p = np.where(z > 0, e / np.where(z > 0, z, 1), 0)
    lse = np.where(z[..., 0] > 0, mx[..., 0] + np.log(np.where(z[..., 0] > 0, z[..., 0], 1)), -np.inf)
    o = p @ vr
    dp = do @ vr.transpose(0, 1, 3, 2)
    ds = p * (dp - (do * o).sum(-1, keepdims=True)) / np.sqrt(D)
    dq = ds @ kr
    dk = (ds.transpose(0, 1, 3, 2) @ q).reshape(B, HKV, g, NK, D).sum(2)
    dv = (p.transpose(0, 1, 3, 2) @ do).reshape(B, HKV, g, NK, D).sum(2)
    return {"o": o, "lse": lse, "dq": dq, "dk": dk, "dv": dv}


def close(got, want, what):
    scale = np.max(np.abs(want[np.isfinite(want)])) if np.isfinite(want).any() else 1.0
    fin = np.isfinite(want)
    assert np.array_equal(got[~fin], want[~fin]), f"{what}: non-finite entries differ"
    err = np.max(np.abs(got[fin] - want[fin])) if fin.any() else 0.0
    assert err <= 1e-12 * scale, f"{what}: max error {err} against the reference (scale {scale})"


def test_oracle_float_mask_key_len_offset():
    q, k, v, do = inputs()
    rng = np.random.default_rng(SEED + 1)
    m = np.where(rng.random((B, 1, NQ, NK)) < 0.25, -np.inf, np.round(rng.standard_normal((B, 1, NQ, NK)) * 16) / 8)
    m[1, 0, 3, :] = -np.inf  # a fully masked row in batch element 1
    lens = [9, 11]
    full = m.copy()
    full[0, ..., 9:] = -np.inf
    for offset in (0.0, -150.0, 120.0):
        got = attnacc.oracle(q, k, v, do, layout="bhnd", attn_mask=m, key_len=lens, logit_offset=offset)
        want = reference(q, k, v, do, full, offset)
        for name in ("o", "lse", "dq", "dk", "dv"):
            close(got[name], want[name], f"{name} (offset {offset})")
    assert got["lse"][1, 0, 3] == -np.inf and got["lse"][1, 1, 3] == -np.inf
    assert np.all(got["o"][1, :, 3] == 0) and np.all(got["dq"][1, :, 3] == 0)


def test_oracle_bool_mask_is_causal():
    q, k, v, do = inputs()
    causal = np.tril(np.ones((NQ, NK), dtype=bool))
    a = attnacc.oracle(q, k, v, do, layout="bhnd", is_causal=True)
    b = attnacc.oracle(q, k, v, do, layout="bhnd", attn_mask=torch.tensor(causal))
    for name in ("o", "lse", "dq", "dk", "dv"):
        # the causal problem runs the tiled kernel, the masked one the row kernel: equal within the certified bound
        assert np.allclose(a[name], b[name], rtol=1e-13, atol=1e-300), name


def test_emulate_bool_mask_gives_causal_bits():
    q, k, v, do = inputs()
    causal = np.tril(np.ones((NQ, NK), dtype=bool))
    for recipe in ("fa2", "naive-bf16"):
        a = attnacc.emulate(recipe, q, k, v, do, layout="bhnd", is_causal=True)
        b = attnacc.emulate(recipe, q, k, v, do, layout="bhnd", attn_mask=causal[None, None])
        for name in ("o", "dq", "dk", "dv"):
            assert np.array_equal(a[name], b[name]), f"{recipe} {name}"


def test_emulate_bool_mask_reaches_the_fill():
    """cuDNN receives a boolean mask as an additive -65536, not -Inf (README-gpu 8.6; cudnn-h100's mask.score =
    fill): a fully masked row is then a softmax over its own shifted scores, finite and non-zero, where the same
    mask given as a float -Inf mask leaves the row empty (O = 0). fa2 scores both as -Inf."""
    q, k, v, do = inputs()
    keep = np.ones((1, 1, NQ, NK), dtype=bool)
    keep[..., 3, :] = False  # row 3 fully masked
    neg = np.where(keep, 0.0, -np.inf)
    a = attnacc.emulate("cudnn-h100", q, k, v, do, layout="bhnd", attn_mask=keep)
    b = attnacc.emulate("cudnn-h100", q, k, v, do, layout="bhnd", attn_mask=neg)
    assert np.all(np.isfinite(a["o"][:, :, 3])) and np.any(a["o"][:, :, 3] != 0), "bool: the fill did not apply"
    assert np.all(b["o"][:, :, 3] == 0), "float -inf: the row should be empty"
    assert np.array_equal(np.delete(a["o"], 3, axis=2), np.delete(b["o"], 3, axis=2)), "other rows differ"
    c = attnacc.emulate("fa2", q, k, v, do, layout="bhnd", attn_mask=keep)
    assert np.all(c["o"][:, :, 3] == 0), "fa2 has no fill: the row is empty"


def test_score_torch_math_with_mask():
    """torch's math attention with a boolean mask and a fully masked row (whose softmax is NaN there): its
    outputs elsewhere pass; the NaN row is counted as NaN and fails."""
    q, k, v, do = (torch.tensor(x, dtype=torch.float64) for x in inputs())
    mask = torch.rand(B, 1, NQ, NK, generator=torch.Generator().manual_seed(SEED)) > 0.3
    mask[..., 0] = True
    mask[0, 0, 2, :] = False
    s = (q @ k.repeat_interleave(2, 1).transpose(-1, -2)) / D ** 0.5
    o = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ v.repeat_interleave(2, 1)  # SDPA's math backend
    res = attnacc.score(q, k, v, do, o=o.detach(), layout="bhnd", attn_mask=mask, rule="torch")
    assert res.outputs["o"].nan == 2 * D and not res.passed
    o2 = torch.nan_to_num(o.detach(), nan=0.0)
    res2 = attnacc.score(q, k, v, do, o=o2, layout="bhnd", attn_mask=mask, rule="torch")
    assert res2.passed and res2.outputs["o"].nan == 0


def test_mask_errors():
    q, k, v, do = inputs()
    with pytest.raises(Exception, match="attn_mask|mask"):
        attnacc.oracle(q, k, v, do, layout="bhnd", attn_mask=np.zeros((3, 1, NQ, NK)))
    with pytest.raises(Exception, match="key length|key_len"):
        attnacc.oracle(q, k, v, do, layout="bhnd", key_len=[3, 4, 5])
    with pytest.raises(TypeError, match="attn_mask"):
        attnacc.oracle(q, k, v, do, layout="bhnd", attn_mask=np.zeros((NQ, NK), dtype=np.int32))


@pytest.mark.parametrize("dist", ["huge-keys", "massive", "constant"])
def test_draw_is_runs_draw(tmp_path, dist):
    """attnacc.draw gives the inputs `attnacc run --save` draws for the same options, bit for bit."""
    cli = os.environ.get("ATTNACC_CLI")
    if not cli or not os.path.exists(cli):
        pytest.skip("ATTNACC_CLI (the attnacc command) is not set")
    subprocess.run([cli, "run", "--variant", "fa2", "--n", "64", "--d", "8", "--heads", "2", "--kv-heads", "1",
                    "--seed", "5", "--dist", dist, "--sigma", "3", "--save", str(tmp_path)], check=True,
                   stdout=subprocess.DEVNULL)
    got = attnacc.draw(64, 8, heads=2, kv_heads=1, seed=5, dist=dist, sigma=3)
    for name in ("q", "k", "v", "do"):
        bits = np.load(tmp_path / f"{name}.npy").astype(np.uint32) << 16
        assert np.array_equal(bits.view(np.float32).astype(np.float64), got[name]), name
    if dist == "constant":
        assert np.all(got["q"] == 3)
