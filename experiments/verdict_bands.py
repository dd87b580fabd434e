"""attnacc: the measurements behind the expect rule's bands (README.md, "The default verdict"): each preset scored
against fa2 on the same inputs (the ratio of every statistic to its limit), and fa2's own z = scale / sigma over
seeds. Run: PYTHONPATH=python:tests python3 experiments/verdict_bands.py [presets|sigma]."""
# SPDX-License-Identifier: LGPL-3.0-or-later
import math
import sys

import numpy as np
import torch

import attnacc
from verdict_kernels import inputs

SHAPE = (1, 4, 2, 256, 64)  # B, H, H_kv, N, d
PRESETS = ("fa2-atomic", "fa2-h100", "fa2-h100-bi", "fa2-fixed", "cudnn-h100", "flex-h100", "fa4", "tlx",
           "efficient-h100", "triton-tutorial", "recip", "nki-bf16", "naive-bf16")


def presets(seeds=(1, 2)):
    """Each preset's largest ratio per statistic (over o, dq, dk, dv) against fa2 in the default verdict."""
    for causal in (False, True):
        for seed in seeds:
            ins = inputs(*SHAPE, torch.bfloat16, seed)
            for r in PRESETS:
                sc = attnacc.emulate(r, *ins, layout="bhnd", is_causal=causal)["score"]
                st = {k: max(sc[o].rules["expect"].statistics[k]["ratio"] for o in sc.outputs)
                      for k in attnacc.EXPECT_STATS}
                print(f"{'causal' if causal else 'dense':6s} seed {seed} {r:16s} {'PASS' if sc.passed else 'FAIL'} "
                      + " ".join(f"{k}={v:.3f}" for k, v in st.items()), flush=True)


def sigma(seeds=range(101, 109)):
    """fa2's own least-squares scale and offset in units of their standard errors: rms near 1 if calibrated."""
    zs = {o: [] for o in ("o", "dq", "dk", "dv")}
    zo = {o: [] for o in zs}
    for causal in (False, True):
        for seed in seeds:
            sc = attnacc.emulate("fa2", *inputs(*SHAPE, torch.bfloat16, seed), layout="bhnd", is_causal=causal,
                                 rule="fa")["score"]
            for o in zs:
                zs[o].append(sc[o].ls_scale / sc[o].scale_sigma)
                zo[o].append(sc[o].ls_offset / sc[o].offset_sigma)
    for o in zs:
        a, b = np.array(zs[o]), np.array(zo[o])
        print(f"{o}: scale z rms {math.sqrt((a ** 2).mean()):.2f} max {abs(a).max():.2f}; "
              f"offset z rms {math.sqrt((b ** 2).mean()):.2f} max {abs(b).max():.2f} ({a.size} draws)")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "presets"
    {"presets": presets, "sigma": sigma}[what]()
