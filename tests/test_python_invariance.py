# attnacc: attnacc.check_invariance on an invariant kernel (math attention in float64) and a toy split-KV kernel that is not.
# SPDX-License-Identifier: LGPL-3.0-or-later
import numpy as np
import pytest
import torch

import attnacc


def math_attention(q, k, v):
    """Plain softmax(q k^T / sqrt(d)) v in float64, one sequence at a time: nothing depends on the batch."""
    out = []
    for b in range(q.shape[0]):
        s = (q[b].double() @ k[b].double().transpose(-1, -2)) / q.shape[-1] ** 0.5
        out.append(torch.softmax(s, dim=-1) @ v[b].double())
    return torch.stack(out)


def split_kv_attention(q, k, v):
    """A toy split-KV kernel in float32 whose split count, like FA2's, comes from the batch size: 4 key
    ranges for batches below 4, one above. Each range keeps its own max and sum; the ranges are combined
    by their log-sum-exp. Different split counts round differently."""
    splits = 4 if q.shape[0] < 4 else 1
    q, k, v = q.float(), k.float(), v.float()
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    parts, lses = [], []
    for c in torch.chunk(torch.arange(k.shape[-2]), splits):
        sc = s[..., c]
        m = sc.amax(-1, keepdim=True)
        p = torch.exp(sc - m)
        l = p.sum(-1, keepdim=True)
        parts.append((p @ v[..., c, :]) / l)
        lses.append(m + torch.log(l))
    lse = torch.logsumexp(torch.cat(lses, -1), -1, keepdim=True)
    return sum(torch.exp(x - lse) * o for x, o in zip(lses, parts))  # float32: the rounding shows


def one_sequence(seed, h=2, n_q=16, n_k=256, d=32):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn((1, h, n, d), generator=g).to(torch.bfloat16) for n in (n_q, n_k, n_k)]


def test_math_attention_is_invariant_and_deterministic():
    q, k, v = one_sequence(1)
    rep = attnacc.check_invariance(math_attention, q, k, v, batch_sizes=(1, 2, 4, 8), runs=2)
    assert rep.invariant and rep.deterministic, rep.summary()
    assert [r["batch"] for r in rep.rows] == [1, 2, 4, 8]
    assert all(r["differ"] == 0 and r["max_ulp"] == 0 for r in rep.rows)
    assert "batch-invariant" in rep.summary() and "NOT" not in rep.summary()


def test_split_kv_toy_changes_bits_where_its_split_count_changes():
    q, k, v = one_sequence(2)
    rep = attnacc.check_invariance(split_kv_attention, q, k, v, batch_sizes=(1, 2, 4, 8), runs=2, position=0)
    by_b = {r["batch"]: r for r in rep.rows}
    assert by_b[2]["differ"] == 0, rep.summary()  # 4 splits, as alone
    assert by_b[4]["differ"] > 0 and by_b[8]["differ"] > 0, rep.summary()  # 1 split
    assert by_b[4]["max_ulp"] >= 1 and by_b[4]["max_abs"] > 0
    assert by_b[4]["differ"] == by_b[8]["differ"]  # the same decision at 4 and 8
    assert not rep.invariant and rep.deterministic
    assert "NOT batch-invariant" in rep.summary()
    d = rep.to_dict()
    assert d["invariant"] is False and len(d["rows"]) == 4


def test_position_and_numpy_inputs():
    q, k, v = (t.double().numpy() for t in one_sequence(3))

    def np_attention(q, k, v):
        s = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(q.shape[-1])
        p = np.exp(s - s.max(-1, keepdims=True))
        return np.einsum("bhqk,bhkd->bhqd", p / p.sum(-1, keepdims=True), v)

    rep = attnacc.check_invariance(np_attention, q, k, v, batch_sizes=(2, 4), position=1)
    assert rep.position == 1 and len(rep.rows) == 2 and rep.deterministic


def test_bad_arguments():
    q, k, v = one_sequence(4)
    with pytest.raises(ValueError, match="one sequence"):
        attnacc.check_invariance(math_attention, torch.cat([q, q]), k, v)
    with pytest.raises(ValueError, match="batch_sizes"):
        attnacc.check_invariance(math_attention, q, k, v, batch_sizes=())
    with pytest.raises(ValueError, match="position"):
        attnacc.check_invariance(math_attention, q, k, v, batch_sizes=(1, 2), position=1)
    with pytest.raises(ValueError, match="first axis"):
        attnacc.check_invariance(lambda q, k, v: q[:1], q, k, v, batch_sizes=(2,))
