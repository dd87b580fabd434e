"""attnacc: tests of the Python package on torch's own math attention as "the kernel" (run by tests/tpython.sh)."""
# SPDX-License-Identifier: LGPL-3.0-or-later
import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import attnacc  # noqa: E402

B, H, HKV, N, D = 2, 4, 2, 32, 16
SEED = 20261201


def math_attention(q, k, v, do, causal=False):
    """torch's math attention with autograd, GQA by repeating kv heads; tensors [B, H, N, d]."""
    qq, kk, vv = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    g = q.shape[1] // k.shape[1]
    kr, vr = kk.repeat_interleave(g, dim=1), vv.repeat_interleave(g, dim=1)
    s = (qq @ kr.transpose(-1, -2)) * (q.shape[-1] ** -0.5)
    if causal:
        mask = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).triu(1)
        s = s.masked_fill(mask, float("-inf"))
    o = torch.softmax(s, dim=-1) @ vr
    o.backward(do)
    return o.detach(), qq.grad, kk.grad, vv.grad


def make(dtype, causal=False):
    gen = torch.Generator().manual_seed(SEED)
    q = torch.randn(B, H, N, D, generator=gen).to(dtype)
    k = torch.randn(B, HKV, N, D, generator=gen).to(dtype)
    v = torch.randn(B, HKV, N, D, generator=gen).to(dtype)
    do = torch.randn(B, H, N, D, generator=gen).to(dtype)
    return (q, k, v, do), math_attention(q, k, v, do, causal)


def in_layout(ts, layout):
    return [t.transpose(1, 2).contiguous() for t in ts] if layout == "bnhd" else list(ts)


