#!/usr/bin/env python3
# attnacc: attnacc.score of a kernel's outputs on CUDA tensors (SDPA on the GPU as the kernel), device="cuda" beside
# device="cpu" in one process: seconds end to end, and the same verdict and ratios.
# SPDX-License-Identifier: LGPL-3.0-or-later
#
# usage: ATTNACC_LIB=.../libattnacc.so PYTHONPATH=python python3 bench/bench_score_cuda.py [B H N D [RULE [CPU]]]
#   default 2 8 4096 128, rule fa; CPU 0 skips the device="cpu" run (minutes at this size on a few cores).
# Issue 28 item 11's target: <= 3 s end to end with device="cuda" at [2, 8, 4096, 128], fa rule.
import os
import sys
import time

import torch

import attnacc


def kernel(b, h, n, d):
    """q, k, v, do drawn on the GPU in BF16 (a fixed seed) and SDPA's forward and backward there."""
    g = torch.Generator(device="cuda").manual_seed(20261202)
    q, k, v, do = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_()
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    o.backward(do)
    torch.cuda.synchronize()
    return q.detach(), k.detach(), v.detach(), do, dict(o=o.detach(), dq=q.grad, dk=k.grad, dv=v.grad)


def timed(args, outs, rule, device):
    t0 = time.perf_counter()
    s = attnacc.score(*args, **outs, layout="bhnd", rule=rule, device=device)
    return time.perf_counter() - t0, s


def main():
    a = sys.argv[1:]
    b, h, n, d = (int(x) for x in a[:4]) if len(a) >= 4 else (2, 8, 4096, 128)
    rule = a[4] if len(a) > 4 else "fa"
    cpu = a[5] != "0" if len(a) > 5 else True
    q, k, v, do, outs = kernel(b, h, n, d)
    print(f"attnacc.score [{b}, {h}, {n}, {d}] BF16 on CUDA tensors, rule {rule} (kernel: SDPA on "
          f"{torch.cuda.get_device_name()})")
    runs = [("cuda (first call)", "cuda"), ("cuda (again)", "cuda")] + ([("cpu", "cpu")] if cpu else [])
    got = []
    for label, dev in runs:
        sec, s = timed((q, k, v, do), outs, rule, dev)
        ratios = {name: round(o.rules[rule].ratio, 6) for name, o in s.outputs.items() if rule in o.rules}
        got.append((s.passed, ratios))
        print(f"  device {label:18s} {sec:8.2f} s  passed {s.passed}  ratios {ratios}")
    if os.environ.get("ATTNACC_BENCH_PROFILE"):  # where a warm call's seconds go (Python's view; the C library's
        import cProfile  # own phases print with AA_ORACLE_CUDA_TIMES=1 and AA_ATTN_CUDA_TIMES=1)
        import pstats
        prof = cProfile.Profile()
        prof.runcall(timed, (q, k, v, do), outs, rule, "cuda")
        pstats.Stats(prof).sort_stats("cumulative").print_stats(18)
    same = all(x == got[0] for x in got)
    print(f"  verdicts and ratios the same on every device: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
