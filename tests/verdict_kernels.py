"""attnacc: a correct FA2-style attention backward written in torch, and the same kernel with one precision choice
flipped per planted bug (tests/test_verdict.py and experiments/verdict_table.py use them)."""
# SPDX-License-Identifier: LGPL-3.0-or-later
import torch

F32 = torch.float32
# The BF16-accumulator bugs round the running sum after each MMA k-step: 16 for BF16 / FP16 mma.m16n8k16
# ([mma-sim]), the accumulator a kernel author declares as the input dtype instead of fp32.
TILE = 16
SCALE_BUGS = {"dq_x1.008": 1.008, "dq_x1.002": 1.002, "dk_x1.005": 1.005}

# Each bug flips one choice of the correct kernel; the first seven are the table of the user's measurement
# (README "The default verdict"), the others are further mistakes kernel authors make.
BUGS = ("dq_x1.008", "dq_x1.002", "dk_x1.005", "ds_bf16", "dq_acc_bf16", "dv_acc_bf16", "causal_off_by_one",
        "lse_bf16", "gqa_sum_bf16", "d_bf16_products", "exp_bf16", "dq_row_zero")
CORRECT = ("fa2", "fp32_math")


def _r(x, dt):
    """x rounded (RNE) to dt and back to fp32: what storing an fp32 value in the kernel's dtype does."""
    return x.to(dt).to(F32)


def _mask(n_q, n_k, causal, off_by_one):
    """Top-left causal: query i sees keys j <= i (off by one: j <= i + 1)."""
    if not causal:
        return None
    return torch.ones(n_q, n_k, dtype=torch.bool).triu(2 if off_by_one else 1)


def _tiled_sum(a, b, dt, bf16_acc):
    """a @ b accumulated over tiles of TILE along the contracted axis, in fp32 or (bug) with the running sum
    rounded to dt after each tile."""
    acc = None
    for s in range(0, a.shape[-1], TILE):
        part = a[..., s:s + TILE] @ b[..., s:s + TILE, :]
        acc = part if acc is None else acc + part
        if bf16_acc:
            acc = _r(acc, dt)
    return acc