LAYOUTS = ["bhnd", "bnhd"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("causal", [False, True])
def test_fp32_kernel_passes_every_rule(layout, causal):
    ins, outs = make(torch.float32, causal)
    q, k, v, do = in_layout(ins, layout)
    o, dq, dk, dv = in_layout(outs, layout)
    res = attnacc.assert_accurate(q, k, v, do, o=o, dq=dq, dk=dk, dv=dv, layout=layout, is_causal=causal, rule="all")
    assert res.passed and res.layout == layout
    for name in ("o", "dq", "dk", "dv"):
        for rule in attnacc.RULES:
            assert res[name].rules[rule].passed, (name, rule)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_bf16_kernel(layout):
    ins, outs = make(torch.bfloat16)
    q, k, v, do = in_layout(ins, layout)
    o, dq, dk, dv = in_layout(outs, layout)
    res = attnacc.assert_accurate(q, k, v, do, o=o, dq=dq, dk=dk, dv=dv, layout=layout, rule=["abs-rel", "fa", "sdpa"])
    assert res.problem["input_fmt"] == "bf16" and res["dq"].ulp_fmt == "bf16"
    # torch.testing.assert_close's bf16 defaults (atol 1e-5) are meant for one rounding: a correct BF16
    # attention misses them at near-zero elements, whose error is about ulp(max |ref|) (README-run.md).
    torch_rule = attnacc.score(q, k, v, do, o=o, dq=dq, dk=dk, dv=dv, layout=layout, rule="torch")
    assert not torch_rule.passed and torch_rule["dq"].rules["torch"].ratio > 1


@pytest.mark.parametrize("layout", LAYOUTS)
def test_dq_times_1008_fails_torch_and_fa(layout):
    ins, outs = make(torch.float32)
    o, dq, dk, dv = outs
    dq = dq * 1.008
    q, k, v, do = in_layout(ins, layout)
    o, dq, dk, dv = in_layout((o, dq, dk, dv), layout)
    res = attnacc.score(q, k, v, do, o=o, dq=dq, dk=dk, dv=dv, layout=layout, rule="all")
    assert not res["dq"].rules["torch"].passed
    assert not res["dq"].rules["fa"].passed
    for name in ("o", "dk", "dv"):
        assert res[name].rules["torch"].passed and res[name].rules["fa"].passed
    # The worst element, from torch's own FP64 computation (independent of attnacc).
    ref = math_attention(*(t.double() for t in ins))[1]
    ref = in_layout([ref], layout)[0]
    err = (dq.double() - ref).abs()
    worst = tuple(int(i) for i in np.unravel_index(int(err.argmax()), err.shape))
    for rule in ("torch", "fa"):
        with pytest.raises(AssertionError) as e:
            attnacc.assert_accurate(q, k, v, do, o=o, dq=dq, dk=dk, dv=dv, layout=layout, rule=rule)
        text = str(e.value)
        assert f"dq fails the {rule} rule" in text and f"layout {layout}" in text
        assert "(" + ", ".join(map(str, worst)) + ")" in text
    assert math.isclose(res["dq"].max_abs, float(err.max()), rel_tol=1e-9)


def test_wrong_layout_fails_naming_it():
    ins, outs = make(torch.float32)
    with pytest.raises(AssertionError, match=r"layout bnhd \[B, N, H, d\]"):
        attnacc.assert_accurate(*ins, o=outs[0], dq=outs[1], dk=outs[2], dv=outs[3], layout="bnhd", rule="fa")
    # Without layout= the [2, 4, 32, 16] / [2, 2, 32, 16] shapes fit both 4-axis layouts: refused.
    with pytest.raises(ValueError, match=r"bhnd .*bnhd"):
        attnacc.score(*ins, o=outs[0], dq=outs[1])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layout_inferred_when_unambiguous(layout):
    # q [1, 6, 4, 8] / k [1, 3, 3, 8] fit only bhnd (H=6, H_kv=3; as bnhd H_kv=3 would not divide H=4),
    # and their transposes only bnhd.
    gen = torch.Generator().manual_seed(1)
    q, do = torch.randn(1, 6, 4, 8, generator=gen), torch.randn(1, 6, 4, 8, generator=gen)
    k, v = torch.randn(1, 3, 3, 8, generator=gen), torch.randn(1, 3, 3, 8, generator=gen)
    outs = math_attention(q, k, v, do)
    res = attnacc.score(*in_layout((q, k, v, do), layout), *in_layout(outs, layout), rule="all")
    assert res.layout == layout and res.passed
    assert (res.problem["heads"], res.problem["kv_heads"], res.problem["n"], res.problem["n_k"]) == (6, 3, 4, 3)


@pytest.mark.parametrize("layout", ["bhnd", "bnhd", "hnd", "nd"])
def test_oracle_matches_torch_fp64(layout):
    ins, _ = make(torch.float64)
    if layout in ("hnd", "nd"):
        ins = [t[0] if layout == "hnd" else t[0, 0] for t in ins]
        ins = [t.unsqueeze(0) if layout == "nd" else t for t in ins]
        ref = math_attention(*(t.unsqueeze(0) for t in ins))
        ref = [t[0] for t in ref]
        if layout == "nd":
            ins, ref = [t[0] for t in ins], [t[0] for t in ref]
    else:
        ref = math_attention(*ins)
        ins, ref = in_layout(ins, layout), in_layout(ref, layout)
    out = attnacc.oracle(*ins, layout=layout)
    for name, r in zip(("o", "dq", "dk", "dv"), ref):
        np.testing.assert_allclose(out[name], r.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


def _ulp32(x):
    """ulp in binary32 of |x| (normal range), from numpy's spacing."""
    return np.spacing(np.float32(abs(x))).astype(np.float64)


def test_metric_formulas_fp32():
    ins, outs = make(torch.float32)
    res = attnacc.score(*ins, o=outs[0], dq=outs[1], dk=outs[2], dv=outs[3], layout="bhnd")
    ref = math_attention(*(t.double() for t in ins))
    for name, got, r in zip(("o", "dq"), outs[:2], ref[:2]):
        a, b = got.double().numpy().ravel(), r.numpy().ravel()
        m = res[name]
        np.testing.assert_allclose(m.max_abs, np.abs(a - b).max(), rtol=1e-6)
        np.testing.assert_allclose(m.rel_l2, np.linalg.norm(a - b) / np.linalg.norm(b), rtol=1e-6)
        np.testing.assert_allclose(m.ulp_normwise, np.abs(a - b).max() / _ulp32(np.abs(b).max()), rtol=1e-6)
        # ULPs from the bit patterns of a and of RN32(b) (sign-magnitude ordinals)
        def ordinal(x):
            i = x.astype(np.float32).view(np.int32).astype(np.int64)
            return np.where(i < 0, -(i & 0x7FFFFFFF), i)

        u = np.abs(ordinal(a) - ordinal(b.astype(np.float32)))
        assert m.ulp_max == u.max() and m.ulp_median == np.median(u)
        floor = np.abs(b).max() / 16
        sel = np.abs(b) >= floor
        np.testing.assert_allclose(m.max_rel, (np.abs(a - b)[sel] / np.abs(b[sel])).max(), rtol=1e-6)


def test_fp16_counts_fp16_ulps():
    # CPU torch has no fp16 matmul: the "kernel" computes in fp32 from fp16 inputs and stores fp16.
    gen = torch.Generator().manual_seed(SEED)
    ins = [torch.randn(1, 2, 16, 8, generator=gen).half() for _ in range(4)]
    outs = [t.half() for t in math_attention(*(t.float() for t in ins))]
    res = attnacc.score(*ins, o=outs[0], dq=outs[1], layout="bhnd", rule="all")
    assert res["o"].ulp_fmt == "fp16" and res["o"].data_fmt == "fp16" and res.problem["input_fmt"] == "fp16"
    as32 = attnacc.score(*ins, o=outs[0], layout="bhnd", ulp_fmt="fp32")
    # one fp16 ULP is 2^13 fp32 ULPs in the normal range: the fp32 count is about 8192 times larger
    assert as32["o"].ulp_p99 > 1000 * max(res["o"].ulp_p99, 1)
    assert res.passed


def test_numpy_bf16_bits_and_to_dict():
    ins, outs = make(torch.bfloat16)
    bits = [t.view(torch.int16).numpy() for t in ins]
    obits = outs[1].view(torch.int16).numpy()
    # the kernel is torch's BF16 math attention: the naive-bf16 design, named for the expect rule
    # fa too: its naive reference runs only when a rule reads it (the default expect rule does not)
    res = attnacc.score(*bits, dq=obits, layout="bhnd", bf16_bits=True, expect="naive-bf16", rule=["expect", "fa"])
    ref = attnacc.score(*ins, dq=outs[1], layout="bhnd", expect="naive-bf16")
    assert res["dq"].max_abs == ref["dq"].max_abs and res.problem["input_fmt"] == "bf16"
    d = res.to_dict()
    run = d["runs"][0]
    assert d["schema_version"] == attnacc.SCHEMA_VERSION == 2 and run["outputs"]["dq"]["rules"]["fa"]["pass"]
    assert d["layout"] == {"name": "bhnd", "axes": "[B, H, N, d]", "b": B, "heads": H, "kv_heads": HKV}
    assert d["problem"]["heads"] == B * H and run["verdict"]["pass"] is True and len(d["runs"]) == 1
    json.dumps(d)  # plain JSON types only
    with pytest.raises(TypeError, match="bf16_bits"):
        attnacc.score(*bits, dq=obits, layout="bhnd")


def test_sdpa_kwargs():
    ins, outs = make(torch.float32, causal=True)
    a = attnacc.score(*ins, o=outs[0], layout="bhnd", causal=True, softmax_scale=D ** -0.5)
    b = attnacc.score(*ins, o=outs[0], layout="bhnd", is_causal=True, scale=D ** -0.5, enable_gqa=True)
    assert a.passed and b.passed and a["o"].max_abs == b["o"].max_abs
    wrong = attnacc.score(*ins, o=outs[0], layout="bhnd")  # causal output scored as non-causal
    assert not wrong.passed
    with pytest.raises(ValueError, match="enable_gqa"):
        attnacc.score(*ins, o=outs[0], layout="bhnd", enable_gqa=False)
    with pytest.raises(ValueError, match="packed layout nhd"):
        attnacc.score(*ins, o=outs[0], layout="bhnd", cu_seqlens_q=torch.tensor([0, N]))


VARLEN = [5, 17, 10]  # sequence lengths of the varlen batch


def varlen_batch(dtype, causal):
    """flash_attn_varlen_func's packed [total, H, d] inputs and, as "the kernel", torch's math attention run
    on each sequence alone ([1, H, n, d]) and packed again."""
    gen = torch.Generator().manual_seed(SEED + 1)
    total = sum(VARLEN)
    q, do = (torch.randn(total, H, D, generator=gen).to(dtype) for _ in range(2))
    k, v = (torch.randn(total, HKV, D, generator=gen).to(dtype) for _ in range(2))
    cu = torch.tensor([0] + list(np.cumsum(VARLEN)), dtype=torch.int32)
    outs = [[], [], [], []]
    for b in range(len(VARLEN)):
        sl = slice(int(cu[b]), int(cu[b + 1]))
        one = [t[sl].transpose(0, 1).unsqueeze(0) for t in (q, k, v, do)]  # [1, H, n, d]
        for acc, t in zip(outs, math_attention(*one, causal=causal)):
            acc.append(t.squeeze(0).transpose(0, 1))
    return (q, k, v, do), [torch.cat(t) for t in outs], cu


@pytest.mark.parametrize("causal", [False, True])
def test_varlen_fp32_kernel(causal):
    ins, outs, cu = varlen_batch(torch.float32, causal)
    o, dq, dk, dv = outs
    res = attnacc.assert_accurate(*ins, o=o, dq=dq, dk=dk, dv=dv, cu_seqlens_q=cu, causal=causal, rule="all")
    assert res.layout == "nhd" and res.passed
    bad = attnacc.score(*ins, o=o, dq=dq * 1.008, dk=dk, dv=dv, cu_seqlens_q=cu, cu_seqlens_k=cu, causal=causal,
                        rule="all")
    assert not bad["dq"].rules["torch"].passed and not bad["dq"].rules["fa"].passed
    assert bad["dk"].rules["torch"].passed
    # the same tensors read as one long sequence: queries see other sequences' keys
    whole = attnacc.score(*ins, o=o, layout="nhd", causal=causal, rule="torch")
    assert not whole.passed


def test_varlen_oracle_and_emulate_match_per_sequence():
    ins, _, cu = varlen_batch(torch.bfloat16, True)
    packed = attnacc.oracle(*ins, cu_seqlens_q=cu, causal=True)
    em = attnacc.emulate("fa2", *ins, cu_seqlens_q=cu, causal=True)
    for b in range(len(VARLEN)):
        sl = slice(int(cu[b]), int(cu[b + 1]))
        one = attnacc.oracle(*[t[sl] for t in ins], layout="nhd", causal=True)
        eo = attnacc.emulate("fa2", *[t[sl] for t in ins], layout="nhd", causal=True)
        for name in ("o", "dq", "dk", "dv"):
            assert np.array_equal(packed[name][sl], one[name]), name
            assert np.array_equal(em[name][sl], eo[name]), name
    assert em["score"].passed


def test_varlen_refusals():
    ins, outs, cu = varlen_batch(torch.float32, False)
    with pytest.raises(ValueError, match="cu_seqlens_q ends at"):
        attnacc.score(*ins, o=outs[0], cu_seqlens_q=cu[:-1])
    with pytest.raises(ValueError, match="cu_seqlens_q has 4 offsets, cu_seqlens_k 3"):
        attnacc.score(*ins, o=outs[0], cu_seqlens_q=cu, cu_seqlens_k=cu[:-1])
    with pytest.raises(ValueError, match="1-D integer"):
        attnacc.score(*ins, o=outs[0], cu_seqlens_q=cu.float())


def test_varlen_command(tmp_path):
    """`attnacc score --cu-seqlens` on np.savez files: exit 0 on the correct kernel, 1 with dq x 1.008."""
    import os
    import subprocess

    cli = os.environ.get("ATTNACC_CLI")
    if not cli or not os.path.exists(cli):
        pytest.skip("ATTNACC_CLI (the built experiments/attnacc) is not set")
    ins, outs, cu = varlen_batch(torch.float32, True)
    np.savez(tmp_path / "in.npz", **{n: t.numpy() for n, t in zip(("q", "k", "v", "do"), ins)})
    (tmp_path / "cu.txt").write_text(" ".join(str(int(x)) for x in cu) + "\n")
    for scale, want in ((1.0, 0), (1.008, 1)):
        g = dict(zip(("o", "dq", "dk", "dv"), outs))
        g["dq"] = g["dq"] * scale
        np.savez(tmp_path / "g.npz", **{n: t.numpy() for n, t in g.items()})
        r = subprocess.run([cli, "score", "--inputs", str(tmp_path / "in.npz"), "--grads", str(tmp_path / "g.npz"),
                            "--cu-seqlens", str(tmp_path / "cu.txt"), "--causal", "--rule", "torch,fa"],
                           capture_output=True, text=True)
        assert r.returncode == want, (scale, r.stdout, r.stderr)
        assert "varlen batch: 3 sequences" in r.stdout


def test_same_json_as_the_command(tmp_path):
    """score().to_dict() and `attnacc score --json` share one schema and, on the same files, the same numbers."""
    import os
    import subprocess

    cli = os.environ.get("ATTNACC_CLI")
    if not cli or not os.path.exists(cli):
        pytest.skip("ATTNACC_CLI (the built experiments/attnacc) is not set")
    ins, outs = make(torch.float32)
    outs = list(outs)
    outs[1] = outs[1] * 1.008
    for n, t in zip(("q", "k", "v", "do", "o", "dq", "dk", "dv"), list(ins) + outs):
        np.save(tmp_path / f"{n}.npy", t.numpy())
    run = subprocess.run([cli, "score", "--inputs", str(tmp_path), "--grads", str(tmp_path), "--layout", "bhnd",
                          "--rule", "torch,fa", "--json"], capture_output=True, text=True)
    assert run.returncode == 1, run.stderr
    assert "dq fails the torch rule" in run.stderr
    c = json.loads(run.stdout)
    p = attnacc.score(*ins, o=outs[0], dq=outs[1], dk=outs[2], dv=outs[3], layout="bhnd", rule=["torch", "fa"])
    d = p.to_dict()
    assert set(d) <= set(c) and d["schema_version"] == c["schema_version"] and d["layout"] == c["layout"]
    assert set(d["attnacc"]) == set(c["attnacc"]) and len(d["runs"]) == len(c["runs"]) == 1
    dr, cr = d["runs"][0], c["runs"][0]
    assert set(dr) <= set(cr) and dr["variant"] == cr["variant"] == "external"
    assert cr["verdict"]["pass"] is False and dr["verdict"]["pass"] is False
    for name in ("o", "dq", "dk", "dv"):
        po, co = dr["outputs"][name], cr["outputs"][name]
        assert set(po) <= set(co), name
        assert po["robust"] == co["robust"] and po["rules"] == co["rules"], name


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mult", [1.0, 1.008])
def test_torch_rule_agrees_with_assert_close(dtype, mult):
    """The torch rule is torch.testing.assert_close itself (the output dtype's defaults; the comparison in
    fp64 against torch's own FP64 attention of the same inputs): same verdict, same mismatch count."""
    import re

    ins, outs = make(dtype)
    dq = (outs[1].double() * mult).to(dtype)
    ref = math_attention(*(t.double() for t in ins))[1]
    res = attnacc.score(*ins, dq=dq, layout="bhnd", rule="torch")
    try:
        torch.testing.assert_close(dq, ref, check_dtype=False)
        torch_mismatched = 0
    except AssertionError as e:
        torch_mismatched = int(re.search(r"Mismatched elements: (\d+) /", str(e)).group(1))
    assert res.passed == (torch_mismatched == 0)
    assert res["dq"].rules["torch"].fail_count == torch_mismatched


def test_readme_example(tmp_path):
    """The README's "Score your kernel" example runs as written and passes."""
    import os
    import subprocess
    import sys

    readme = os.path.join(os.environ.get("top_srcdir", os.path.join(os.path.dirname(__file__), "..")), "README.md")
    text = open(readme, encoding="utf-8").read()
    section = text[text.index("## Score your kernel"):]
    code = section[section.index("```python\n") + 10:section.index("```\n", section.index("```python\n") + 10)]
    (tmp_path / "test_my_kernel.py").write_text(code)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "4 passed" in run.stdout


def test_emulate_matches_the_command():
    """emulate("fa2") on drawn inputs gives the command's numbers for the same inputs and recipe (files
    written by `attnacc run --save`), and fp32 inputs are rounded to the recipe's bf16."""
    import os
    import subprocess
    import tempfile

    cli = os.environ.get("ATTNACC_CLI")
    if not cli or not os.path.exists(cli):
        pytest.skip("ATTNACC_CLI (the built experiments/attnacc) is not set")
    with tempfile.TemporaryDirectory() as d:
        run = subprocess.run([cli, "run", "--variant", "fa2", "--n", "48", "--d", "16", "--heads", "2",
                              "--kv-heads", "1", "--seed", "5", "--save", d, "--json"], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        c = json.loads(run.stdout)
        bits = [np.load(os.path.join(d, n + ".npy")) for n in ("q", "k", "v", "do")]
        saved = {n: np.load(os.path.join(d, n + ".npy")) for n in ("o", "dq", "dk", "dv")}
    em = attnacc.emulate("fa2", *[b.view(np.int16) for b in bits], layout="hnd", bf16_bits=True)
    assert em["recipe"] == "fa2" and em["rounded"] == 0
    for name in ("o", "dq", "dk", "dv"):
        want = (saved[name].astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        assert np.array_equal(em[name], want), name
        assert em["score"][name].max_abs == c["runs"][0]["outputs"][name]["max_abs"], name
    # fp32 inputs are rounded to bf16 first: the same outputs
    fl = [(b.astype(np.uint32) << 16).view(np.float32) + np.float32(1e-6) for b in bits]
    em2 = attnacc.emulate("fa2", *fl, layout="hnd")
    assert em2["rounded"] > 0 and em2["score"].problem["input_fmt"] == "bf16"
    with pytest.raises(ValueError, match="unknown recipe preset"):
        attnacc.emulate("no-such-recipe", *fl, layout="hnd")


@pytest.mark.parametrize("spec", ["fa2:bwd.ds_fmt=fp32", "FILE", "nki:fwd.p_fmt=fp32,bwd.ds_fmt=fp32"])
def test_one_spec_grammar(spec, tmp_path):
    """A variant spec means the same in emulate() and in --variant (one parser, aa_recipe_from_spec): the same
    recipe name and the same bits, for NAME:key=value and for a recipe file that sets no name (named after the
    file in both)."""
    import os
    import subprocess

    cli = os.environ.get("ATTNACC_CLI")
    if not cli or not os.path.exists(cli):
        pytest.skip("ATTNACC_CLI (the built experiments/attnacc) is not set")
    if spec == "FILE":
        spec = str(tmp_path / "my-variant.recipe")
        with open(spec, "w") as f:
            f.write("base = fa2\nbwd.ds_fmt = fp32\nfwd.p_fmt = fp32\n")
    d = str(tmp_path / "save")
    run = subprocess.run([cli, "run", "--variant", spec, "--n", "40", "--d", "16", "--seed", "3", "--save", d,
                          "--json"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    name = json.loads(run.stdout)["runs"][0]["variant"]
    bits = [np.load(os.path.join(d, n + ".npy")) for n in ("q", "k", "v", "do")]
    saved = {n: np.load(os.path.join(d, n + ".npy")) for n in ("o", "dq", "dk", "dv")}
    em = attnacc.emulate(spec, *[b.view(np.int16) for b in bits], layout="hnd", bf16_bits=True)
    assert em["recipe"] == name
    for out in ("o", "dq", "dk", "dv"):
        want = (saved[out].astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        assert np.array_equal(em[out], want), out


def test_kernel_dtype():
    """A BF16 kernel whose tensors were saved as float32: judged against an FP32 naive reference fa fails by
    orders of magnitude; kernel_dtype="bf16" judges it as the BF16 kernel it is. A dtype that cannot hold the
    inputs is refused."""
    ins, outs = make(torch.bfloat16)
    f32 = [t.float() for t in ins], [t.float() for t in outs]
    stored = attnacc.score(*f32[0], o=f32[1][0], dq=f32[1][1], dk=f32[1][2], dv=f32[1][3], layout="bhnd",
                           rule="fa")
    assert not stored.passed and stored.outputs["dq"].rules["fa"].ratio > 100
    as_bf16 = attnacc.score(*f32[0], o=f32[1][0], dq=f32[1][1], dk=f32[1][2], dv=f32[1][3], layout="bhnd",
                            kernel_dtype=torch.bfloat16, rule="fa")
    assert as_bf16.passed, as_bf16.summary()
    # the default verdict: the expect rule, here with the kernel's design named (torch's BF16 math attention is
    # naive-bf16); without kernel_dtype the format is inferred from the values, with a warning
    with pytest.warns(UserWarning, match="kernel_dtype"):
        inferred = attnacc.score(*f32[0], o=f32[1][0], dq=f32[1][1], dk=f32[1][2], dv=f32[1][3], layout="bhnd",
                                 expect="naive-bf16")
    assert inferred.passed and inferred.problem["kernel_fmt"] == "bf16", inferred.summary()
    q = f32[0][0].clone()
    q[0, 0, 0, 0] = 2.0 ** -30  # BF16 holds it, FP16 does not
    with pytest.raises(ValueError, match="not fp16"):
        attnacc.score(q, *f32[0][1:], dq=f32[1][1], layout="bhnd", kernel_dtype="fp16")


def test_default_rule_by_dtype():
    ins, outs = make(torch.float64)
    res = attnacc.score(*ins, o=outs[0], dq=outs[1], layout="bhnd")
    assert res.rules == ("torch",) and res.passed
    with pytest.raises(ValueError, match="naive reference"):
        attnacc.score(*ins, o=outs[0], layout="bhnd", rule="fa")
    ins, outs = make(torch.float32)
    assert attnacc.score(*ins, o=outs[0], layout="bhnd").rules == ("expect",)


def test_nhd_layout():
    """flash-attn's [N, H, d] (no batch axis) with layout="nhd" gives the [H, N, d] oracle transposed."""
    ins, _ = make(torch.float64)
    hnd = [t[0] for t in ins]
    nhd = [t.transpose(0, 1).contiguous() for t in hnd]
    a, b = attnacc.oracle(*hnd, layout="hnd"), attnacc.oracle(*nhd, layout="nhd")
    for name in ("o", "dq", "dk", "dv"):
        assert np.array_equal(a[name].transpose(1, 0, 2), b[name]), name
    assert np.array_equal(a["lse"], b["lse"])


def test_no_verdict_where_the_exact_result_overflows():
    """FP32 data whose exact dq overflows FP32 (v and dO near 1e20 make dP near 1e40): score refuses with the output
    named instead of judging a kernel against Inf; FP64 inputs of 1e300 are refused by the oracle's range."""
    g = np.random.default_rng(4)
    q, k = [g.standard_normal((1, 1, 8, 4)).astype(np.float32) for _ in range(2)]
    v, do = [(g.standard_normal((1, 1, 8, 4)) * 1e20).astype(np.float32) for _ in range(2)]
    with pytest.raises(ValueError, match="exact dq is not finite in fp32"):
        attnacc.score(q, k, v, do, dq=q, dk=k, dv=v, layout="bhnd")
    big = [g.standard_normal((1, 1, 8, 4)) * 1e300 for _ in range(4)]
    with pytest.raises(ValueError, match="beyond the oracle's range"):
        attnacc.score(*big, dq=big[0], layout="bhnd")
