"""attnacc: is a kernel batch-invariant and run-to-run deterministic? Run it on one sequence alone and inside batches.

    import attnacc
    rep = attnacc.check_invariance(my_attention, q, k, v, batch_sizes=(1, 2, 4, 8, 16, 32, 64))
    print(rep.summary())          # per batch size: elements that changed bits, max ULP, max |diff|, repeat
    assert rep.invariant and rep.deterministic

fn(q, k, v, **kwargs) is called with tensors whose first axis is the batch; q, k, v given here hold one
sequence (first axis of size 1). For each batch size B the sequence is placed at batch position `position`
among B - 1 other sequences drawn at random (a fixed seed), fn runs `runs` times, and the sequence's output
is compared bit for bit with its output in the first run at the first batch size. No libattnacc call is
involved: this measures the user's kernel, on whatever device its tensors are on. `attnacc invariance`
predicts the same table for FA2 (PyTorch's SDPA flash backend) from its launch code.
"""
# SPDX-License-Identifier: LGPL-3.0-or-later
import numpy as np

__all__ = ["check_invariance", "InvarianceReport"]

_UNSIGNED = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _is_torch(x):
    return type(x).__module__.split(".")[0] == "torch"


def _bits(x):
    """The output's bit patterns as unsigned integers (a numpy copy on the CPU)."""
    if _is_torch(x):
        x = x.detach().contiguous().cpu()
        width = x.element_size()
        import torch

        signed = {2: torch.int16, 4: torch.int32, 8: torch.int64}[width]
        return x.view(signed).numpy().view(_UNSIGNED[width])
    a = np.ascontiguousarray(x)
    if a.dtype.kind != "f" or a.dtype.itemsize not in _UNSIGNED:
        raise TypeError("attnacc: check_invariance: outputs must be floating-point tensors, got %s" % a.dtype)
    return a.view(_UNSIGNED[a.dtype.itemsize])


def _ulps(a, b):
    """ULP distance of two arrays of bit patterns of one format, across zero (sign-magnitude order)."""
    w = a.dtype.itemsize * 8
    sign = np.uint64(1) << np.uint64(w - 1)
    a64, b64 = a.astype(np.uint64), b.astype(np.uint64)
    ma, mb = a64 & (sign - np.uint64(1)), b64 & (sign - np.uint64(1))
    same_sign = (a64 & sign) == (b64 & sign)
    return np.where(same_sign, np.maximum(ma, mb) - np.minimum(ma, mb), ma + mb)


def _values(x):
    """The output's values in float64 (exact for every floating format up to float64)."""
    if _is_torch(x):
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


class InvarianceReport:
    """rows: one dict per batch size: batch, differ (elements whose bits differ from the reference),
    max_ulp (in the output's format, across zero), max_abs, repeat_differ
    (elements that differ between runs at this batch size), elements."""

    def __init__(self, rows, runs, position):
        self.rows, self.runs, self.position = rows, runs, position

    @property
    def invariant(self):
        return all(r["differ"] == 0 for r in self.rows)

    @property
    def deterministic(self):
        return all(r["repeat_differ"] == 0 for r in self.rows)

    def to_dict(self):
        return {"rows": self.rows, "runs": self.runs, "position": self.position, "invariant": self.invariant,
                "deterministic": self.deterministic}

    def summary(self):
        ref = self.rows[0]["batch"]
        lines = ["%-7s %-10s %-10s %-12s %s" % ("batch", "differ", "max_ulp", "max_abs", "run-to-run differ")]
        for r in self.rows:
            lines.append("%-7d %-10d %-10d %-12.3g %d" % (r["batch"], r["differ"], r["max_ulp"], r["max_abs"],
                                                         r["repeat_differ"]))
        lines.append("%s against the sequence alone (B = %d); %s over %d runs per batch size" % (
            "batch-invariant" if self.invariant else "NOT batch-invariant", ref,
            "deterministic" if self.deterministic else "NOT deterministic", self.runs))
        return "\n".join(lines)

    def __repr__(self):
        return "InvarianceReport(invariant=%s, deterministic=%s, batches=%s)" % (
            self.invariant, self.deterministic, [r["batch"] for r in self.rows])


def _check_args(q, k, v, batch_sizes, runs, position):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not hasattr(t, "shape") or len(t.shape) < 2 or t.shape[0] != 1:
            raise ValueError("attnacc: check_invariance: %s must hold one sequence: first axis of size 1, got shape %s"
                             % (name, tuple(getattr(t, "shape", ()))))
    sizes = list(batch_sizes)
    if not sizes or any(not isinstance(b, (int, np.integer)) or b < 1 for b in sizes):
        raise ValueError("attnacc: check_invariance: batch_sizes must be positive integers, got %r" % (batch_sizes,))
    if not isinstance(runs, (int, np.integer)) or runs < 1:
        raise ValueError("attnacc: check_invariance: runs must be >= 1, got %r" % (runs,))
    if not isinstance(position, (int, np.integer)) or position < 0 or position >= min(sizes):
        raise ValueError("attnacc: check_invariance: position %r must be below the smallest batch size %d"
                         % (position, min(sizes)))
    return sizes


def _batch_of(t, others, position, b):
    """t (one sequence) at index position among the first b - 1 of others."""
    parts = [others[:position], t, others[position:b - 1]]
    if _is_torch(t):
        import torch

        return torch.cat(parts)
    return np.concatenate(parts)


def _draw_others(t, count, rng):
    """count random sequences shaped and typed like t, on its device."""
    shape = (count,) + tuple(t.shape[1:])
    a = rng.standard_normal(shape)
    if _is_torch(t):
        import torch

        return torch.from_numpy(a).to(dtype=t.dtype, device=t.device)
    return a.astype(t.dtype)


def check_invariance(fn, q, k, v, batch_sizes=(1, 2, 4, 8, 16, 32, 64), runs=2, position=0, seed=0, **kwargs):
    """Run fn on the sequence (q, k, v) alone and inside batches; see the module's docstring. Returns an
    InvarianceReport. fn's output is a tensor (or a tuple whose first element is one) with the batch first."""
    sizes = _check_args(q, k, v, batch_sizes, runs, position)
    rng = np.random.default_rng(seed)
    others = [_draw_others(t, max(sizes) - 1, rng) for t in (q, k, v)]
    ref, rows = None, []
    for b in sizes:
        qb, kb, vb = (_batch_of(t, o, position, b) for t, o in zip((q, k, v), others))
        outs = []
        for _ in range(runs):
            o = fn(qb, kb, vb, **kwargs)
            o = o[0] if isinstance(o, (tuple, list)) else o
            if o.shape[0] != b:
                raise ValueError("attnacc: check_invariance: fn returned a first axis of %d for a batch of %d"
                                 % (o.shape[0], b))
            outs.append(_bits(o[position:position + 1]))
            if len(outs) == 1:
                val = _values(o[position:position + 1])
        if ref is None:
            ref, ref_val = outs[0], val
        if outs[0].shape != ref.shape or outs[0].dtype != ref.dtype:
            raise ValueError("attnacc: check_invariance: the output's shape or dtype changed with the batch")
        u = _ulps(outs[0], ref)
        diff = np.abs(val - ref_val)
        rows.append({"batch": int(b), "differ": int((outs[0] != ref).sum()), "max_ulp": int(u.max(initial=0)),
                     "max_abs": float(np.nan_to_num(diff, nan=np.inf).max(initial=0.0)),
                     "repeat_differ": int(max(((x != outs[0]).sum() for x in outs[1:]), default=0)),
                     "elements": int(ref.size)})
    return InvarianceReport(rows, runs, position)