def _group_sum(x, g, dt, bf16_sum):
    """Sum the g query heads of each kv head ([B, H, N, d] -> [B, H/g, N, d]): fp32, or (bug) each head's value
    rounded to dt and the sum rounded after each addition."""
    b, h, n, d = x.shape
    x = x.reshape(b, h // g, g, n, d)
    if not bf16_sum:
        return x.sum(2)
    acc = _r(x[:, :, 0], dt)
    for i in range(1, g):
        acc = _r(acc + _r(x[:, :, i], dt), dt)
    return acc


def fa2_kernel(q, k, v, do, causal, bug=None):
    """o, dq, dk, dv in q's dtype of an FA2-style kernel ([fa2]): S = QK^T in fp32 from the dtype's inputs; the
    forward's P rounded to the dtype for PV with the fp32 row sum; LSE in fp32; the backward's P recomputed from
    the LSE in fp32 and rounded to the dtype for dV = P^T dO; dP, D = rowsum(dO * O) and dS = P (dP - D) in
    fp32, dS rounded to the dtype for dQ = dS K and dK = dS^T Q; fp32 accumulators; GQA's dK, dV summed over
    the group in fp32; outputs rounded to the dtype. bug: one of BUGS. One (batch, kv head) group at a time."""
    dt = q.dtype
    g = q.shape[1] // k.shape[1]
    outs = [torch.empty(t.shape, dtype=F32) for t in (q, q, k, k)]
    for b in range(q.shape[0]):
        for j in range(k.shape[1]):
            qs = slice(j * g, (j + 1) * g)
            res = _group(q[b, qs], k[b, j:j + 1], v[b, j:j + 1], do[b, qs], causal, bug)
            outs[0][b, qs], outs[1][b, qs], outs[2][b, j], outs[3][b, j] = res
    o, dq, dk, dv = outs
    if bug == "dq_row_zero":  # one query row never written (a tile edge skipped)
        dq[0, 0, q.shape[2] // 2 + 1] = 0
    return tuple(t.to(dt) for t in (o, dq, dk, dv))


def _group(q, k, v, do, causal, bug):
    """fa2_kernel on the g query heads q, do [g, N, d] of one kv head k, v [1, N, d]: o, dq [g, N, d] and the
    group's dk, dv [N, d], in fp32 holding values of the dtype."""
    dt = q.dtype
    scale = q.shape[-1] ** -0.5
    qf, kf, vf, dof = (t.to(F32) for t in (q, k, v, do))
    s = (qf @ kf.transpose(-1, -2)) * scale
    mask = _mask(q.shape[1], k.shape[1], causal, bug == "causal_off_by_one")
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    m = s.amax(-1, keepdim=True)
    pt = torch.exp(s - m)
    o = _r((_r(pt, dt) @ vf) / pt.sum(-1, keepdim=True), dt)
    lse = m + torch.log(pt.sum(-1, keepdim=True))
    del pt
    if bug == "lse_bf16":
        lse = _r(lse, dt)
    p = _r(torch.exp(_r(s - lse, dt)), dt) if bug == "exp_bf16" else torch.exp(s - lse)
    del s
    dv = _tiled_sum(_r(p, dt).transpose(-1, -2), dof, dt, bug == "dv_acc_bf16")
    dp = dof @ vf.transpose(-1, -2)
    dd = (_r(dof * o, dt) if bug == "d_bf16_products" else dof * o).sum(-1, keepdim=True)
    if bug == "ds_bf16":  # dS computed in the dtype: dP, D, their difference and the product each rounded
        ds = _r(_r(p, dt) * _r(_r(dp, dt) - _r(dd, dt), dt), dt)
    else:
        ds = _r(p * (dp - dd), dt)
    del p, dp
    # the scale bugs: a wrong factor in fp32, before the rounding to the dtype (a softmax scale folded twice
    # with a slightly different constant, a log2(e) of too few digits)
    dq = _tiled_sum(ds, kf.expand(q.shape[0], -1, -1), dt, bug == "dq_acc_bf16") * scale * (SCALE_BUGS.get(bug, 1.0) if bug != "dk_x1.005" else 1.0)
    dk = (ds.transpose(-1, -2) @ qf) * scale * (SCALE_BUGS["dk_x1.005"] if bug == "dk_x1.005" else 1.0)
    return (o, _r(dq, dt)) + tuple(_group_sum(x.unsqueeze(0), q.shape[0], dt, bug == "gqa_sum_bf16")[0, 0]
                                   for x in (dk, dv))


def fp32_math_kernel(q, k, v, do, causal):
    """Plain fp32 math on the upcast inputs (autograd), each output rounded to q's dtype once: a correct kernel
    more accurate than FA2."""
    dt = q.dtype
    qq, kk, vv = (t.detach().to(F32).requires_grad_(True) for t in (q, k, v))
    g = q.shape[1] // k.shape[1]
    s = (qq @ kk.repeat_interleave(g, dim=1).transpose(-1, -2)) * (q.shape[-1] ** -0.5)
    mask = _mask(q.shape[2], k.shape[2], causal, False)
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    o = torch.softmax(s, dim=-1) @ vv.repeat_interleave(g, dim=1)
    o.backward(do.to(F32))
    return tuple(t.detach().to(dt) for t in (o, qq.grad, kk.grad, vv.grad))


def inputs(b, h, hkv, n, d, dt, seed):
    """q, k, v, do [B, H, N, d] (k, v with hkv heads) of standard normal values rounded to dt."""
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, hh, n, d, generator=gen).to(dt) for hh in (h, hkv, hkv, h))


def kernels(ins, causal):
    """name -> (o, dq, dk, dv) of every correct kernel and every bug on the inputs ins."""
    out = {"fa2": fa2_kernel(*ins, causal), "fp32_math": fp32_math_kernel(*ins, causal)}
    for bug in BUGS:
        out[bug] = fa2_kernel(*ins, causal, bug)
    return out
